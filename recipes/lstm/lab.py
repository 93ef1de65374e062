"""What-if runs on a string of brackets typed by a reader.

    python lab.py "(()())"     # the depth read after each token, and the gates at the last step

Needs torch, safetensors, model.py, train.py and run.py beside this file.
"""

import sys

from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import TOKENS, build_model
from .run import run_case, tokens_of


def live_run(tokens: list[int]) -> dict:
    """A what-if case on the trained weights, in the manifest's case shape. A string that closes a bracket it
    never opened, or nests deeper than 8, is read too: it has no true depth, so its case holds none."""
    return run_case(build_model(), tokens)


def main(argv: list[str]) -> int:
    text = argv[0] if argv else "(()())"
    case = live_run(tokens_of(text))
    vectors = {v["key"]: v["values"] for v in case["vectors"]}
    truth = vectors.get("expected", [None] * len(vectors["tokens"]))
    for token, read, true in zip(vectors["tokens"], vectors["predicted"], truth, strict=True):
        said = "no true depth" if true is None else f"true {true}{'' if read == true else '  <- wrong'}"
        print(f"{TOKENS[token]}  depth read {read}  {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
