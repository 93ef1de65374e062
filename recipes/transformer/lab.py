"""What-if runs on a digit sequence typed by a reader.

    python lab.py 90210     # the greedy decoding, step by step, and where each step looked in the source

Needs torch, safetensors, model.py, train.py and run.py beside this file.
"""

import sys

from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import build_model
from .run import run_case, tokens_of, written


def live_run(source: list[int]) -> dict:
    """A what-if case on the trained weights, in the manifest's case shape: the source decoded greedily."""
    return run_case(build_model(), source)


def main(argv: list[str]) -> int:
    case = live_run(tokens_of(argv[0] if argv else "90210"))
    vectors = {v["key"]: v["values"] for v in case["vectors"]}
    cross = {m["key"]: m["values"] for m in case["matrices"]}["cross_attention_l1_h0"]
    print(f"source {written(vectors['source'])}")
    for step, (read, wrote) in enumerate(zip(vectors["decoder_input"], vectors["output"], strict=True)):
        looked = max(range(len(vectors["source"])), key=lambda k: cross[step][k])
        print(
            f"step {step + 1}: read {written([read]):4} wrote {written([wrote]):4} "
            f"(last layer's first head looked most at source position {looked + 1})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
