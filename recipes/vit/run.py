"""Replay the recorded Vision Transformer cases and the two numerical checks on the stored weights.

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
from recipekit.items import matrix, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import WEIGHTS, ViT, build_model, patchify

# The recorded digits, by position in the test split (the LeNet and ResNet recipes' split).
DIGITS = {"zero": 0, "three": 14, "seven": 5, "two": 345, "misread": 307}


def test_split() -> tuple[Tensor, Tensor, dict[str, str]]:
    """The held-out digits (N, 8, 8) in grey levels 0..16, their labels (N,), and the weights' metadata."""
    images, labels = digits.held_out()
    return images, labels, stored.read(WEIGHTS)[1]


def forward(model: ViT, x: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """Logits (B, classes) and every module's output, by module name (each attention's weights are its
    softmax's output: (B, heads, tokens, tokens))."""
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


def run_case(model: ViT, image: list[list[int]], label: int | None = None, title: str = "Live run") -> dict:
    """A case in the manifest's shape: the image and its patches, the class token's attention to every patch
    in each layer and head (on the patch grid), the saliency of the class read, the class probabilities
    and, with a label, the loss."""
    config = model.config
    x = pixels(image).requires_grad_(True)
    with torch.enable_grad():
        logits, seen = forward(model, x)
        predicted = int(logits[0].argmax())
        (grad,) = torch.autograd.grad(logits[0, predicted], x)
    patches = patchify(torch.as_tensor(image, dtype=torch.float32)[None, None], config.patch)[0]
    matrices = [
        matrix("image", "Input image (grey levels 0-16)", [list(r) for r in image]),
        matrix(
            "patches",
            f"The {len(patches)} patch tokens before embedding: patch (row by row) "
            f"× its {config.patch}×{config.patch} pixels (grey levels)",
            patches,
        ),
    ]
    to_itself = []
    for layer in range(config.layers):
        weights = seen[f"blocks.{layer}.attn.softmax"][0, :, 0].detach()  # (heads, tokens): the class token's row
        to_itself.append(weights[:, 0])
        matrices += [
            matrix(
                f"attn{layer}_c{head}",
                f"Block {layer}, head {head}: the class token's attention to "
                f"each patch ({config.grid}×{config.grid} patch grid)",
                weights[head, 1:].view(config.grid, config.grid),
            )
            for head in range(config.heads)
        ]
    matrices.append(
        matrix("saliency", f"Saliency of class {predicted}: input × gradient of its logit", (x * grad)[0, 0].detach())
    )
    vectors, metrics = read_as(logits[0], label)
    vectors.append(
        vector(
            "cls_to_itself",
            f"The class token's attention to itself, by block then head "
            f"({config.layers} × {config.heads}; the rest goes to the patches)",
            torch.cat(to_itself),
        )
    )
    return {"label": title, "matrices": matrices, "vectors": vectors, "metrics": metrics}


@torch.no_grad()
def test_case(model: ViT) -> dict:
    """The whole held-out split: accuracy, mean loss, per-digit accuracy, the confusion matrix, the curve."""
    images, labels, metadata = test_split()
    return held_out_case(model(pixels(images)), labels, metadata)


# The two checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_ATTENTION = "Every block's attention equals torch.nn.MultiheadAttention with the same weights"
CHECK_ACCURACY = "The stored weights reproduce the test accuracy measured when they were trained"
EXACT = 1e-5  # float32 sums of a few dozen terms agree to about this


def reference_attention(attn: nn.Module) -> nn.MultiheadAttention:
    """PyTorch's own multi-head attention carrying this block's weights: its in-projection is q, k and v
    stacked, its out-projection the block's `out`."""
    dim = attn.q.in_features
    mha = nn.MultiheadAttention(dim, attn.heads, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([attn.q.weight, attn.k.weight, attn.v.weight]))
        mha.in_proj_bias.copy_(torch.cat([attn.q.bias, attn.k.bias, attn.v.bias]))
        mha.out_proj.weight.copy_(attn.out.weight)
        mha.out_proj.bias.copy_(attn.out.bias)
    return mha.eval()


@torch.no_grad()
def check_attention(model: ViT) -> dict:
    """Over the held-out digits, each block's attention (its output and every head's weights, the ones the
    class-token maps are drawn from) against nn.MultiheadAttention fed the same normalised tokens."""
    images, _, _ = test_split()
    _, seen = forward(model, pixels(images))
    detail = {}
    for layer, block in enumerate(model.blocks):
        tokens = seen[f"blocks.{layer}.ln1"]  # (N, tokens, dim): what the attention read
        out, weights = reference_attention(block.attn)(tokens, tokens, tokens, average_attn_weights=False)
        detail[f"blocks.{layer}"] = {
            "output_difference": (out - seen[f"blocks.{layer}.attn"]).abs().max().item(),
            "weights_difference": (weights - seen[f"blocks.{layer}.attn.softmax"]).abs().max().item(),
        }
    passed = all(d["output_difference"] <= EXACT and d["weights_difference"] <= EXACT for d in detail.values())
    return {"passed": passed, "detail": detail | {"tolerance": EXACT, "digits": len(images)}}


@torch.no_grad()
def check_accuracy(model: ViT) -> dict:
    images, labels, metadata = test_split()
    replayed = digits.accuracy(model(pixels(images)).argmax(-1), labels)  # as train.py measured it
    trained = float(metadata.get("test_accuracy", "nan"))
    return kit.reproduced(replayed, trained, 0, kit.COUNTED)


CHECKS = {CHECK_ATTENTION: check_attention, CHECK_ACCURACY: check_accuracy}


def replay(model: ViT | None = None, case: str | None = None) -> dict:
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
