"""What every node computes, inside a recipe process: a lab entry (or a recorded case's replay) run once through
the intervention hooks (compute/intervene.py's `hooked`, torch's public global module hooks), each module's output
kept only as a small drawing chosen by its shape, and nothing of the run kept after.

A drawing is bounded whatever the model: feature maps as a few small images, a sequence of vectors as a heatmap,
a vector as bars, a scalar as a value, integers (token ids) as a list; larger tensors are averaged down
(`pooled`). One answer holds at most BUDGET numbers: past it, a node gives its shape alone.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional

from .intervene import first_tensor, hooked
from .process import manual_seed


@dataclass(frozen=True)
class Size:
    """How large a drawing may be: feature maps shown, each map's side, a vector's bars."""

    channels: int
    side: int
    bins: int


SMALL = Size(channels=4, side=8, bins=16)  # a node's thumbnail in the graph
LARGE = Size(channels=16, side=32, bins=128)  # the one node opened in place
BUDGET = 30_000  # numbers in one answer's drawings: a 10,000-node graph's answer stays a few hundred kB
IDS = 64  # integers listed (token ids)


def rounded(values: Tensor) -> list:
    """Four significant digits, None where a value is not finite (JSON carries no NaN)."""
    return [float(f"{v:.4g}") if math.isfinite(v) else None for v in values.reshape(-1).tolist()]


def pooled_to(tensor: Tensor, sizes: tuple[int, ...]) -> Tensor:
    """The tensor (its last len(sizes) dimensions) averaged down to at most `sizes`, each dimension apart."""
    target = tuple(min(have, most) for have, most in zip(tensor.shape[-len(sizes):], sizes, strict=True))
    if target == tuple(tensor.shape[-len(sizes):]):
        return tensor
    if len(sizes) == 1:
        return functional.adaptive_avg_pool1d(tensor.unsqueeze(0), target[0])[0]
    lead = tensor.shape[:-2]
    flat = tensor.reshape(-1, 1, *tensor.shape[-2:])
    return functional.adaptive_avg_pool2d(flat, target).reshape(*lead, *target)


def drawing(tensor: Tensor, size: Size) -> dict:
    """A bounded drawing of one output, its kind chosen by its shape (the batch's first item where it has one)."""
    tensor = tensor.detach()
    of = list(tensor.shape)
    if not (tensor.is_floating_point() or tensor.is_complex()):
        ids = tensor.reshape(-1)[:IDS]
        return {"kind": "ids", "values": [int(v) for v in ids.tolist()], "of": of, "pooled": tensor.numel() > IDS}
    tensor = tensor.real.float() if tensor.is_complex() else tensor.float()
    while tensor.dim() > 1 and tensor.shape[0] == 1:
        tensor = tensor[0]
    while tensor.dim() > 3:
        tensor = tensor[0]  # a batch of several: its first item
    finite = tensor[torch.isfinite(tensor)]
    low, high = (float(finite.min()), float(finite.max())) if finite.numel() else (0.0, 0.0)
    found: dict[str, Any] = {"of": of, "low": float(f"{low:.4g}"), "high": float(f"{high:.4g}")}
    if tensor.dim() == 0 or tensor.numel() == 1:
        return found | {"kind": "value", "values": rounded(tensor.reshape(1)), "pooled": False}
    if tensor.dim() == 1:
        shown = pooled_to(tensor, (size.bins,))
        return found | {"kind": "bars", "values": rounded(shown), "shape": list(shown.shape),
                        "pooled": shown.numel() < tensor.numel()}
    if tensor.dim() == 2:
        shown = pooled_to(tensor, (size.side, size.bins))
        return found | {"kind": "heatmap", "values": rounded(shown), "shape": list(shown.shape),
                        "pooled": shown.numel() < tensor.numel()}
    maps = tensor.reshape(-1, *tensor.shape[-2:])
    shown = pooled_to(maps[:size.channels], (size.side, size.side))
    return found | {"kind": "maps", "values": rounded(shown), "shape": list(shown.shape),
                    "pooled": shown.numel() < maps.numel()}


def activations(function: Callable, args: dict, seed: int, root: str, inputs: dict[str, str],
                arguments: list[str], node: str | None = None) -> dict:
    """Every module node's output in the entry's run from the seed (its last call where it is called several
    times): {node: {shape, input_shape, calls, drawing}}. `inputs` names, for each of the model's inputs, the module
    it enters (whose input is drawn as it); one that enters none is drawn as the recorded model's positional
    argument in the order of `arguments`; `"output"` is the recorded model's own output. With `node`, that node
    alone is drawn, LARGE."""
    entering = {module: name for name, module in inputs.items()}
    seen: dict[str, dict] = {}
    tensors: dict[str, Tensor] = {}

    def keep(name: str, tensor: Tensor, input_shape: list[int] | None) -> None:
        entry = seen.setdefault(name, {"calls": 0})
        entry["calls"] += 1
        entry["shape"] = list(tensor.shape)
        if input_shape is not None:
            entry["input_shape"] = input_shape
        if node is None or node == name:
            tensors[name] = tensor.detach().clone()  # the last call's; a recipe may write into it after

    def on_input(module: nn.Module, name: str, call_args: tuple) -> None:
        tensor = first_tensor(call_args) if call_args else None
        if tensor is not None:
            seen.setdefault(name, {"calls": 0})["input_shape"] = list(tensor.shape)
            if name in entering and entering[name] not in seen:
                keep(entering[name], tensor, None)

    def on_output(module: nn.Module, name: str, output: Any) -> None:
        tensor = first_tensor(output)
        if tensor is not None:
            keep(name, tensor, seen.get(name, {}).get("input_shape"))

    def model_output(module: nn.Module, call_args: tuple, output: Any) -> None:
        if type(module).__name__ != root:
            return
        for name, value in zip(arguments, call_args, strict=False):
            if name not in inputs and name not in seen and isinstance(value, Tensor):
                keep(name, value, None)
        if (tensor := first_tensor(output)) is not None:
            keep("output", tensor, None)

    manual_seed(torch, seed)
    outer = nn.modules.module.register_module_forward_hook(model_output)
    try:
        with hooked(on_input, on_output, root):
            function(**args)
    finally:
        outer.remove()
    size, spent = (SMALL, 0) if node is None else (LARGE, -math.inf)
    for name, entry in seen.items():
        if name in tensors and spent < BUDGET:
            entry["drawing"] = drawing(tensors[name], size)
            spent += len(entry["drawing"]["values"])
    return {name: entry for name, entry in seen.items() if "shape" in entry}
