"""Replay of the graph benchmark's model: one case (the next-token distribution after a prompt) and one
check, enough for a recording; the benchmark is about the graph."""

import torch

from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import build_model

PROMPT = [1, 2, 3, 4]


@torch.no_grad()
def replay(case: str | None = None) -> dict:
    """The one case and its check (`case` names the one case: a replay of it alone is the same)."""
    model = build_model()
    probs = model(torch.tensor([PROMPT]))[0, -1].softmax(-1)  # (vocab,)
    return {
        "cases": {
            "prompt": {
                "vectors": [{"key": "next", "label": "Next-token distribution", "values": probs.tolist()}],
                "matrices": [],
                "metrics": [],
            }
        },
        "checks": [{"name": "The next-token distribution sums to one", "passed": abs(float(probs.sum()) - 1) < 1e-5}],
    }


if __name__ == "__main__":
    print(replay()["checks"])
