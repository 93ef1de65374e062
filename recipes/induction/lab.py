"""Your own sequence of letters, read by every head.

    python lab.py "q z x w o r l d s w o r l d s"     # every head's scores and the losses, as JSON

Needs torch, safetensors, model.py, train.py and run.py beside this file.
"""

import json
import sys

from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import build_model
from .run import encode, run_case


def live_run(tokens: list[int]) -> dict:
    """A case on the recorded weights, in the manifest's case shape: every head's attention and scores."""
    return run_case(build_model(), tokens)


if __name__ == "__main__":
    case = live_run(encode(" ".join(sys.argv[1].replace(" ", ""))))
    print(
        json.dumps(
            {item["key"]: item["values"] for item in case["vectors"] if "scores" in item["key"]}
            | {item["key"]: item["value"] for item in case["metrics"]},
            indent=1,
        )
    )
