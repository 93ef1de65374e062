"""A recipe's training run again on the server (train.py --report in a process of its own, started as
`python -m app.compute.retraining <recipe folder> [memory headroom MB] [knobs as JSON]`: `train` below), heard epoch
by epoch, stopped at its time limit or when it is cancelled; or, given knobs, a variant trained (train.py --progress
--out) and its files answered.

    retrained = retrain(RetrainCall(recipe_dir, timeout, memory_mb), heard, cancelled)
    variant = retrain(RetrainCall(recipe_dir, timeout, memory_mb, knobs={"hidden": 8}), heard, cancelled)

The same call runs in a web process's own thread (EXECUTOR = "local") or in a Celery worker (compute/tasks.py); in
either it is the process that trains which is started fresh, with the kernels train.py run alone would take, so
that the retraining is the recipe's own, not a replay of it inside a server process.
"""

import base64
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from recipekit.kernels import KERNELS

from ..domain.folders import without_paths
from .errors import RecipeError, RecipeTimeout
from .messages import Failure

PROGRESS_SECONDS = 0.5  # how often a retraining's progress is passed on (every epoch of 2,000 would be too often)
LOOK_SECONDS = 0.25  # how often a training that says nothing is asked whether it was cancelled or ran out of time
STDERR_LINES = 20  # the lines of a failed training's error output given to the log and the message
ORPHAN_CHECK_SECONDS = 1.0  # how often the training process looks whether the process that started it is gone


class Cancelled(RecipeError):
    """The retraining was cancelled before it ended."""


@dataclass(frozen=True)
class RetrainCall:
    """What a retraining runs: the recipe folder's train.py, within `timeout` seconds and `memory_mb` of headroom
    over what its process maps once torch is loaded (0: no cap); with `knobs` (a variant's, every knob's value), a
    training with them whose files are the reply, not a comparison with the stored ones."""

    recipe_dir: Path
    timeout: float
    memory_mb: int = 0
    knobs: dict | None = None

    def wire(self) -> dict:
        """The call as a Celery task carries it (plain data)."""
        return {"recipe_dir": str(self.recipe_dir), "timeout": self.timeout, "memory_mb": self.memory_mb,
                "knobs": self.knobs}

    @classmethod
    def read(cls, task: dict, recipe_dir: Path | None = None) -> "RetrainCall":
        """A call from its plain data, in `recipe_dir` where given (a compute worker's folder of the same name)."""
        return cls(recipe_dir or Path(task["recipe_dir"]), float(task["timeout"]), int(task["memory_mb"]),
                   task.get("knobs"))


@dataclass(frozen=True)
class Retrained:
    """A retraining's reply: train.py's comparison with the stored files (`report`, recipekit.training.compared; for
    a variant, none), the environment it trained in, how long it took, its progress at the end
    (Curve.progress(); None before an epoch ended), and a variant's files (name: base64 of the bytes)."""

    report: dict
    environment: dict | None
    compute_seconds: float
    progress: dict | None = None
    files: dict[str, str] | None = None

    def wire(self) -> dict:
        return {"ok": True, **asdict(self)}


def read_retrained(data: dict) -> Retrained | Failure:
    """A retraining's reply from its plain data (a Celery task's result)."""
    fields = {k: v for k, v in data.items() if k != "ok"}
    return Retrained(**fields) if data["ok"] else Failure(**fields)


