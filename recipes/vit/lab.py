"""What-if runs on a drawn digit, and a trace of one class's score back through the blocks.

    python lab.py trace 14            # test digit 14, traced for the digit it is read as
    python lab.py trace 307 --target 9

Needs torch, safetensors, model.py, run.py and the two .safetensors files beside this file.
"""

import argparse
import sys

import torch

from recipekit import digits
from recipekit.classifier import logit_head, traced_stage
from recipekit.digits import pixels
from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import build_model
from .run import forward, run_case, test_split


def live_run(image: list[list[int]], label: int | None = None) -> dict:
    """A what-if case on the trained weights, in the manifest's case shape, with how unlike the digits the
    drawing is (a classifier answers anyway)."""
    case = run_case(build_model(), image, label)
    case["metrics"].append(digits.unusual(image))
    return case


def trace(image: list[list[int]], target: int | None = None) -> dict:
    """Follow one class's logit back to the drawing. The head is exact: the logit is the bias plus each
    feature of the normalised class token times its weight. Earlier stages show activation × gradient, the
    first-order share of each unit in the logit: what each block's MLP and attention added to the residual
    stream (every token × every feature: the patches reach the class token only through attention), then the
    pixels."""
    model = build_model()
    layers = len(model.blocks)
    stages = [
        (
            f"blocks.{i}.{part}",
            f"What block {i + 1}'s {name} wrote into the stream (token × feature; token 0 is the class token)",
        )
        for i in reversed(range(layers))
        for part, name in (("mlp", "MLP"), ("attn", "attention"))
    ]
    x = pixels(image).requires_grad_(True)
    with torch.enable_grad():
        logits, seen = forward(model, x)
        logits = logits[0]
        predicted = int(logits.argmax())
        target = predicted if target is None else target
        grads = torch.autograd.grad(logits[target], [seen[name] for name, _ in stages] + [x])
    probs = logits.detach().softmax(-1)
    # (dim,): the normalised class token the head reads
    head = logit_head(model.head, seen["ln"][0, 0].detach(), logits, target)
    traced = [
        traced_stage(name, title, seen[name][0].detach(), grad[0])
        for (name, title), grad in zip(stages, grads[:-1], strict=True)
    ]
    traced.append(traced_stage("input", "The drawing (pixels / 16)", x[0, 0].detach(), grads[-1][0, 0]))
    return {
        "target": target,
        "predicted": predicted,
        "probabilities": probs.tolist(),
        "stages": [head, *traced],
        "method": "exact at the head (the final LayerNorm's output for the class token, times the head's "
        "weights); activation × gradient (a first-order estimate) before it. Attention, LayerNorm "
        "and GELU are not linear, so the shares of earlier stages only approximate the logit",
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("trace")
    t.add_argument("digit", type=int, help="position in the test split")
    t.add_argument("--target", type=int)
    args = parser.parse_args(argv)
    images, labels, _ = test_split()
    result = trace(images[args.digit].tolist(), args.target)
    print(f"test digit {args.digit} (true {int(labels[args.digit])}) is read as {result['predicted']}")
    for stage in result["stages"]:
        total = stage.get("total", stage.get("logit"))
        print(f"  {stage['title']:80} {total:+.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
