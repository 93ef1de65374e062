"""Replay the recorded XOR cases and the four numerical checks on the stored weights.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py, weights.safetensors and the recipe kit.
"""

import copy
import json
import sys
from functools import partial

import torch

from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import MLP, NAMES, SETTINGS, WEIGHTS, build_model, training_data, xor

SIDE = 21  # the input plane is drawn on a SIDE x SIDE grid
REGION_SIDE = 41  # the lab's decision regions: finer, a grid step of 0.05
LOW, HIGH = -0.5, 1.5  # from just below 0 to just above 1 on both inputs
POINT = (1.0, 0.0)  # the point of the plane the recorded lab case is at


def units(model: MLP, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every hidden unit's output (B, hidden) and the network's answer (B,)."""
    hidden = model.squash(model.hidden(x))
    return hidden, model.decide(model.output(hidden))[:, 0]


@torch.no_grad()
def xor_case(model: MLP) -> dict:
    """The four inputs: what each hidden unit makes of them, the answers, and the error."""
    x, target = xor()
    hidden, answer = units(model, x)
    unit_names = [f"h{i + 1}" for i in range(hidden.size(1))]
    return {
        "label": "XOR's four cases",
        "matrices": [
            matrix("inputs", "The inputs (x1, x2)", x.tolist(), rows=list(NAMES), columns=["x1", "x2"]),
            matrix(
                "hidden",
                "What each hidden unit outputs for each input",
                hidden.tolist(),
                rows=list(NAMES),
                columns=unit_names,
            ),
        ],
        "vectors": [
            vector("answer", "The network's answer", answer.tolist(), names=list(NAMES)),
            vector("target", "XOR", target[:, 0].tolist(), names=list(NAMES)),
        ],
        "metrics": [
            metric("error", "Mean squared error", ((answer - target[:, 0]) ** 2).mean().item()),
            metric("right", "Cases on the right side of 0.5", int(((answer > 0.5) == (target[:, 0] > 0.5)).sum())),
        ],
    }


def plane(side: int = SIDE) -> tuple[torch.Tensor, list[str]]:
    """Every point of a side x side grid over the input plane (side², 2), row by row from the top (x2 = HIGH), and
    the grid's coordinates as the page names its rows and columns."""
    steps = torch.linspace(LOW, HIGH, side)
    x2, x1 = torch.meshgrid(steps.flip(0), steps, indexing="ij")
    digits = 1 if side == SIDE else 2
    return torch.stack([x1.flatten(), x2.flatten()], 1), [f"{v:.{digits}f}" for v in steps.tolist()]


@torch.no_grad()
def plane_case(model: MLP) -> dict:
    """Each unit's output over the input plane, each on its own scale: two half-planes, and the output that
    combines them into XOR's band."""
    points, coordinates = plane()
    hidden, answer = units(model, points)
    maps = [*hidden.T, answer]  # each (SIDE²,)
    titles = [*(f"hidden unit h{i + 1}" for i in range(hidden.size(1))), "the output"]
    return {
        "label": "Each unit over the input plane",
        "matrices": [
            matrix(
                f"plane_c{i}",
                f"{title}, over x1 (columns) and x2 (rows)",
                unit.reshape(SIDE, SIDE).tolist(),
                rows=coordinates[::-1],
                columns=coordinates,
            )
            for i, (unit, title) in enumerate(zip(maps, titles, strict=True))
        ],
        "vectors": [],
        "metrics": [
            metric(
                "ones", "Share of the plane the network answers 1 (above 0.5)", (answer > 0.5).double().mean().item()
            )
        ],
    }


@torch.no_grad()
def picture(
    model: MLP, x: torch.Tensor, target: torch.Tensor, pattern: str = str(SETTINGS["data"]), side: int = REGION_SIDE
) -> dict:
    """The network over the whole plane, as the lab draws it: the answer on a side x side grid (its decision
    regions), each hidden unit's line, where its weighted sum is 0, and the data it learns (x: (N, 2), target:
    (N, 1)) of the pattern named."""
    grid, coordinates = plane(side)
    regions = units(model, grid)[1].reshape(side, side)  # (rows: x2 from the top, columns: x1)
    lines = torch.cat([model.hidden.weight, model.hidden.bias[:, None]], 1)  # (hidden, 3): w1, w2, b
    unit_names = [f"h{i + 1}" for i in range(lines.size(0))]
    xor_data = len(x) == len(NAMES) and torch.equal(x, xor()[0])
    names = list(NAMES) if xor_data else [f"p{i + 1}" for i in range(len(x))]
    said = (
        ("XOR's four cases", "XOR's answer in each of its four cases")
        if xor_data
        else (f"The {len(x)} training points ({pattern})", "The answer at each training point")
    )
    return {
        "vectors": [vector("targets", said[1], target[:, 0].tolist(), names=names)],
        "matrices": [
            matrix("data", f"{said[0]} (x1, x2)", x.tolist(), rows=names, columns=["x1", "x2"]),
            matrix(
                "lines",
                "Each hidden unit's weights and bias: its line is where w1·x1 + w2·x2 + b = 0",
                lines.tolist(),
                rows=unit_names,
                columns=["w1", "w2", "b"],
            ),
            matrix(
                "regions",
                "The network's answer over the plane, x1 (columns) and x2 (rows)",
                regions.tolist(),
                rows=coordinates[::-1],
                columns=coordinates,
            ),
        ],
    }


@torch.no_grad()
def point_case(model: MLP, x1: float, x2: float) -> dict:
    """The network at one point of the input plane (the lab's answer): what each hidden unit outputs there and the
    answer; over the whole plane, the answer (its decision regions) and each hidden unit's line, where its weighted
    sum is 0; and the data it learnt (XOR's four cases unless a knob moved it)."""
    x1, x2 = float(x1), float(x2)  # a request's 1 as 1.0
    hidden, answer = units(model, torch.tensor([[x1, x2]]))
    whole = picture(model, *training_data())
    unit_names = [f"h{i + 1}" for i in range(hidden.size(1))]
    return {
        "label": f"The point ({x1:g}, {x2:g})",
        "vectors": [
            vector("point", "The point (x1, x2)", [x1, x2], names=["x1", "x2"]),
            vector("hidden", "What each hidden unit outputs there", hidden[0].tolist(), names=unit_names),
            *whole["vectors"],
        ],
        "matrices": whole["matrices"],
        "metrics": [metric("answer", "The network's answer there", answer.item())],
    }


def training_case() -> dict:
    """How the error fell, step by step, as train.py measured it."""
    metadata = stored.read(WEIGHTS)[1]
    losses = json.loads(metadata["loss_per_epoch"])
    return {
        "label": "Training",
        "vectors": [vector("loss_per_epoch", "Mean squared error after each step of training", losses, first=1)],
        "metrics": [
            metric("steps", "Steps of gradient descent", len(losses)),
            metric("final_error", "Mean squared error at the last step", losses[-1]),
        ],
        "matrices": [],
    }


# The four checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_GRADIENTS = "Back-propagation's gradients equal finite differences of the error, weight by weight"
CHECK_XOR = "The output is above 0.5 exactly where XOR is 1"
CHECK_LINEAR = "No network without a hidden layer computes XOR: the best linear fit answers 0.5 everywhere"
CHECK_ERROR = "The stored weights reproduce the error measured when they were trained"


def check_gradients(model: MLP) -> dict:
    """Autograd's gradient of the squared error against central differences, in double precision."""
    exact = copy.deepcopy(model).double()  # the model as given (its forward too), in double precision
    x, target = (t.double() for t in xor())

    def error() -> torch.Tensor:
        return ((exact(x) - target) ** 2).mean()

    worst, step = 0.0, 1e-6
    for parameter in exact.parameters():
        (grad,) = torch.autograd.grad(error(), parameter, allow_unused=True)
        grad = torch.zeros_like(parameter) if grad is None else grad  # unused: the error's gradient says 0
        with torch.no_grad():
            for index in range(parameter.numel()):
                flat = parameter.view(-1)
                kept = flat[index].item()
                flat[index] = kept + step
                up = error().item()
                flat[index] = kept - step
                down = error().item()
                flat[index] = kept
                worst = max(worst, abs((up - down) / (2 * step) - grad.view(-1)[index].item()))
    return {"passed": worst < 1e-8, "detail": {"largest_difference": worst}}


@torch.no_grad()
def check_xor(model: MLP) -> dict:
    x, target = xor()
    answer = model(x)[:, 0]
    return {"passed": bool(((answer > 0.5) == (target[:, 0] > 0.5)).all()), "detail": {"answers": answer.tolist()}}


def check_linear(model: MLP) -> dict:
    """The least-squares linear fit of XOR from x1, x2 and a constant: every answer 0.5, its error 0.25, far above
    the network's (the hidden layer is what makes XOR learnable)."""
    x, target = (t.double() for t in xor())
    design = torch.cat([x, torch.ones(4, 1, dtype=torch.float64)], 1)  # (4, 3)
    fit = torch.linalg.lstsq(design, target).solution
    linear = (design @ fit)[:, 0]
    error = ((linear - target[:, 0]) ** 2).mean().item()
    with torch.no_grad():
        network = ((model(xor()[0])[:, 0].double() - target[:, 0]) ** 2).mean().item()
    passed = torch.allclose(linear, torch.full_like(linear, 0.5), atol=1e-12) and network < error / 100
    return {
        "passed": passed,
        "detail": {"linear_answers": linear.tolist(), "linear_error": error, "network_error": network},
    }


@torch.no_grad()
def check_error(model: MLP) -> dict:
    x, target = training_data()
    replayed = ((model(x) - target) ** 2).mean().item()
    trained = float(stored.read(WEIGHTS)[1].get("error", "nan"))
    return kit.reproduced(
        replayed, trained, 1e-9, "a float32 mean of squared errors of about 1e-4: rounding moves it by about 1e-11"
    )


CHECKS = {CHECK_GRADIENTS: check_gradients, CHECK_XOR: check_xor, CHECK_LINEAR: check_linear, CHECK_ERROR: check_error}


def replay(model: MLP | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    cases = {
        "xor": partial(xor_case, model),
        "point": lambda: point_case(model, *POINT) | {"request": {"x1": POINT[0], "x2": POINT[1]}},
        "plane": partial(plane_case, model),
        "training": training_case,
    }
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
