"""A recipe's training run again beside its stored weights, in a process of its own:

    python -m app.compute.trainer <recipe folder> [memory headroom MB]

Started by retraining.retrain with the kernels of recipekit.kernels set, as train.py run alone sets them. It writes
JSON lines on stdout: first the environment it trains in, then train.py's --report (each epoch as it ends, then
the comparison with the stored files, tensor by tensor); its exit status is train.py's (1: the retraining differs).
"""

import json
import os
import sys
import threading
import time
from pathlib import Path

ORPHAN_CHECK_SECONDS = 1.0


def end_with_parent() -> None:
    """End this process when the one that started it is gone (a web process or a compute worker stopped mid-job:
    nothing would stop a training it left behind, nor read its report)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    end_with_parent()
    import torch

    from recipekit.kernels import TRAINING

    from ..domain.recipes import load_module
    from .process import cap_memory
    from .worker import environment

    recipe_dir = Path(argv[0])
    cap_memory(int(argv[1]) if len(argv) > 1 else 0)
    torch.use_deterministic_algorithms(True)
    train = load_module(recipe_dir, "train")
    torch.set_num_threads(1)  # as training.one_thread trains, so that the environment says what the training ran on
    sys.stdout.write(json.dumps({"event": "environment",
                                 "environment": environment(torch, int(getattr(train, "TRAIN_SEED", 0)), "train",
                                                              kernels=TRAINING)}))
    sys.stdout.write("\n")
    sys.stdout.flush()
    return train.main(["--report"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
