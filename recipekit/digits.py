"""scikit-learn's 8x8 handwritten digits (the UCI Optical Recognition of Handwritten Digits data set, CC BY 4.0):
one seeded train/test split for every recipe that reads them, and the held-out split stored with the kit, so that
replaying a recipe needs no scikit-learn."""

from collections.abc import Callable
from functools import cache
from pathlib import Path

import torch
from torch import Tensor, nn

from . import weights
from .items import metric

HELD_OUT = Path(__file__).with_name("test_digits.safetensors")  # the test split, written by split.main()
LEVELS = 16  # the digits' grey levels run 0..16
SPLIT_SEED = 0  # the permutation that picks the test digits
TEST_SIZE = 360  # of the 1,797 digits; the other 1,437 train
SOURCE = "scikit-learn load_digits (UCI Optical Recognition of Handwritten Digits, CC BY 4.0)"
SPLIT_KEYS = ("test_images", "test_labels", "test_indices")


def split() -> dict[str, Tensor]:
    """The fixed, seeded train/test split: grey levels 0..16 as uint8 (N, 8, 8), labels (N,), and the test digits'
    indices in scikit-learn's order. Needs scikit-learn, which ships the digits."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.uint8)  # (1797, 8, 8)
    labels = torch.tensor(digits.target, dtype=torch.int64)  # (1797,)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(SPLIT_SEED))
    test, train = order[:TEST_SIZE].sort().values, order[TEST_SIZE:]
    return {
        "train_images": images[train],
        "train_labels": labels[train],
        "test_images": images[test],
        "test_labels": labels[test],
        "test_indices": test,
    }


def held_out() -> tuple[Tensor, Tensor]:
    """The stored test split: images (360, 8, 8) in grey levels 0..16 and their labels (360,)."""
    stored, _ = weights.read(HELD_OUT)
    return stored["test_images"], stored["test_labels"]


def same_split(made: dict[str, Tensor]) -> bool:
    """Whether a split made now holds exactly the stored test digits."""
    stored, _ = weights.read(HELD_OUT)
    return all(torch.equal(stored[k], made[k]) for k in SPLIT_KEYS)


def pixels(image: list[list[int]] | Tensor) -> Tensor:
    """Grey levels 0..16, (8, 8) or (B, 8, 8), as a network's input (B, 1, 8, 8) in 0..1."""
    x = torch.as_tensor(image, dtype=torch.float32)
    return (x if x.dim() == 3 else x[None])[:, None] / LEVELS


def accuracy(predicted: Tensor, labels: Tensor) -> float:
    """The share of right answers, counted exactly and divided in double precision: the one measure of accuracy
    every recipe stores and replays."""
    return (predicted == labels).double().mean().item()


def tested(
    classifier_accuracy: Callable[[nn.Module, Tensor, Tensor], float], made: dict[str, Tensor]
) -> Callable[[nn.Module], dict[str, float]]:
    """fit()'s `evaluate` for a digits classifier: its accuracy on the split's held-out digits after each epoch."""
    return lambda model: {"test_accuracy": classifier_accuracy(model, made["test_images"], made["test_labels"])}


@cache
def _neighbour_distances() -> Tensor:
    """Each held-out digit's distance to its nearest other held-out digit, in grey levels: how far apart digits of
    the kind the model learned from lie."""
    images = held_out()[0].reshape(TEST_SIZE, -1).double()  # (360, 64)
    apart = torch.cdist(images, images)  # (360, 360)
    apart.fill_diagonal_(float("inf"))
    return apart.min(1).values


def unusual(image: list[list[int]] | Tensor) -> dict:
    """How unlike the digits a drawing is, as a case's metric: the share of held-out digits that lie nearer to another
    held-out digit than the drawing lies to any of them. 0 for one of them, near 1 for a blank page or a scribble;
    a classifier reads either as one of its classes all the same."""
    drawn = torch.as_tensor(image, dtype=torch.float64).reshape(1, -1)
    nearest = torch.cdist(drawn, held_out()[0].reshape(TEST_SIZE, -1).double()).min().item()
    share = (_neighbour_distances() < nearest).double().mean().item()
    return metric("unusual", "Held-out digits nearer to one another than this drawing is to any of them", share)


@cache
def _class_means() -> Tensor:
    """Each digit's average held-out image (10, 64), in grey levels."""
    images, labels = held_out()
    flat = images.reshape(TEST_SIZE, -1).double()
    return torch.stack([flat[labels == digit].mean(0) for digit in range(10)])


def looks_like(image: list[list[float]] | Tensor, key: str = "looks_like", of: str = "it") -> dict:
    """The digit an image (8 x 8 grey levels) looks most like, as a case's metric: the one whose average held-out
    image lies nearest it. The simplest reading by eye, no trained classifier's: what a generator drew or a
    decoder gave back, said in a word. `key` and `of` name the metric and what it reads ("the drawing")."""
    return metric(
        key,
        f"The digit {of} looks most like (nearest the average held-out image of each)",
        nearest_digits(torch.as_tensor(image).reshape(1, -1))[0],
    )


def nearest_digits(images: list | Tensor) -> list[int]:
    """The digit each of some images (n, 8, 8), or (n, 64), looks most like, read as `looks_like` reads one."""
    drawn = torch.as_tensor(images, dtype=torch.float64)
    drawn = drawn.reshape(drawn.shape[0], -1)
    return torch.cdist(drawn, _class_means()).argmin(dim=1).tolist()


def main() -> None:
    """Write the held-out split beside this file (python -m recipekit.digits): it never changes."""
    made = split()
    weights.write(HELD_OUT, {k: made[k] for k in SPLIT_KEYS}, {"source": SOURCE})
    print(f"wrote {HELD_OUT.name}: {TEST_SIZE} held-out digits")


if __name__ == "__main__":
    main()
