"""What-if runs in the gridworld: an episode from any open cell, greedy or exploring, with the Q-value of every move
at every state; and the greedy policy over the whole grid.

    python lab.py episode 2 2                   # greedy from row 2, column 2
    python lab.py episode 4 0 --epsilon 0.5 --seed 3

Needs torch, safetensors, model.py, train.py, run.py, gridworld.py and weights.safetensors beside this file.
"""

import argparse
import sys

from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .gridworld import ACTIONS
from .model import build_model
from .run import episode as run_episode
from .run import policy as run_policy


def episode(start: list[int], epsilon: float = 0.0, seed: int = 0) -> dict:
    """One episode from the start cell [row, column], ε-greedy with the seed's draws, in the manifest's case shape."""
    return run_episode(build_model(), (start[0], start[1]), epsilon, seed)


def policy() -> dict:
    """The greedy policy over the grid, with V(s), every open cell's Q-values and the exact Q* beside them."""
    return run_policy(build_model())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("episode")
    e.add_argument("row", type=int)
    e.add_argument("column", type=int)
    e.add_argument("--epsilon", type=float, default=0.0)
    e.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    found = episode([args.row, args.column], args.epsilon, args.seed)
    items = {i["key"]: i for part in ("matrices", "vectors", "metrics") for i in found[part]}
    for where, q, action in zip(
        items["q_values"]["rows"], items["q_values"]["values"], items["actions"]["values"], strict=True
    ):
        print(
            f"{where:<18} "
            + "  ".join(f"{a} {v:+.3f}" for a, v in zip(ACTIONS, q, strict=True))
            + f"  -> {ACTIONS[action]}"
        )
    print(f"return {items['return']['value']:.2f} in {items['moves']['value']} moves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
