"""Training, deterministic on one CPU thread: the loop every trained recipe runs, its per-epoch metrics, and
train.py's main, which writes the recipe's files or, with --check, retrains in memory and compares (with --report,
as JSON lines: each epoch as it ends, then the comparison tensor by tensor, which the server's retraining reads).

    with one_thread(TRAIN_SEED):          # seeded, one thread, KERNELS (run()): every machine sums alike
        model = MyModel(Config())
        fitted = fit(model, optimizer, EPOCHS, batches, loss_of, keep=(0, 1, 3, 10))
"""

import hashlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from torch import Tensor, nn

from . import weights
from .kernels import KERNELS, machine
from .knobs import SETTINGS, Knob, KnobError, chosen, given, moved, out_folder


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


class Listener:
    """Hears a training as it goes: each fit it begins (a recipe may train several models: Mamba and its LSTM) and
    each epoch as it ends, written as one JSON object per event."""

    def __init__(self, write: Callable[[dict], None]) -> None:
        self.write = write
        self.runs = 0

    def began(self) -> None:
        self.runs += 1

    def drew(self, epoch: int, drawing: dict) -> None:
        self.write({"event": "drawn", "run": max(self.runs, 1), "epoch": epoch, "drawing": drawing})

    def ended(self, epoch: int, epochs: int, loss: float | None, metrics: dict[str, float], unit: str) -> None:
        self.write(
            {
                "event": "epoch",
                "run": max(self.runs, 1),
                "epoch": epoch,
                "epochs": epochs,
                "unit": unit,
                "loss": loss if loss is None or math.isfinite(loss) else None,
                "metrics": metrics,
            }
        )


# Who hears the training this process runs: set by train_main --report or --progress, else no one (train.py alone).
LISTENER: ContextVar[Listener | None] = ContextVar("listener", default=None)


def began() -> None:
    """A training loop of the recipe's own (not fit) begins: the listener, if any, counts it."""
    listener = LISTENER.get()
    if listener is not None:
        listener.began()


def epoch_ended(
    epoch: int, epochs: int, loss: float | None, metrics: dict[str, float] | None = None, unit: str = "epoch"
) -> None:
    """An epoch (or another `unit` of the recipe's: an episode) of `epochs` ended with this mean training loss and
    held-out metrics: the listener, if any, hears of it. fit() says so itself; a loop of the recipe's own calls this."""
    listener = LISTENER.get()
    if listener is not None:
        listener.ended(epoch, epochs, loss, metrics or {}, unit)


def drawn(epoch: int, drawing: dict) -> None:
    """What the model makes of its inputs after `epoch` (JSON-ready: a picture the recipe's lab draws, such as the
    decision regions over a plane): the listener, if any, passes it on, so that a page can draw the model as it
    learns."""
    listener = LISTENER.get()
    if listener is not None:
        listener.drew(epoch, drawing)


def listened() -> bool:
    """Whether anyone hears this training (a picture costs a forward pass, made only for a listener)."""
    return LISTENER.get() is not None


@dataclass
class Fitted:
    """What a training run made: the model (in eval mode), the mean training loss of each epoch, the metrics
    `evaluate` measured after each epoch, and the weights kept before the epochs `keep` named."""

    model: nn.Module
    losses: list[float]
    metrics: list[dict[str, float]] = field(default_factory=list)
    snapshots: dict[int, dict[str, Tensor]] = field(default_factory=dict)


def fit(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    epochs: int,
    batches: Callable[[], Iterable],
    loss_of: Callable[[object], Tensor],
    *,
    after_step: Callable[[], None] | None = None,
    keep: tuple[int, ...] = (),
    evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
    draw: Callable[[nn.Module], dict] | None = None,
    draw_every: int = 1,
) -> Fitted:
    """Train `model` for `epochs`: each epoch, every batch `batches()` yields (in the order the recipe's seeded
    generator draws) gives `loss_of(batch)`, a gradient step and `after_step()` (a learning-rate schedule).
    The weights are kept before each epoch in `keep` (0: at initialisation); `evaluate(model)`, in eval mode and
    without gradients, measures a held-out metric after each epoch; the listener (LISTENER) hears of each epoch as it
    ends, and of `draw(model)` (in eval mode, without gradients) at the start and after every `draw_every` epochs
    and the last, where a listener hears (drawn()). Nothing here draws a random number: the recipe's generators
    decide."""
    fitted = Fitted(model, [])
    began()

    def picture(epoch: int) -> None:
        if draw is not None and listened():
            model.eval()
            with torch.no_grad():
                drawn(epoch, draw(model))
            model.train()

    picture(0)
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
        epoch_ended(epoch + 1, epochs, fitted.losses[-1], measured)
        if (epoch + 1) % draw_every == 0 or epoch + 1 == epochs:
            picture(epoch + 1)
    model.eval()
    return fitted


