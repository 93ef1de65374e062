"""What-if runs on a sequence typed by a reader.

    python lab.py ".3..7...1....5..????"   # both models' answers at the markers, and the step size at each token

Needs torch, safetensors, model.py, task.py, train.py, run.py, weights.safetensors and lstm.safetensors beside this
file.
"""

import sys

from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import build_lstm, build_model
from .run import run_case
from .task import VOCAB, text, tokens_of


def live_run(tokens: list[int]) -> dict:
    """A what-if case on the trained weights, in the manifest's case shape. A sequence whose markers come before its
    digits, or outnumber them, is read too: it has no right answer, so its case holds none."""
    return run_case(build_model(), build_lstm(), tokens, text(tokens))


def main(argv: list[str]) -> int:
    typed = argv[0] if argv else ".3..7...1....5..????"
    case = live_run(tokens_of(typed))
    vectors = {v["key"]: v["values"] for v in case["vectors"]}
    for k, token in enumerate(vectors["tokens"]):
        print(f"{VOCAB[token]}  mean Δ {vectors['mean_delta_1'][k]:.3f} {vectors['mean_delta_2'][k]:.3f}")
    right = vectors.get("expected", [None] * len(vectors["answered_at"]))
    for at, mamba, lstm, true in zip(
        vectors["answered_at"], vectors["predicted"], vectors["baseline_predicted"], right, strict=True
    ):
        said = "no right answer" if true is None else f"right {VOCAB[true]}"
        print(f"at {at + 1}: Mamba {VOCAB[mamba]}, LSTM {VOCAB[lstm]}, {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
