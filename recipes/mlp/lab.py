"""The network at any point of the input plane, for the lab.

    python lab.py 0.3 0.8     # what each hidden unit outputs there, and the answer

Needs torch, safetensors, model.py and run.py beside this file.
"""

import sys

from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import build_model
from .run import point_case


def live_run(x1: float, x2: float) -> dict:
    """The point's case on the trained weights, in the manifest's case shape (run.py's recorded `point` case)."""
    return point_case(build_model(), x1, x2)


def main(argv: list[str]) -> int:
    x1, x2 = (float(v) for v in argv[:2]) if len(argv) >= 2 else (1.0, 0.0)
    case = live_run(x1, x2)
    hidden = {v["key"]: v["values"] for v in case["vectors"]}["hidden"]
    answer = case["metrics"][0]["value"]
    units = ", ".join(f"h{i + 1} {h:.3f}" for i, h in enumerate(hidden))
    print(f"({x1:g}, {x2:g}): {units}; answer {answer:.3f}, so {int(answer > 0.5)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