@dataclass(frozen=True)
class Bound:
    """How far a figure the training measured (stored beside its weights) may come out of a retraining on kernels
    that round otherwise, and why that far."""

    allowed: float
    why: str


@dataclass(frozen=True)
class Elsewhere:
    """What a retraining guarantees on a machine other than the one that trained the stored weights, whose kernels
    may round otherwise though told the same family (MKL takes other paths on Intel and AMD processors, and on
    processors of one vendor with other extensions, whatever it is told): the weights within `weights` of the stored
    ones (`why` so far), and each figure of `behaviour` (a key of the weights' metadata: a held-out accuracy, a
    return) within its bound of the stored figure. On the machine that trained them (the weights' `trained_on`), with
    the same torch, a retraining gives the same bits, or weights within the recipe's tolerance."""

    weights: float
    why: str
    behaviour: dict[str, Bound]


@dataclass
class Trained:
    """What a recipe's training wrote, or would write: each file with its tensors and metadata, the facts a
    retraining must also reproduce (the same test split), and one line that says what was measured."""

    files: dict[Path, tuple[dict[str, Tensor], dict[str, str]]]
    summary: str
    same: dict[str, bool] = field(default_factory=dict)


def train_main(
    argv: list[str],
    trained: Callable[..., Trained],
    tolerance: float,
    elsewhere: Elsewhere,
    knobs: Mapping[str, Knob] | None = None,
) -> int:
    """train.py's main: train and write the recipe's files, or with --check retrain in memory and compare every
    tensor of every file with the stored one, and say which guarantee held (compared()): exit status 1 when none
    did, a tensor is missing or reshaped, or a fact of `same` does not hold. --report is --check told as JSON lines
    on stdout: each epoch as it ends, then the comparison; --progress tells the epochs (and pictures) of a training
    that writes its files.

    A recipe that declares knobs passes them: `trained(values)` is then called with every knob's value (`--knob
    name=value`, TENSORVIZ_KNOBS: recipekit.knobs), and a variant (a knob moved) is written to, and checked against,
    a folder of its own with its knobs.json, never the recorded files. A knob refused is exit status 2."""
    torch.use_deterministic_algorithms(True)
    make, out, values = trained, None, {}
    if knobs is not None:
        try:
            recipe_dir = Path(trained.__code__.co_filename).resolve().parent  # train.py's folder
            values = chosen(knobs, given(argv, recipe_dir))
            out = out_folder(argv, recipe_dir, moved(knobs, values))
        except KnobError as exc:
            print(f"train.py: {exc}", file=sys.stderr)
            return 2

        def make() -> Trained:  # with the knobs' values, into the variant's folder where one is moved
            made = trained(values)
            if out is None:
                return made
            return replace(made, files={out / path.name: written for path, written in made.files.items()})

    def write(event: dict) -> None:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    if "--report" in argv or "--progress" in argv:
        LISTENER.set(Listener(write))
    if "--report" in argv:
        report = compared(make(), tolerance, elsewhere)
        write({"event": "report", "report": report})
        return 0 if report["passed"] else 1
    made = make()
    if "--check" in argv:
        report = compared(made, tolerance, elsewhere)
        facts = "".join(f"; {fact['name']}: {fact['held']}" for fact in report["facts"])
        print(f"retrained: {made.summary}; largest weight difference {_worst(report)}{facts}")
        print(f"{'PASSED' if report['passed'] else 'FAILED'}: {report['verdict']}")
        return 0 if report["passed"] else 1
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / SETTINGS).write_text(json.dumps(values, indent=2) + "\n")
    for path, (tensors, metadata) in made.files.items():
        weights.write(path, tensors, metadata)
    where = f" in {out}" if out is not None else ""
    print(f"{made.summary}; wrote {', '.join(path.name for path in made.files)}{where}")
    return 0


