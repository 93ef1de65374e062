"""Training, deterministic on one CPU thread: the loop every trained recipe runs, its per-epoch metrics, and
train.py's main, which writes the recipe's files or, with --check, retrains in memory and compares.

    with one_thread(TRAIN_SEED):          # seeded, one thread, KERNELS (run()): every machine sums alike
        model = MyModel(Config())
        fitted = fit(model, optimizer, EPOCHS, batches, loss_of, keep=(0, 1, 3, 10))
"""

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from . import weights

# The kernels the numeric libraries train with, each library reading its setting at its first use (so set before
# the process computes anything: run() starts train.py again with them). Left to choose by the processor, ATen,
# MKL and oneDNN take AVX-512 kernels where it has them, and their sums round otherwise: on an AMD EPYC with
# AVX-512, the LSTM, the GPT and the ViT retrained 0.19, 0.14 and 0.05 away from their stored weights, and with
# these settings bit for bit, as on a machine with AVX2 alone. (MKL_CBWR=AVX2 is no such setting: on an AMD
# processor MKL takes it as AUTO.) Every x86-64 processor since 2013 has AVX2.
KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


@contextmanager
def one_thread(seed: int) -> Iterator[None]:
    """Seed torch and run on one thread (the previous count restored after), so that every machine sums alike."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        yield
    finally:
        torch.set_num_threads(threads)


@dataclass
class Fitted:
    """What a training run made: the model (in eval mode), the mean training loss of each epoch, the metrics
    `evaluate` measured after each epoch, and the weights kept before the epochs `keep` named."""

    model: nn.Module
    losses: list[float]
    metrics: list[dict[str, float]] = field(default_factory=list)
    snapshots: dict[int, dict[str, Tensor]] = field(default_factory=dict)


def fit(model: nn.Module, optimizer: torch.optim.Optimizer, epochs: int, batches: Callable[[], Iterable],
        loss_of: Callable[[object], Tensor], *, after_step: Callable[[], None] | None = None,
        keep: tuple[int, ...] = (), evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
        progress: Callable[[int, int, float, dict[str, float]], None] | None = None) -> Fitted:
    """Train `model` for `epochs`: each epoch, every batch `batches()` yields (in the order the recipe's seeded
    generator draws) gives `loss_of(batch)`, a gradient step and `after_step()` (a learning-rate schedule).
    The weights are kept before each epoch in `keep` (0: at initialisation); `evaluate(model)`, in eval mode and
    without gradients, measures a held-out metric after each epoch; `progress(epoch, epochs, loss, metrics)` hears
    of each epoch as it ends. Nothing here draws a random number: the recipe's generators decide."""
    fitted = Fitted(model, [])
    model.train()
    for epoch in range(epochs):
        if epoch in keep:
            fitted.snapshots[epoch] = weights.state_of(model)
        losses = []
        for batch in batches():
            loss = loss_of(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if after_step is not None:
                after_step()
            losses.append(loss.item())
        fitted.losses.append(sum(losses) / len(losses))
        measured = {}
        if evaluate is not None:
            model.eval()
            with torch.no_grad():
                measured = evaluate(model)
            model.train()
            fitted.metrics.append(measured)
        if progress is not None:
            progress(epoch + 1, epochs, fitted.losses[-1], measured)
    model.eval()
    return fitted


@dataclass
class Trained:
    """What a recipe's training wrote, or would write: each file with its tensors and metadata, the facts a
    retraining must also reproduce (the same test split), and one line that says what was measured."""

    files: dict[Path, tuple[dict[str, Tensor], dict[str, str]]]
    summary: str
    same: dict[str, bool] = field(default_factory=dict)


def train_main(argv: list[str], trained: Callable[[], Trained], tolerance: float) -> int:
    """train.py's main: train and write the recipe's files, or with --check retrain in memory and compare every
    tensor of every file with the stored one: exit status 1 when one differs by more than `tolerance` (the same
    torch build gives identical bits; another may round a few sums differently), holds other tensors, or a fact
    of `same` does not hold."""
    torch.use_deterministic_algorithms(True)
    made = trained()
    if "--check" in argv:
        retrained = {f"{path.name}:{k}": v for path, (tensors, _) in made.files.items() for k, v in tensors.items()}
        stored = {f"{path.name}:{k}": v for path in made.files for k, v in weights.read(path)[0].items()}
        worst = weights.largest_difference(retrained, stored)
        facts = "".join(f"; {name}: {held}" for name, held in made.same.items())
        print(f"retrained: {made.summary}; largest weight difference {worst:.2e} (tolerance {tolerance:g}){facts}")
        return 0 if worst <= tolerance and all(made.same.values()) else 1
    for path, (tensors, metadata) in made.files.items():
        weights.write(path, tensors, metadata)
    print(f"{made.summary}; wrote {', '.join(path.name for path in made.files)}")
    return 0


def metadata(**values) -> dict[str, str]:
    """A weights file's metadata: numbers as Python writes them exactly (repr), lists as JSON, and the torch
    that trained them."""
    return {k: json.dumps(v) if isinstance(v, list) else repr(v) if isinstance(v, float) else str(v)
            for k, v in values.items()} | {"torch": torch.__version__}


def run(main: Callable[[list[str]], int]) -> None:
    """`if __name__ == "__main__": run(main)`: the exit status of main with the command's arguments, in a process
    whose numeric libraries run KERNELS (this script started again with them where they are not set yet)."""
    if any(os.environ.get(name) != value for name, value in KERNELS.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], os.environ | KERNELS)
    sys.exit(main(sys.argv[1:]))
