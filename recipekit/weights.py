"""Weights as safetensors files with their metadata (strings), and how far two sets of weights are apart."""

from pathlib import Path

import torch
from torch import Tensor, nn


def read(path: Path) -> tuple[dict[str, Tensor], dict[str, str]]:
    """The tensors of a .safetensors file and its string metadata."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as stored:
        return {k: stored.get_tensor(k) for k in stored.keys()}, stored.metadata() or {}  # noqa: SIM118 - not a dict


def write(path: Path, tensors: dict[str, Tensor], metadata: dict[str, str] | None = None) -> None:
    """Store the tensors (contiguous copies) with string metadata."""
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)


def state_of(model: nn.Module, leave_out: tuple[str, ...] = ()) -> dict[str, Tensor]:
    """A model's weights (and buffers) as stored: detached copies, without the keys `leave_out` names (a tied
    head stored once, as the embedding it shares)."""
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k not in leave_out}


def largest_difference(retrained: dict[str, Tensor], stored: dict[str, Tensor]) -> float:
    """The largest |difference| of any tensor of two sets of weights, in double precision; infinite where the two
    hold other tensors or shapes."""
    if set(retrained) != set(stored) or any(retrained[k].shape != stored[k].shape for k in retrained):
        return float("inf")
    return max(((retrained[k].double() - stored[k].double()).abs().max().item() for k in retrained), default=0.0)


def kept(snapshots: dict[int, dict[str, Tensor]]) -> dict[str, Tensor]:
    """Weights kept during training by epoch, as a snapshots file names them: `epoch-<n>/<parameter>`."""
    return {f"epoch-{epoch}/{k}": v for epoch, state in snapshots.items() for k, v in state.items()}


def stages(epochs: tuple[int, ...]) -> list[dict[str, str]]:
    """The stages of a snapshots file kept at these epochs ({id, label}, 0 the initialisation), in its metadata's
    words."""
    return [
        {
            "id": f"epoch-{epoch}",
            "label": "at initialisation" if epoch == 0 else f"after {epoch} epoch{'s' if epoch > 1 else ''}",
        }
        for epoch in epochs
    ]


def equal(a: dict[str, Tensor], b: dict[str, Tensor]) -> bool:
    """Whether two sets of tensors are the same, bit for bit."""
    return set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)
