"""Replay the recorded ResNet cases and the three numerical checks on the stored weights.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py and the two .safetensors files beside this file.
"""

import sys
from functools import partial

import torch
from torch import Tensor, nn

from recipekit import digits
from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.classifier import held_out_case, read_as
from recipekit.digits import pixels
from recipekit.items import matrix
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import WEIGHTS, ResNet, build_model

# The recorded digits, by position in the test split (the LeNet recipe's split): three read right, one not.
DIGITS = {"zero": 0, "three": 14, "seven": 5, "misread": 345}
# The feature maps a case records per channel, by the module whose output they are: the stem and each block.
MAPS = {
    "stem": ("relu", "Stem: conv, BatchNorm, ReLU"),
    "block1": ("block1.relu2", "Block 1 output (identity shortcut)"),
    "block2": ("block2.relu2", "Block 2 output (projection shortcut)"),
}
BLOCKS = ("block1", "block2")


def test_split() -> tuple[Tensor, Tensor, dict[str, str]]:
    """The held-out digits (N, 8, 8) in grey levels 0..16, their labels (N,), and the weights' metadata."""
    images, labels = digits.held_out()
    return images, labels, stored.read(WEIGHTS)[1]


def forward(model: ResNet, x: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """Logits (B, classes) and every module's output, by module name."""
    seen: dict[str, Tensor] = {}
    hooks = [
        module.register_forward_hook(lambda _m, _a, out, name=name: seen.__setitem__(name, out))
        for name, module in model.named_modules()
        if name
    ]
    try:
        logits = model(x)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, seen


def run_case(model: ResNet, image: list[list[int]], label: int | None = None, title: str = "Live run") -> dict:
    """A case in the manifest's shape: the image, every channel of the stem's and each block's output, each
    block's residual branch F(x) and shortcut (channel × position), the saliency of the class read, the
    class probabilities and, with a label, the loss."""
    x = pixels(image).requires_grad_(True)
    with torch.enable_grad():
        logits, seen = forward(model, x)
        predicted = int(logits[0].argmax())
        (grad,) = torch.autograd.grad(logits[0, predicted], x)
    matrices = [matrix("image", "Input image (grey levels 0-16)", [list(r) for r in image])]
    for key, (module, title_) in MAPS.items():
        maps = seen[module][0].detach()  # (channels, H, W)
        matrices += [
            matrix(f"{key}_c{c}", f"{title_} · channel {c} ({maps.size(1)}×{maps.size(2)})", maps[c])
            for c in range(maps.size(0))
        ]
    for block in BLOCKS:
        for part, module, what in (
            ("branch", f"{block}.bn2", "residual branch F(x)"),
            ("shortcut", f"{block}.shortcut", "shortcut"),
        ):
            values = seen[module][0].detach().flatten(1)  # (channels, H·W)
            matrices.append(matrix(f"{block}_{part}", f"Block {block[-1]} {what} (channel × position)", values))
    matrices.append(
        matrix("saliency", f"Saliency of class {predicted}: input × gradient of its logit", (x * grad)[0, 0].detach())
    )
    vectors, metrics = read_as(logits[0], label)
    return {"label": title, "matrices": matrices, "vectors": vectors, "metrics": metrics}


@torch.no_grad()
def test_case(model: ResNet) -> dict:
    """The whole held-out split: accuracy, mean loss, per-digit accuracy, the confusion matrix, the curve."""
    images, labels, metadata = test_split()
    return held_out_case(model(pixels(images)), labels, metadata)


# The three checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_RESIDUAL = "Each block's output is ReLU(residual branch + shortcut)"
CHECK_BATCHNORM = "BatchNorm in eval mode normalises with its running statistics, not the batch's"
CHECK_ACCURACY = "The stored weights reproduce the test accuracy measured when they were trained"
EXACT = 1e-5  # float32 sums of at most a few dozen terms agree to about this


@torch.no_grad()
def check_residual(model: ResNet) -> dict:
    """Over the held-out digits: each block's output recomputed from its recorded branch and its shortcut
    applied to the block's input; the same sum without the shortcut must differ, or the check would prove
    nothing."""
    images, _, _ = test_split()
    _, seen = forward(model, pixels(images))
    detail = {}
    for block, before in zip(BLOCKS, ("relu", "block1.relu2"), strict=True):
        shortcut = model.get_submodule(f"{block}.shortcut")(seen[before])
        out, branch = seen[f"{block}.relu2"], seen[f"{block}.bn2"]
        detail[block] = {
            "max_difference": (torch.relu(branch + shortcut) - out).abs().max().item(),
            "without_shortcut": (torch.relu(branch) - out).abs().max().item(),
        }
    passed = all(d["max_difference"] <= EXACT and d["without_shortcut"] > 1e-3 for d in detail.values())
    return {"passed": passed, "detail": detail}


@torch.no_grad()
def check_batchnorm(model: ResNet) -> dict:
    """Every BatchNorm's output on the held-out digits against (x - running mean) / √(running var + ε) ·
    weight + bias by hand, and against the batch's own statistics (the training-mode mistake)."""
    images, _, _ = test_split()
    inputs: dict[str, Tensor] = {}
    norms = {name: m for name, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)}
    hooks = [
        m.register_forward_hook(lambda _m, args, _o, name=name: inputs.__setitem__(name, args[0]))
        for name, m in norms.items()
    ]
    try:
        _, seen = forward(model, pixels(images))
    finally:
        for hook in hooks:
            hook.remove()
    worst = batch = 0.0
    for name, bn in norms.items():
        x, shape = inputs[name], (1, -1, 1, 1)
        scale, shift = bn.weight.view(shape), bn.bias.view(shape)
        running = (x - bn.running_mean.view(shape)) / torch.sqrt(bn.running_var.view(shape) + bn.eps)
        mean, var = x.mean((0, 2, 3), keepdim=True), x.var((0, 2, 3), unbiased=False, keepdim=True)
        batchwise = (x - mean) / torch.sqrt(var + bn.eps)
        worst = max(worst, (running * scale + shift - seen[name]).abs().max().item())
        batch = max(batch, (batchwise * scale + shift - seen[name]).abs().max().item())
    return {
        "passed": worst <= EXACT and batch > 1e-3,
        "detail": {"norms": len(norms), "max_difference": worst, "batch_statistics_difference": batch},
    }


@torch.no_grad()
def check_accuracy(model: ResNet) -> dict:
    images, labels, metadata = test_split()
    replayed = digits.accuracy(model(pixels(images)).argmax(-1), labels)  # as train.py measured it
    trained = float(metadata.get("test_accuracy", "nan"))
    return kit.reproduced(replayed, trained, 0, kit.COUNTED)


CHECKS = {CHECK_RESIDUAL: check_residual, CHECK_BATCHNORM: check_batchnorm, CHECK_ACCURACY: check_accuracy}


def replay(model: ResNet | None = None, case: str | None = None) -> dict:
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
