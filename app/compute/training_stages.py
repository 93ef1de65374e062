"""What training changed, inside a recipe process: a lab entry run on the weights kept during training
(at initialisation, after some epochs) and on the trained ones, with how far each module's weights and
its output on this input moved from initialisation.

The recipe is not told: a forward pre-hook loads a stage's weights into the recorded model (the module of
the recorded class) when it is called and puts the trained ones back after the run, and the intervention
hooks (compute/intervene.py) name and keep every module's output. The snapshots file is the recipe's own
safetensors file, `<stage>/<parameter>` per tensor, its stages listed in the file's metadata.
"""

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from torch import Tensor, nn

from .intervene import EPSILON, Baseline, effects, run_recording


class NoModel(RuntimeError):
    """The entry never called the recorded model, so no weights could be swapped in."""


def read_snapshots(path: Path) -> tuple[list[dict], str, dict[str, dict[str, Tensor]]]:
    """The stages kept during training ({id, label}), the trained weights' label, and each stage's weights."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as stored:
        metadata = stored.metadata() or {}
        tensors = {key: stored.get_tensor(key) for key in stored.keys()}  # noqa: SIM118 (not a dict)
    stages = json.loads(metadata.get("stages", "[]"))
    weights = {stage["id"]: {key.split("/", 1)[1]: value for key, value in tensors.items()
                             if key.startswith(f"{stage['id']}/")} for stage in stages}
    return stages, metadata.get("trained", "trained"), weights


@contextmanager
def weights_of(state: dict[str, Tensor] | None, root: str) -> Iterator[dict[str, Tensor]]:
    """Run with `state` in every module of the class `root` the entry calls (None: as they are); yields the
    weights the model ran with, filled once it has run. The modules' own weights are restored after."""
    used: dict[str, Tensor] = {}
    originals: dict[nn.Module, dict[str, Tensor]] = {}

    def before(module: nn.Module, args: tuple) -> None:
        if type(module).__name__ != root or module in originals:
            return
        originals[module] = {k: v.detach().clone() for k, v in module.state_dict().items()}
        if state is not None:
            module.load_state_dict(state)
        used.update({k: v.detach().clone() for k, v in module.state_dict().items()})

    handle = nn.modules.module.register_module_forward_pre_hook(before)
    try:
        yield used
    finally:
        handle.remove()
        for module, original in originals.items():
            module.load_state_dict(original)
    if not originals:
        raise NoModel(f"the entry never called its {root} model, so no stage's weights could be used")


def movement(weights: dict[str, Tensor], start: dict[str, Tensor]) -> dict[str, float]:
    """For every module holding parameters (by its dotted name, parents included): ||w - w0|| / ||w0|| over
    all of its parameters and buffers together."""
    moved: dict[str, list[float]] = {}
    for key, value in weights.items():
        if not value.is_floating_point() or key not in start:
            continue
        parts = key.split(".")[:-1]
        squares = (float((value - start[key]).pow(2).sum()), float(start[key].pow(2).sum()))
        for depth in range(1, len(parts) + 1):
            total = moved.setdefault(".".join(parts[:depth]), [0.0, 0.0])
            total[0] += squares[0]
            total[1] += squares[1]
    return {node: (change / scale) ** 0.5 if scale > EPSILON else change ** 0.5
            for node, (change, scale) in moved.items()}


def stages(function: Callable, args: dict, seed: int, root: str, snapshots: Path) -> dict:
    """The entry's result on every stage's weights and on the trained ones, each with how far every module's
    weights (`weights`) and its output on this input (`activations`) had moved from the first stage."""
    stages, trained, weights = read_snapshots(snapshots)
    runs = []
    for stage in [*stages, {"id": "trained", "label": trained}]:
        with weights_of(weights.get(stage["id"]), root) as used:
            result, outputs, _ = run_recording(function, args, seed, root, lambda node: True, set())
        runs.append((stage, result, outputs, used))
    _, _, first_outputs, first_weights = runs[0]
    first = Baseline.from_outputs(first_outputs)  # laid out once for every stage's comparison
    return {"stages": [{**stage, "result": result, "weights": movement(used, first_weights),
                        "activations": effects(first, outputs)}
                       for stage, result, outputs, used in runs]}