def retrain(call: RetrainCall, heard: Callable[[dict], None], cancelled: Callable[[], bool]) -> Retrained:
    """Train the recipe again and compare with its stored files (train.py's comparison, recipekit.training.compared,
    is the reply's report). `heard(event)` is told each epoch as it ends
    ({"run", "epoch", "epochs", "unit", "loss", "metrics"}); `cancelled()` is asked while it trains. RecipeTimeout
    past the call's timeout, Cancelled, or a RecipeError saying why the training stopped without a report."""
    started = time.perf_counter()
    knobs = [] if call.knobs is None else [json.dumps(call.knobs), str(call.timeout)]  # and its CPU time
    process = subprocess.Popen(
        # -I: the recipe folder it starts in is not on its import path (a file there named as a module shadows none)
        [sys.executable, "-I", "-m", "app.compute.retraining", str(call.recipe_dir), str(call.memory_mb), *knobs],
        cwd=call.recipe_dir, env=os.environ | KERNELS, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)  # its own process group: a stop ends whatever it started too
    lines: queue.Queue = queue.Queue()
    errors: deque[str] = deque(maxlen=STDERR_LINES)
    readers = [threading.Thread(target=_read, args=(process.stdout, lines.put), daemon=True),
               threading.Thread(target=_read, args=(process.stderr, errors.append), daemon=True)]
    for reader in readers:
        reader.start()
    found: dict = {}
    try:
        while True:
            try:
                line = lines.get(timeout=LOOK_SECONDS)
            except queue.Empty:
                line = ""
            if line is None:  # stdout closed: the training ended
                break
            event = _event(line)
            if event.get("event") == "epoch":
                heard({k: event[k] for k in ("run", "epoch", "epochs", "unit", "loss", "metrics")})
            elif event.get("event") == "drawn":
                heard({k: event[k] for k in ("run", "epoch", "drawing")})
            elif event.get("event") in ("environment", "report", "written"):
                found[event["event"]] = event[event["event"]]
            if time.perf_counter() - started > call.timeout:
                raise RecipeTimeout(f"the retraining ran past its {call.timeout:g} s limit and was stopped")
            if cancelled():
                raise Cancelled("the retraining was cancelled")
        process.wait()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for reader in readers:
            reader.join(timeout=5)
    ending = "report" if call.knobs is None else "written"
    if process.returncode == -signal.SIGXCPU:
        raise RecipeTimeout(f"the training used its {call.timeout:g} s of CPU time and was stopped")
    if ending not in found or process.returncode not in (0, 1):
        last = next((line for line in reversed(errors) if line), "")  # the stream's end is None
        said = without_paths(last, (str(call.recipe_dir.parent),))
        missing = "a report" if call.knobs is None else "writing its files"
        raise RecipeError(f"train.py stopped (exit status {process.returncode}) without {missing}"
                          + (f": {said}" if said else ""))
    if call.knobs is None:
        return Retrained(found["report"], found.get("environment"), time.perf_counter() - started)
    return Retrained({}, found.get("environment"), time.perf_counter() - started, files=found["written"])


DRAWINGS = 40  # the pictures of a watched training a poller is given, the latest (a page plays them in turn)
DRAWN_DIGITS = 4  # a picture's numbers to this many decimals: the eye cannot tell more, and each poll carries them


class Curve:
    """A retraining's progress as a poller sees it, built from its epochs as they are heard: where it is (the fit, of
    how many begun, its epoch of how many, the last loss and held-out metrics), every curve so far, one per fit
    (a recipe may train several models, each a run of its own), and the pictures the training drew of its model as
    it learnt (the latest DRAWINGS: {"run", "epoch", "drawing"}), where it draws any."""

    def __init__(self) -> None:
        self.curves: list[dict] = []
        self.last: dict = {}
        self.drawings: deque[dict] = deque(maxlen=DRAWINGS)

    def heard(self, event: dict) -> None:
        if "drawing" in event:
            self.drawings.append(event | {"drawing": _rounded(event["drawing"])})
            return
        if not self.curves or self.curves[-1]["run"] != event["run"]:
            self.curves.append({"run": event["run"], "epochs": event["epochs"], "unit": event["unit"], "loss": [],
                                "metrics": {}})
        curve = self.curves[-1]
        curve["loss"].append(event["loss"])
        for name, value in event["metrics"].items():
            curve["metrics"].setdefault(name, []).append(value)
        self.last = event

    def progress(self) -> dict | None:
        """{"run", "runs", "epoch", "epochs", "unit", "loss", "metrics", "curves"}, or None before the first epoch
        ends."""
        if not self.last:
            return None
        return {**self.last, "runs": len(self.curves), "curves": [
            {**curve, "loss": list(curve["loss"]), "metrics": {k: list(v) for k, v in curve["metrics"].items()}}
            for curve in self.curves]} | ({"drawings": list(self.drawings)} if self.drawings else {})


