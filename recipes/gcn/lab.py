"""What-if runs on the karate club: any set of friendships and any two members given, the model trained on them
from the seed (as train.py trains it), and what it makes of every member.

    python lab.py                 # Zachary's graph, Mr. Hi's and the Officer's sides given
    python lab.py --cut 8 33      # without member 8's friendship with the Officer
    python lab.py --given 1 32    # members 1 and 32 given instead

Needs torch, safetensors, model.py, train.py, run.py, data.py and karate.safetensors beside this file.
"""

import argparse
import sys

from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .data import karate
from .run import NAMES, edited_case


def runs(edges: list[list[int]], given: list[int]) -> dict:
    """The model trained from the seed on these friendships with given[0]'s side and given[1]'s given, in the
    manifest's case shape."""
    return edited_case(edges, (given[0], given[1]), "Live run")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cut", type=int, nargs=2, action="append", default=[], help="a friendship to remove")
    parser.add_argument("--given", type=int, nargs=2, default=[0, 33])
    args = parser.parse_args(argv)
    cut = [sorted(pair) for pair in args.cut]
    edges = [pair for pair in karate()["edges"].tolist() if pair not in cut]
    found = runs(edges, args.given)
    items = {i["key"]: i for part in ("matrices", "vectors", "metrics") for i in found[part]}
    for member, (p, side) in enumerate(zip(items["probabilities"]["values"], items["sides"]["values"], strict=True)):
        print(f"{NAMES[member]:>10}  P(Officer's side) {p[1]:.3f}  joined {'Officer' if side else 'Mr. Hi'}")
    print(f"{items['right']['value']} of 32 members not given placed on the side they joined")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
