"""Replay the recorded LeNet cases and the four numerical checks on the stored weights.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py, weights.safetensors and the recipe kit (its held-out digits).
"""

import sys
from functools import partial

import torch
from torch import Tensor

from recipekit import digits
from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.classifier import held_out_case, read_as
from recipekit.digits import pixels
from recipekit.items import matrix
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import WEIGHTS, LeNet, build_model

# The recorded digits, by position in the test split: three read correctly, one misread (a 2 read as a 3).
DIGITS = {"zero": 0, "three": 14, "seven": 5, "misread": 345}
STAGES = ("stage1.act", "stage1.pool", "stage2.act", "stage2.pool")  # the feature maps a case records
STAGE_LABELS = {
    "stage1.act": "Stage 1 conv + tanh",
    "stage1.pool": "Stage 1 pooled",
    "stage2.act": "Stage 2 conv + tanh",
    "stage2.pool": "Stage 2 pooled",
}


def test_split() -> tuple[Tensor, Tensor, dict[str, str]]:
    """The held-out digits (N, 8, 8) in grey levels 0..16, their labels (N,), and the weights' metadata."""
    images, labels = digits.held_out()
    return images, labels, stored.read(WEIGHTS)[1]


def forward(model: LeNet, image) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """Logits (classes,), the input (1, 1, 8, 8) with its gradient graph, and every module's output."""
    seen: dict[str, Tensor] = {}
    hooks = [
        module.register_forward_hook(lambda _m, _a, out, name=name: seen.__setitem__(name, out))
        for name, module in model.named_modules()
        if name
    ]
    x = pixels(image).requires_grad_(True)
    try:
        logits = model(x)[0]
    finally:
        for hook in hooks:
            hook.remove()
    return logits, x, seen


def run_case(model: LeNet, image: list[list[int]], label: int | None = None, title: str = "Live run") -> dict:
    """A case in the manifest's shape: the image, every channel's feature maps per stage, the saliency of the
    predicted class over the image, the class probabilities and, with a label, the loss."""
    with torch.enable_grad():
        logits, x, seen = forward(model, image)
        predicted = int(logits.argmax())
        (grad,) = torch.autograd.grad(logits[predicted], x)
    saliency = (x * grad)[0, 0]  # (8, 8) input times gradient: what the predicted class's score rests on
    matrices = [matrix("image", "Input image (grey levels 0-16)", [list(r) for r in image])]
    for stage in STAGES:
        maps = seen[stage][0].detach()  # (channels, H, W)
        matrices += [
            matrix(
                f"{stage.replace('.', '_')}_c{c}",
                f"{STAGE_LABELS[stage]} · channel {c} ({maps.size(1)}×{maps.size(2)})",
                maps[c],
            )
            for c in range(maps.size(0))
        ]
    matrices.append(matrix("saliency", f"Saliency of class {predicted}: input × gradient of its logit", saliency))
    vectors, metrics = read_as(logits, label)
    return {"label": title, "matrices": matrices, "vectors": vectors, "metrics": metrics}


@torch.no_grad()
def test_case(model: LeNet) -> dict:
    """The whole held-out split: accuracy, mean loss, per-digit accuracy and the confusion matrix."""
    images, labels, _ = test_split()
    return held_out_case(model(pixels(images)), labels)


# The four checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_SHIFT = "Each convolution commutes with shifting its input one pixel (away from the border)"
CHECK_POOLING = "Each pooling halves both sides by averaging 2x2 blocks"
CHECK_PROBABILITIES = "The class probabilities of every test digit sum to one"
CHECK_ACCURACY = "The stored weights reproduce the test accuracy measured when they were trained"
EXACT = 1e-5  # float32 sums of at most a few dozen terms agree to about this


@torch.no_grad()
def check_shift(model: LeNet) -> dict:
    """conv(shift(x)) equals shift(conv(x)) on columns whose window stays inside the image; the same
    comparison without shifting the output must differ, or the check would prove nothing."""
    detail = {}
    for name in ("stage1.conv", "stage2.conv"):
        conv = model.get_submodule(name)
        x = torch.rand(1, conv.in_channels, 8, 8, generator=torch.Generator().manual_seed(0))
        shifted = torch.zeros_like(x)
        shifted[..., 1:] = x[..., :-1]  # one pixel right; a zero column enters on the left
        before, after = conv(x), conv(shifted)  # (1, out, 8, 8)
        detail[name] = {
            "max_difference": (after[..., 2:7] - before[..., 1:6]).abs().max().item(),
            "unshifted_difference": (after[..., 2:7] - before[..., 2:7]).abs().max().item(),
        }
    passed = all(d["max_difference"] <= EXACT and d["unshifted_difference"] > 1e-3 for d in detail.values())
    return {"passed": passed, "detail": detail}


@torch.no_grad()
def check_pooling(model: LeNet) -> dict:
    images, _, _ = test_split()
    _, _, seen = forward(model, images[0].tolist())
    detail = {}
    for stage in ("stage1", "stage2"):
        inp, out = seen[f"{stage}.act"], seen[f"{stage}.pool"]  # (1, C, H, W) and (1, C, H/2, W/2)
        B, C, H, W = inp.shape
        by_hand = inp.reshape(B, C, H // 2, 2, W // 2, 2).mean((3, 5))
        detail[stage] = {
            "in": [H, W],
            "out": list(out.shape[2:]),
            "max_difference": (out - by_hand).abs().max().item() if out.shape == by_hand.shape else None,
        }
    passed = all(
        d["out"] == [d["in"][0] // 2, d["in"][1] // 2]
        and d["max_difference"] is not None
        and d["max_difference"] <= EXACT
        for d in detail.values()
    )
    return {"passed": passed, "detail": detail}


@torch.no_grad()
def check_probabilities(model: LeNet) -> dict:
    images, _, _ = test_split()
    sums = model(pixels(images)).softmax(-1).sum(-1)
    worst = (sums - 1).abs().max().item()
    return {"passed": worst <= 1e-6, "detail": {"digits": len(sums), "worst_sum_error": worst}}


@torch.no_grad()
def check_accuracy(model: LeNet) -> dict:
    images, labels, metadata = test_split()
    replayed = digits.accuracy(model(pixels(images)).argmax(-1), labels)  # as train.py measured it
    trained = float(metadata.get("test_accuracy", "nan"))
    return kit.reproduced(replayed, trained, 0, kit.COUNTED)


CHECKS = {
    CHECK_SHIFT: check_shift,
    CHECK_POOLING: check_pooling,
    CHECK_PROBABILITIES: check_probabilities,
    CHECK_ACCURACY: check_accuracy,
}


def replay(model: LeNet | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    images, labels, _ = test_split()
    cases = {
        case_id: partial(run_case, model, images[i].tolist(), int(labels[i]), f"Test digit {i}")
        for case_id, i in DIGITS.items()
    }
    cases["test-split"] = partial(test_case, model)
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
