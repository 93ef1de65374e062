"""Train the LeNet on scikit-learn's 8x8 digits and store its weights beside this file.

    python train.py          # train (a few seconds on one CPU core), write weights.safetensors,
                             # snapshots.safetensors and test_digits.safetensors, print the test accuracy
    python train.py --check  # retrain in memory and compare with the stored files; exit status 1 if they differ

Needs torch, scikit-learn (the data ships with it) and safetensors (the writer). Replaying the recipe
afterwards needs torch alone.
"""

import json
import sys

import torch
from torch import Tensor, nn

try:
    from .model import SNAPSHOTS, TEST_DIGITS, WEIGHTS, LeNet, LeNetConfig, pixels, read_safetensors
except ImportError:  # run as a script: python train.py
    from model import SNAPSHOTS, TEST_DIGITS, WEIGHTS, LeNet, LeNetConfig, pixels, read_safetensors

SPLIT_SEED = 0  # the permutation that picks the test digits
TRAIN_SEED = 1989  # initial weights and batch order (LeCun et al., 1989)
TEST_SIZE = 360  # of the 1,797 digits; the other 1,437 train
EPOCHS = 50
BATCH = 16
LEARNING_RATE = 5e-3
# The weights kept on the way (after this many epochs; 0 is the initialisation), so that a reader can see
# where learning happened; the last stage is the trained weights themselves (weights.safetensors).
SNAPSHOT_EPOCHS = (0, 1, 3, 10)
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3


def split_digits() -> dict[str, Tensor]:
    """The fixed, seeded train/test split of scikit-learn's digits: grey levels 0..16 as uint8."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.uint8)  # (1797, 8, 8)
    labels = torch.tensor(digits.target, dtype=torch.int64)  # (1797,)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(SPLIT_SEED))
    test, train = order[:TEST_SIZE].sort().values, order[TEST_SIZE:]
    return {"train_images": images[train], "train_labels": labels[train],
            "test_images": images[test], "test_labels": labels[test], "test_indices": test}


@torch.no_grad()
def accuracy(model: LeNet, images: Tensor, labels: Tensor) -> float:
    return (model(pixels(images)).argmax(-1) == labels).float().mean().item()


def state_of(model: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def train(split: dict[str, Tensor]) -> tuple[LeNet, dict[int, dict[str, Tensor]]]:
    """Adam on mini-batches in a seeded order, on one thread so that every machine sums alike; the model
    and its weights after each of SNAPSHOT_EPOCHS."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(TRAIN_SEED)
        model = LeNet(LeNetConfig())
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
        order = torch.Generator().manual_seed(TRAIN_SEED)
        x, y = pixels(split["train_images"]), split["train_labels"]
        model.train()
        snapshots = {}
        for epoch in range(EPOCHS):
            if epoch in SNAPSHOT_EPOCHS:
                snapshots[epoch] = state_of(model)
            for batch in torch.randperm(len(y), generator=order).split(BATCH):
                loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        return model.eval(), snapshots
    finally:
        torch.set_num_threads(threads)


def keys_match(state: dict, stored: dict) -> bool:
    return set(state) == set(stored) and all(state[k].shape == stored[k].shape for k in state)


def main(argv: list[str]) -> int:
    torch.use_deterministic_algorithms(True)
    split = split_digits()
    model, snapshots = train(split)
    test_accuracy = accuracy(model, split["test_images"], split["test_labels"])
    state = state_of(model)
    kept = {f"epoch-{epoch}/{k}": v for epoch, weights in snapshots.items() for k, v in weights.items()}
    if "--check" in argv:
        stored, metadata = read_safetensors(WEIGHTS)
        stored_test, _ = read_safetensors(TEST_DIGITS)
        stored_kept, _ = read_safetensors(SNAPSHOTS)
        state_kept = state | kept
        stored |= stored_kept
        worst = max((state_kept[k] - stored[k]).abs().max().item() for k in state_kept)
        same_split = all(torch.equal(stored_test[k], split[k]) for k in ("test_images", "test_labels", "test_indices"))
        print(f"retrained test accuracy {test_accuracy:.4f} (stored {metadata.get('test_accuracy')}); "
              f"largest weight difference {worst:.2e} (tolerance {RETRAIN_TOLERANCE:g}); same test split: {same_split}")
        return 0 if worst <= RETRAIN_TOLERANCE and same_split and keys_match(state_kept, stored) else 1
    from safetensors.torch import save_file

    save_file(state, str(WEIGHTS), metadata={
        "test_accuracy": repr(test_accuracy), "train_seed": str(TRAIN_SEED), "split_seed": str(SPLIT_SEED),
        "epochs": str(EPOCHS), "torch": torch.__version__})
    stages = [{"id": f"epoch-{epoch}", "label": "at initialisation" if epoch == 0 else
               f"after {epoch} epoch{'s' if epoch > 1 else ''}"} for epoch in SNAPSHOT_EPOCHS]
    save_file(kept, str(SNAPSHOTS), metadata={"stages": json.dumps(stages),
                                              "trained": f"after {EPOCHS} epochs (the recorded weights)"})
    source = "scikit-learn load_digits (UCI Optical Recognition of Handwritten Digits, CC BY 4.0)"
    save_file({k: split[k] for k in ("test_images", "test_labels", "test_indices")}, str(TEST_DIGITS),
              metadata={"source": source})
    print(f"test accuracy {test_accuracy:.4f} on {TEST_SIZE} held-out digits; "
          f"wrote {WEIGHTS.name}, {SNAPSHOTS.name} and {TEST_DIGITS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
