"""What-if runs on a drawn digit, and a trace of one class's score back through the layers.

    python lab.py trace 14            # test digit 14, traced for the digit it is read as
    python lab.py trace 345 --target 2

Needs only torch, model.py, run.py and the two .safetensors files beside this file.
"""

import argparse
import sys

import torch

from recipekit import digits
from recipekit.classifier import logit_head, traced_stage
from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import build_model
from .run import forward, run_case, test_split

# Where the trace stops, from the output back to the drawing: (module whose output is read, title).
TRACE_STAGES = (
    ("act", "Hidden layer (fc1 + tanh)"),
    ("stage2.pool", "Stage 2 pooled"),
    ("stage2.act", "Stage 2 conv + tanh"),
    ("stage1.pool", "Stage 1 pooled"),
    ("stage1.act", "Stage 1 conv + tanh"),
)


def live_run(image: list[list[int]], label: int | None = None) -> dict:
    """A what-if case on the trained weights, in the manifest's case shape, with how unlike the digits the
    drawing is (a classifier answers anyway)."""
    case = run_case(build_model(), image, label)
    case["metrics"].append(digits.unusual(image))
    return case


def trace(image: list[list[int]], target: int | None = None) -> dict:
    """Follow one class's logit back to the drawing. The last layer is exact: the logit is the bias plus
    each hidden unit's weight times its activation. Earlier stages show activation × gradient, the first-order
    share of each unit (and channel) in the logit, down to the pixels."""
    model = build_model()
    with torch.enable_grad():
        logits, x, seen = forward(model, image)
        predicted = int(logits.argmax())
        target = predicted if target is None else target
        names = [name for name, _ in TRACE_STAGES]
        grads = torch.autograd.grad(logits[target], [seen[n] for n in names] + [x])
    probs = logits.detach().softmax(-1)
    head = logit_head(model.fc2, seen["act"][0].detach(), logits, target, "digit")  # the hidden layer (hidden,)
    stages = [head] + [
        traced_stage(name, title, seen[name][0].detach(), grad[0])
        for (name, title), grad in zip(TRACE_STAGES, grads[:-1], strict=True)
    ]
    stages.append(traced_stage("input", "The drawing (pixels / 16)", x[0, 0].detach(), grads[-1][0, 0]))
    return {
        "target": target,
        "predicted": predicted,
        "probabilities": probs.tolist(),
        "stages": stages,
        "method": "exact at the last layer; activation × gradient (a first-order estimate) before it. Tanh "
        "bends the signal between stages, so the shares of earlier stages only approximate the logit",
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
        print(f"  {stage['title']:32} {total:+.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
