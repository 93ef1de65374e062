"""A recipe's replay in a process of its own, as the server's recipe workers run it:

    python -m tensorviz.replay <recipe folder> <seed> [checkpoint folder] [--states FILE] [--kernels FAMILY]

torch loaded on one thread with deterministic algorithms and the kernel family asked for (recipekit/kernels.py;
native by default), the seed set before the replay, run.py's replay() called, then each case whose recorded states
FILE holds (JSON: by case id, by process, the states that entered its steps) replayed step by step from them, and
the worker's reply (the result as JSON text, the environment, the compute time) written to stdout as one JSON
object. Exit status 1 where the recipe raised (the reply says why).
"""

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from recipekit.kernels import NAMES, NATIVE

    parser = argparse.ArgumentParser(prog="python -m tensorviz.replay")
    parser.add_argument("recipe_dir", type=Path)
    parser.add_argument("seed", type=int)
    parser.add_argument("checkpoint", nargs="?")
    parser.add_argument("--states", type=Path, help="the recorded states of each case's iterated processes (JSON)")
    parser.add_argument("--kernels", choices=NAMES, default=NATIVE)
    args = parser.parse_args(argv)

    from app.compute.messages import RecipeCall
    from app.compute.worker import start

    context = {"checkpoint": args.checkpoint} if args.checkpoint else {}
    states = json.loads(args.states.read_text()) if args.states else {}
    process = start(torch_threads=1, seed=args.seed, memory_mb=0, kernels=args.kernels)
    reply = process.answer(RecipeCall.replay(args.recipe_dir.resolve(), context, states).wire())
    sys.stdout.write(json.dumps(reply))
    return 0 if reply["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
