"""The decision-plane lab kind: a network of two inputs, seen over its whole input plane. Click a point (or type it)
and the recipe answers what each hidden unit outputs there and the network's answer; with it, the answer over the
whole plane (its decision regions), each hidden unit's line (where its weighted sum is 0) and the data it learnt."""

from ...numbers import in_prose
from ..cases import metrics, vectors
from ..fields import DeclarationError
from ..kind import LabKind, Reads

THRESHOLD = 0.5  # an answer above it is read as 1 (a sigmoid output's decision)


class DecisionPlane(LabKind):
    name = "decision-plane"
    requires = {"sizes": ("inputs", "hidden"), "endpoints": ("runs",)}
    # A run's case: the point, each hidden unit's output there, the answer; the data (points and their targets), each
    # hidden unit's weights and bias (w1, w2, b) and the answer over the plane.
    reads = {"runs": Reads(items=("point", "hidden", "answer", "data", "targets", "lines", "regions"))}
    watches_training = True  # a variant's regions, played on the plane as it learns (lab.js `watch`)

    def check(self, spec) -> None:
        """Two inputs, asked for as the numbers x1 and x2."""
        if spec.sizes["inputs"] != 2:
            raise DeclarationError(f"lab.sizes.inputs of a {self.name} lab must be 2 (a plane); it is "
                                   f"{spec.sizes['inputs']}")
        fields = spec.endpoints["runs"].fields
        if any(fields.get(f) is None or fields[f].type != "number" for f in ("x1", "x2")):
            raise DeclarationError(f"lab.endpoints.runs of a {self.name} lab needs `x1` and `x2` fields of numbers")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case that is a point of the plane (it carries its request) as the run that replays it."""
        return [{"id": case["id"], "label": case["label"], "request": case["request"]} for case in cases
                if isinstance(case.get("request"), dict) and {"x1", "x2"} <= case["request"].keys()]

    def settings(self, spec) -> dict:
        return {"threshold": THRESHOLD}

    def outcome(self, case: dict, spec) -> str | None:
        """"At (1, 0) the network answers 0.98, so 1: right, the training data says 1 there." A point that is none of
        the data's is said to be the network's own guess."""
        found, scores = vectors(case), metrics(case)
        answer, right = scores.get("answer"), scores.get("right")
        if "ones" in scores:  # every unit over the plane
            return (f"Over the plane the network answers 1 on {scores['ones']:.0%} of the points and 0 on the rest: "
                    "the hidden units' lines cut it into its regions.")
        if "final_error" in scores and found.get("loss_per_epoch"):  # the training curve
            start = found["loss_per_epoch"][0]
            return (f"In {int(scores['steps']):,} steps of gradient descent the mean squared error fell from "
                    f"{in_prose(start, 2)} to {in_prose(scores['final_error'], 2)}.")
        if "point" not in found and right is not None and found.get("answer"):  # the training cases, all at once
            return f"{int(right)} of its {len(found['answer'])} training cases answered on the right side of 0.5."
        if "point" not in found or answer is None:
            return None
        point = found["point"]
        at = f"({point[0]:g}, {point[1]:g})"
        read = int(answer > THRESHOLD)
        said = f"At {at} the network answers {answer:.2f}, so {read}"
        data = next((m["values"] for m in case.get("matrices", []) if m["key"] == "data"), [])
        target = next((t for row, t in zip(data, found.get("targets", []), strict=False) if row == point), None)
        if target is None:
            return f"{said}. No training case is there: between them the answer is the network's own guess."
        right = read == int(target > THRESHOLD)
        return f"{said}: {'right' if right else 'wrong'}, the training data says {target:g} there."


KIND = DecisionPlane()
