"""A recipe's replay in a process of its own, as the server's recipe workers run it:

    python -m tensorviz.replay <recipe folder> <seed> [checkpoint folder]

torch loaded on one thread with deterministic algorithms, the seed set before the replay, run.py's replay()
called, and the worker's reply (the result as JSON text, the environment, the compute time) written to stdout as
one JSON object. Exit status 1 where the recipe raised (the reply says why).
"""

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from app.compute.messages import RecipeCall
    from app.compute.worker import start

    recipe_dir, seed = Path(argv[0]).resolve(), int(argv[1])
    context = {"checkpoint": argv[2]} if len(argv) > 2 else {}
    process = start(torch_threads=1, seed=seed, memory_mb=0)
    reply = process.answer(RecipeCall.replay(recipe_dir, context).wire())
    sys.stdout.write(json.dumps(reply))
    return 0 if reply["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
