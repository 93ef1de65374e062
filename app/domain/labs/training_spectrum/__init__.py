"""The training-spectrum lab kind: step through a training round by round, both accuracies (training and held
out) with the round marked, and the embedding's power at each frequency after that round, computed now from the
embedding the training kept: a learner watches memorising come first, and generalising come with a few
frequencies (grokking)."""

from ..cases import metrics, quoted, vectors
from ..kind import LabKind, Reads
from .shapes import TrainingRound


class TrainingSpectrum(LabKind):
    name = "training-spectrum"
    requires = {"sizes": ("rounds",), "endpoints": ("rounds",)}
    reads = {"rounds": Reads(keys=("round", "step", "frequencies", "spectrum", "key_frequencies", "key_share",
                                   "train_accuracy", "test_accuracy"))}
    results = {"rounds": TrainingRound}
    says_outcome = ("rounds",)

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """The recorded training (the case with the accuracy after every round) as its last round."""
        return [{"id": case["id"], "label": case["label"], "request": {"round": spec.sizes["rounds"]}}
                for case in cases if any(v.get("key") == "test_accuracy_by_round" for v in case.get("vectors", []))]

    def outcome(self, case: dict, spec) -> str | None:
        """A recorded example the trained model answered: “Answers “38” with probability 1: right.” (its `answer` and
        `expected` vectors, the `confidence` metric where recorded)."""
        found = vectors(case)
        if "answer" not in found or "expected" not in found:
            return None
        answer, expected = ([str(v) for v in found[key]] for key in ("answer", "expected"))
        sure = metrics(case).get("confidence")
        said = f"Answers {quoted(answer)}" + (f" with probability {sure:.2g}" if isinstance(sure, int | float) else "")
        return f"{said}: right." if answer == expected else f"{said}: wrong, the answer is {quoted(expected)}."

    def result_outcome(self, endpoint: str, args: dict, result: dict, spec) -> str | None:
        """“After round 20 (step 2,000): 100% of the training sums right and 3.9% of the held-out ones; its 5
        strongest frequencies hold 49% of the embedding's power.”"""
        at = result.get("round")
        if not isinstance(at, int) or not 1 <= at <= len(result.get("test_accuracy", [])):
            return None
        thing = spec.words.get("thing", "example")
        return (f"After round {at} (step {result['step']:,}): {100 * result['train_accuracy'][at - 1]:.1f}% of the "
                f"training {thing}s right and {100 * result['test_accuracy'][at - 1]:.1f}% of the held-out ones; its "
                f"{len(result['key_frequencies'])} strongest frequencies hold {100 * result['key_share']:.0f}% of the "
                f"embedding's power.")


KIND = TrainingSpectrum()
