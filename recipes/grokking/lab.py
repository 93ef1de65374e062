"""Any round of the training: both accuracies then, and the numbers' embedding's frequencies then.

    python lab.py 20     # round 20 of 50: memorised, not yet generalised

Needs torch, safetensors, model.py, train.py and run.py beside this file.
"""

import json
import sys

from recipekit import weights as stored
from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import EMBEDDINGS, WEIGHTS
from .run import FREQUENCIES
from .train import KEY, STEPS, spectrum


def at_round(round: int = 50) -> dict:  # noqa: A002 (the field's name, as the lab declares it)
    """Round `round` (from 1) of the training: the embedding's power at each frequency, computed now from the
    embedding train.py kept after that round, its key frequencies and their share, and both accuracies after every
    round (as train.py measured them)."""
    kept, _ = stored.read(EMBEDDINGS)
    power = spectrum(kept["embedding_by_round"][round - 1])  # (frequencies,) from that round's (p, C) embedding
    top = power.topk(KEY)
    _, metadata = stored.read(WEIGHTS)
    return {
        "round": round,
        "step": round * STEPS,
        "frequencies": FREQUENCIES,
        "spectrum": power.tolist(),
        "key_frequencies": sorted((top.indices + 1).tolist()),
        "key_share": top.values.sum().item(),
        "train_accuracy": json.loads(metadata["train_accuracy_per_round"]),
        "test_accuracy": json.loads(metadata["test_accuracy_per_round"]),
    }


if __name__ == "__main__":
    found = at_round(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
    r = found["round"]
    said = {
        "round": r,
        "train_accuracy": found["train_accuracy"][r - 1],
        "test_accuracy": found["test_accuracy"][r - 1],
    }
    print(json.dumps(said | {"key_frequencies": found["key_frequencies"], "key_share": found["key_share"]}, indent=1))