def compared(made: Trained, tolerance: float, elsewhere: Elsewhere) -> dict:
    """A retraining against the stored files: every tensor (its largest |difference| from the stored one, and whether
    the bits are the same), every figure of the files' metadata (the held-out metric the training measured, stored
    beside the weights, measured again), the facts a retraining must reproduce, and which guarantee held: the same
    bits; every tensor within `tolerance` (another torch build's last bits); or, where the kernels round otherwise,
    every tensor within the `elsewhere` bound and every figure of its behaviour within its own. It passed where one
    held and every fact did; `verdict` says which, in words. JSON-ready (no infinity: a tensor missing from either
    side, or reshaped, has no difference and a `problem`)."""
    tensors, figures = [], []
    for path, (retrained, retrained_meta) in made.files.items():
        try:
            stored, stored_meta = weights.read(path)
        except Exception as exc:  # noqa: BLE001 - any unreadable stored file is a failed comparison, said by name
            tensors.append(
                {
                    "file": path.name,
                    "name": None,
                    "shape": None,
                    "largest_difference": None,
                    "identical": False,
                    "problem": f"the stored file cannot be read ({type(exc).__name__})",
                }
            )
            continue
        for name in sorted(set(retrained) | set(stored)):
            difference = _tensor_difference(stored.get(name), retrained.get(name))
            tensors.append({"file": path.name, "name": name} | difference)
        figures += [
            {"file": path.name, "name": key} | _figure(stored_meta.get(key), retrained_meta.get(key))
            for key in sorted((set(stored_meta) | set(retrained_meta)) - {"torch", "trained_on"})
        ]
    differences = [t["largest_difference"] for t in tensors]
    worst = None if None in differences else max(differences, default=0.0)
    facts = [{"name": name, "held": bool(held)} for name, held in made.same.items()]
    digest = hashlib.sha256()
    for path, (retrained, _) in made.files.items():
        for name in sorted(retrained):
            tensor = retrained[name].contiguous()
            digest.update(f"{path.name}:{name}:{tensor.dtype}:{list(tensor.shape)}:".encode())
            digest.update(tensor.flatten().view(torch.uint8).numpy().tobytes())  # the bits, whatever the dtype
    behaviour = _behaviour(figures, elsewhere)
    identical = sum(t["identical"] for t in tensors)
    here = trained_here(made)
    if worst is None:
        guarantee = "none"
    elif identical == len(tensors):
        guarantee = "same bits"
    elif worst <= tolerance:
        guarantee = "tolerance"
    elif here is not True and worst <= elsewhere.weights and all(b["held"] for b in behaviour):
        guarantee = "behaviour"
    else:
        guarantee = "none"
    held = all(f["held"] for f in facts)
    return {
        "summary": made.summary,
        "weights_sha256": digest.hexdigest(),
        "tolerance": tolerance,
        "passed": guarantee != "none" and held,
        "largest_difference": worst,
        "identical": identical,
        "guarantee": guarantee,
        "bound": elsewhere.weights if guarantee == "behaviour" else tolerance,
        "trained_here": here,
        "verdict": _verdict(guarantee, worst, tolerance, elsewhere, behaviour, facts, len(tensors), here),
        "elsewhere": {"weights": elsewhere.weights, "why": elsewhere.why},
        "behaviour": behaviour,
        "tensors": tensors,
        "figures": figures,
        "facts": facts,
    }


def trained_here(made: Trained) -> bool | None:
    """Whether the stored weights were trained on this machine (processor and extensions, the same torch), where the
    training's kernels give the same bits: as their metadata's `trained_on` says; None where it says nothing (files
    written before it was kept)."""
    try:
        _, stored = weights.read(next(iter(made.files)))
    except Exception:  # noqa: BLE001 - an unreadable file is compared (and refused) tensor by tensor
        return None
    if "trained_on" not in stored:
        return None
    return stored["trained_on"] == machine() and stored.get("torch") == torch.__version__


def _behaviour(figures: list[dict], elsewhere: Elsewhere) -> list[dict]:
    """Each figure of the recipe's behaviour, stored and retrained, against its bound."""
    found: dict[str, dict] = {}
    for figure in figures:  # by name, or by file and name where two files measure the same (file.safetensors:name)
        found.setdefault(figure["name"], figure)
        found[f"{figure['file']}:{figure['name']}"] = figure
    behaviour = []
    for name, bound in elsewhere.behaviour.items():
        figure = found.get(name, {})
        stored, retrained = figure.get("stored"), figure.get("retrained")
        difference = None if stored is None or retrained is None else abs(retrained - stored)
        behaviour.append(
            {
                "name": name,
                "stored": stored,
                "retrained": retrained,
                "difference": difference,
                "allowed": bound.allowed,
                "why": bound.why,
                "held": difference is not None and difference <= bound.allowed,
            }
        )
    return behaviour


