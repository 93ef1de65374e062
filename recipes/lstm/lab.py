"""What-if runs on a string of brackets typed by a reader.

    python lab.py "(()())"     # the depth read after each token, and the gates at the last step

Needs torch, safetensors, model.py, train.py and run.py beside this file.
"""

import sys

try:
    from .model import TOKENS, LSTMConfig, build_model, depths_of
    from .run import run_case, tokens_of
except ImportError:  # run as a script: python lab.py
    from model import TOKENS, LSTMConfig, build_model, depths_of
    from run import run_case, tokens_of


class InputError(ValueError):
    """The request cannot be run; the message starts with the field at fault."""

    status = 400

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")


def live_run(tokens: list[int]) -> dict:
    """A what-if case on the trained weights, in the manifest's case shape. The network tells depths 0 to 8
    apart: a string that closes a bracket it never opened, or nests deeper, has no true depth to score."""
    deepest = LSTMConfig.depths - 1
    for position, depth in enumerate(depths_of(tokens)):
        if depth < 0:
            raise InputError("tokens", f"the ')' at position {position} closes a bracket that was never opened")
        if depth > deepest:
            raise InputError("tokens", f"the '(' at position {position} nests {depth} deep; the network reads "
                                       f"depths up to {deepest}")
    return run_case(build_model(), tokens)


def main(argv: list[str]) -> int:
    text = argv[0] if argv else "(()())"
    case = live_run(tokens_of(text))
    vectors = {v["key"]: v["values"] for v in case["vectors"]}
    for token, read, true in zip(vectors["tokens"], vectors["predicted"], vectors["expected"], strict=True):
        print(f"{TOKENS[token]}  depth read {read}  true {true}{'' if read == true else '  <- wrong'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
