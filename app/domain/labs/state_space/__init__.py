"""The state-space lab kind: type a sequence, and step through a selective state-space model's scan token by token:
the step size Δ it chose for the token (how much of its state to let go and how much of the token to write), B (how
the token is written into the state) and C (how the output reads it), and the mixing matrix, how much of each
earlier token every output is made of; the answers at the positions the recipe asks for, with a baseline's beside
them where the recipe trains one."""

from ..cases import metrics, right_of, sequence_presets, vectors
from ..kind import LabKind, Reads, check_sequence_field


class StateSpace(LabKind):
    name = "state-space"
    token_vectors = ("tokens",)
    requires = {"sizes": ("vocab", "steps", "layers"), "endpoints": ("runs",)}
    # A run's case: the tokens, where the answers are asked for and the model's answers (and a baseline's, and the
    # right ones, where the recipe has them), the probabilities there, and per layer (1, 2, ...) token by token Δ
    # (token × channel), B and C (token × state) and the mixing matrix (token × token).
    limits = {"runs": {"tokens": "The recipe says where in a sequence an answer is asked for (a marker, say): a "
                                 "sequence that asks for none is refused, with the recipe's reason."}}
    reads = {"runs": Reads(items=("tokens", "answered_at", "predicted", "probabilities", "delta_*", "B_*", "C_*",
                                  "mixing_*", "mean_delta_*"))}

    def check(self, spec) -> None:
        """The runs endpoint takes the tokens, at most `steps`; token names, where given, name every token."""
        check_sequence_field(spec, self.name, "tokens")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case with tokens as the run request that replays it."""
        return sequence_presets(cases, "tokens")


    def outcome(self, case: dict, spec) -> str | None:
        """“Read 20 tokens; 4 answers asked for, 4 of them right; the baseline 3 of 4”, the baseline named in the
        recipe's words (`lab.words.baseline`)."""
        found = vectors(case)
        if "predicted" not in found:
            return held_out_answers(metrics(case), spec.words.get("baseline", "the baseline"))
        asked = len(found["predicted"])
        right = right_of(found["predicted"], found.get("expected"))
        said = f"Read {len(found.get('tokens', []))} tokens; {asked} answer{'s' if asked != 1 else ''} asked for"
        if right is None:
            return f"{said}; there is no right answer for this sequence."
        said += f", {right} of them right"
        baseline = right_of(found.get("baseline_predicted", []), found.get("expected")) \
            if "baseline_predicted" in found else None
        name = spec.words.get("baseline", "the baseline")
        return f"{said}; {name} {baseline} of {asked}." if baseline is not None else f"{said}."


def held_out_answers(found: dict, baseline: str) -> str | None:
    """“Right on 3,993 of the 4,000 held-out answers (993 of the 1,000 sequences wholly); the baseline 3,782 (802).”"""
    if not {"test_right", "test_answers"} <= found.keys():
        return None
    said = f"Right on {int(found['test_right']):,} of the {int(found['test_answers']):,} held-out answers"
    if "test_whole" in found and "test_size" in found:
        said += f" ({int(found['test_whole']):,} of the {int(found['test_size']):,} sequences wholly)"
    if "baseline_test_right" in found:
        whole = f" ({int(found['baseline_test_whole']):,})" if "baseline_test_whole" in found else ""
        said += f"; {baseline} {int(found['baseline_test_right']):,}{whole}"
    return f"{said}."


KIND = StateSpace()