def _rounded(value):
    """A picture's numbers to DRAWN_DIGITS decimals, its shape kept."""
    if isinstance(value, float):
        return round(value, DRAWN_DIGITS)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def retrain_watched(call: RetrainCall, progressed: Callable[[dict], None],
                    cancelled: Callable[[], bool]) -> Retrained:
    """retrain() with its progress passed on whole (Curve.progress()) at most every PROGRESS_SECONDS and at its end:
    the executors' one way to retrain. The reply carries the last progress too."""
    curve, passed = Curve(), [0.0]

    def heard(event: dict) -> None:
        curve.heard(event)
        if time.monotonic() - passed[0] >= PROGRESS_SECONDS and curve.progress() is not None:
            progressed(curve.progress())
            passed[0] = time.monotonic()

    reply = retrain(call, heard, cancelled)
    if curve.progress() is not None:
        progressed(curve.progress())
    return replace(reply, progress=curve.progress())


def _read(stream, put: Callable) -> None:
    """Pass each line of a stream on, then None (its end)."""
    for line in stream:
        put(line.rstrip("\n"))
    put(None)


def _event(line: str) -> dict:
    """One line of the training's output as an event; a line that is not one (the recipe printed) is no event."""
    try:
        event = json.loads(line)
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def end_with_parent() -> None:
    """End this process when the one that started it is gone (a web process or a compute worker stopped mid-job:
    nothing would stop a training it left behind, nor read its report)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def train(argv: list[str]) -> int:
    """The training process: train.py's main with `--report`, with the kit's training kernels set as train.py run
    alone sets them. It writes JSON lines on stdout: first the environment it trains in, then the report (each epoch
    as it ends, then the comparison with the stored files, tensor by tensor); its exit status is train.py's (1: the
    retraining differs). Given knobs (argv[2], JSON), train.py --progress with them writes a variant into a folder of
    its own instead, and the last line holds its files ({"event": "written"}: base64 by name) and what it printed."""
    end_with_parent()
    import torch

    from recipekit.kernels import TRAINING

    from ..domain.recipes import load_module
    from .process import cap_cpu, cap_memory
    from .worker import environment

    recipe_dir = Path(argv[0])
    cap_memory(int(argv[1]) if len(argv) > 1 else 0)
    torch.use_deterministic_algorithms(True)
    module = load_module(recipe_dir, "train")
    torch.set_num_threads(1)  # as training.one_thread trains, so that the environment says what the training ran on
    sys.stdout.write(json.dumps({"event": "environment",
                                 "environment": environment(torch, int(getattr(module, "TRAIN_SEED", 0)), "train",
                                                              kernels=TRAINING)}))
    sys.stdout.write("\n")
    sys.stdout.flush()
    if len(argv) < 3:
        return module.main(["--report"])
    from recipekit.knobs import ENVIRONMENT

    os.environ[ENVIRONMENT] = argv[2]  # train.py reads the knobs where the kit says the server passes them
    cap_cpu(float(argv[3]))
    with tempfile.TemporaryDirectory(prefix="variant-") as out:
        status = module.main(["--progress", "--out", out])  # what it prints for a person is no event: passed over
        if status != 0:
            return status
        files = {path.name: base64.b64encode(path.read_bytes()).decode() for path in sorted(Path(out).iterdir())
                 if path.is_file()}
    sys.stdout.write(json.dumps({"event": "written", "written": files}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(train(sys.argv[1:]))
