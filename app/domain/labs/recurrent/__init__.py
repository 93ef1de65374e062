"""The recurrent lab kind: type a sequence of tokens, and watch a network that reads it one step at a time:
every state it keeps at every step, and the class it reads after each token against the true one."""

from ..cases import right_of, sequence_presets, vectors
from ..kind import LabKind, Reads, check_sequence_field


class Recurrent(LabKind):
    name = "recurrent"
    token_vectors = ("tokens",)
    requires = {"sizes": ("vocab", "steps", "classes"), "endpoints": ("runs",)}
    # A run's case: the tokens, the class read after each (and the true one, where the recipe knows it), the
    # probability of every class at every step, and each state as a matrix with one row per step.
    reads = {"runs": Reads(items=("tokens", "predicted", "probabilities"))}

    def check(self, spec) -> None:
        """The runs endpoint takes the tokens; token names, where given, name every token of the vocabulary."""
        check_sequence_field(spec, self.name, "tokens")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case as the run request that replays it: its tokens."""
        return sequence_presets(cases, "tokens")

    def axes(self, case: dict, spec) -> dict[str, dict]:
        """Every matrix with a row per token is read step by step: its rows are the steps, named by their
        tokens; its columns (units, classes) keep their numbers."""
        tokens = vectors(case).get("tokens")
        if tokens is None:
            return {}
        steps = spec.tokens(tokens)
        return {m["key"]: {"rows": steps} for m in case.get("matrices", []) if len(m["values"]) == len(tokens)}


    def outcome(self, case: dict, spec) -> str | None:
        """“Read 8 tokens, 8 of them right”."""
        found = vectors(case)
        if "predicted" not in found:
            return None
        right = right_of(found["predicted"], found.get("expected"))
        read = f"Read {len(found['predicted'])} tokens"
        if right is None:
            return f"{read}; there is no right answer for this sequence."
        return f"{read}, {right} of them right."


KIND = Recurrent()