def _verdict(
    guarantee: str,
    worst: float | None,
    tolerance: float,
    elsewhere: Elsewhere,
    behaviour: list[dict],
    facts: list[dict],
    count: int,
    here: bool | None,
) -> str:
    """What the retraining showed, in the words a reader is told (train.py --check, the page, tensorviz verify)."""
    unheld = "".join(f" “{f['name']}” did not hold." for f in facts if not f["held"])
    said = "; ".join(
        f"{b['name'].replace('_', ' ')} {_number(b['retrained'])} against {_number(b['stored'])} stored "
        f"(allowed ±{b['allowed']:g}{'' if b['held'] else ': NOT HELD'})"
        for b in behaviour
    )
    if guarantee == "same bits":
        return f"The same bits: all {count} tensors came out bit for bit as stored.{unheld}"
    if guarantee == "tolerance":
        return (
            f"The same weights within the recipe's tolerance: the largest difference is {worst:.3g} (at most "
            f"{tolerance:g}): the last bits of another processor's or torch build's sums.{unheld}"
        )
    if guarantee == "behaviour":
        machine_said = (
            "the stored weights do not say which machine trained them"
            if here is None
            else "another machine than the one that trained them"
        )
        return (
            f"Not the same bits ({machine_said}): the weights differ by up to {worst:.3g}, within "
            f"{elsewhere.weights:g}, as far as a training on kernels that round otherwise may take them "
            f"({elsewhere.why}). What the model does holds: {said}.{unheld}"
        )
    if worst is None:
        return f"A tensor could not be compared (missing, or another shape).{unheld}"
    if here:
        return (
            f"On the machine and torch that trained them a retraining gives the same bits (or weights within "
            f"{tolerance:g}); these differ by up to {worst:.3g}.{unheld}"
        )
    beyond = (
        f"beyond even the {elsewhere.weights:g} a training elsewhere may reach"
        if worst > elsewhere.weights
        else "and what the model does did not hold"
    )
    return f"The weights differ by up to {worst:.3g}, {beyond}: {said}.{unheld}"


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.6g}"


def _worst(report: dict) -> str:
    """The comparison's worst tensor in words: its difference (or its problem) and its name."""
    worst = max(
        report["tensors"],
        default=None,
        key=lambda t: float("inf") if t["largest_difference"] is None else t["largest_difference"],
    )
    if worst is None:
        return "0 (no tensors)"
    said = worst["problem"] if worst["largest_difference"] is None else f"{worst['largest_difference']:.2e}"
    return f"{said} ({worst['file']}: {worst['name']})"


def _tensor_difference(stored: Tensor | None, retrained: Tensor | None) -> dict:
    """One tensor of a comparison: its shape, largest |difference| in double precision, whether the bits are equal."""
    if stored is None or retrained is None:
        shape = list((retrained if stored is None else stored).shape)
        return {
            "shape": shape,
            "largest_difference": None,
            "identical": False,
            "problem": "not in the stored file" if stored is None else "the retraining made no such tensor",
        }
    if stored.shape != retrained.shape:
        return {
            "shape": list(retrained.shape),
            "largest_difference": None,
            "identical": False,
            "problem": f"stored with shape {list(stored.shape)}",
        }
    worst = (retrained.double() - stored.double()).abs().max().item() if stored.numel() else 0.0
    return {
        "shape": list(stored.shape),
        "largest_difference": worst if math.isfinite(worst) else None,
        "identical": torch.equal(stored, retrained),
        "problem": None if math.isfinite(worst) else "not finite",
    }


def _figure(stored: str | None, retrained: str | None) -> dict:
    """One metadata entry of a comparison: the same text or not and, where both are numbers (or lists of them), how
    many and their largest difference; a single number is given on both sides."""
    found = [_numbers(text) for text in (stored, retrained)]
    figure = {
        "same": stored == retrained,
        "values": None,
        "largest_difference": None,
        "stored": None,
        "retrained": None,
    }
    if found[0] is not None and found[1] is not None and len(found[0]) == len(found[1]):
        differences = [abs(a - b) for a, b in zip(*found, strict=True)]
        figure |= {"values": len(found[0]), "largest_difference": max(differences, default=0.0)}
        if len(found[0]) == 1:
            figure |= {"stored": found[0][0], "retrained": found[1][0]}
    return figure


def _numbers(text: str | None) -> list[float] | None:
    """The finite numbers a metadata text holds (a number, or a JSON list of numbers), else None."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        return None
    return [float(v) for v in values]


def metadata(**values) -> dict[str, str]:
    """A weights file's metadata: numbers as Python writes them exactly (repr), lists as JSON, and the torch and the
    machine that trained them (where a retraining gives the same bits: compared())."""
    return {
        k: json.dumps(v) if isinstance(v, list) else repr(v) if isinstance(v, float) else str(v)
        for k, v in values.items()
    } | {"torch": torch.__version__, "trained_on": machine()}


def run(main: Callable[[list[str]], int]) -> None:
    """`if __name__ == "__main__": run(main)`: the exit status of main with the command's arguments, in a process
    whose numeric libraries run KERNELS (this script started again with them where they are not set yet)."""
    if any(os.environ.get(name) != value for name, value in KERNELS.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], os.environ | KERNELS)
    sys.exit(main(sys.argv[1:]))
