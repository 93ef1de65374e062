"""The recipe worker: runs in its own process, imports torch, and calls fixed recipe entry points.

Nothing here is imported by the web process: its recipe processes fork from a server process that imports
this module and torch (pool.worker_context), so the web workers never load torch.
"""

import functools
import gc
import json
import os
import platform
import threading
import time
import traceback
from collections.abc import Callable
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from types import ModuleType
from typing import Any

from recipekit.kernels import processor
from recipekit.refusals import Refused, Unavailable

from ..domain import caches
from ..domain.jsonbytes import dumps
from ..domain.lru import SizedLRU
from ..domain.recipes import METADATA_FILE, load_module, read_metadata
from ..domain.stamps import file_stamp
from .errors import out_of_memory
from .messages import (
    ActivationsArgs,
    CaptureArgs,
    Failure,
    InterveneArgs,
    OutlineArgs,
    RecipeCall,
    ReplayArgs,
    Reply,
    SharedRunsFolder,
    TrainingArgs,
    Warmup,
    is_warmup,
)
from .process import cap_memory, deterministic, manual_seed, use_kernels

# The entry that replays one recorded case (run.py's replay(case=...)), where no lab endpoint runs it; named as
# the service names it (services/subjects.py).
REPLAY = "run.replay"


def entry_points(recipe_dir: Path) -> dict[str, frozenset[str]]:
    """What a task may call: run.py's replay, and the lab.py functions the recipe's lab declaration names."""
    try:
        stamp = file_stamp((recipe_dir / METADATA_FILE).stat())
    except OSError:
        stamp = None
    return _entry_points(recipe_dir, stamp)


@functools.lru_cache(maxsize=64)
def _entry_points(recipe_dir: Path, stamp: tuple | None) -> dict[str, frozenset[str]]:
    """Read once per version of recipe.toml (`stamp`): parsing it took a third of a small replay's time. The
    catalog checked the declaration; a lab read here is only trusted for the entries' names."""
    lab = read_metadata(recipe_dir).get("lab", {})
    endpoints = lab.get("endpoints", {}) if isinstance(lab, dict) else {}
    return {"run": frozenset({"replay"}),
            "lab": frozenset(str(e.get("entry")) for e in endpoints.values() if isinstance(e, dict)),
            "warm": frozenset({lab["warm"]} if isinstance(lab.get("warm") if isinstance(lab, dict) else None, str)
                              else ())}


def case_of(replay: Callable) -> Callable:
    """run.py's replay() as an entry that answers one recorded case: what What if? and the training stages run a
    case on where no lab endpoint can."""
    def replayed(case: str, **context):
        found = replay(case=case, **context).get("cases", {})
        if case not in found:
            raise LookupError(f"run.py's replay(case={case!r}) answered no case {case!r}")
        return found[case]

    return replayed


def entry_function(recipe_dir: Path, entry: str) -> Callable:
    """The function a task names: a lab.py entry the recipe's lab declares, or a recorded case replayed (REPLAY);
    ValueError for anything else."""
    if entry == REPLAY:
        return case_of(load_module(recipe_dir, "run").replay)
    if entry not in entry_points(recipe_dir)["lab"]:
        raise ValueError(f"lab.{entry} is not a recipe entry point")
    return getattr(load_module(recipe_dir, "lab"), entry)


def environment(torch: ModuleType, seed: int, mode: str = "eval", kernels: str = "native") -> dict:
    """What the run depended on, as the report states it: the software, the processor, the kernel family the process
    was told to use (recipekit/kernels.py) and the kernels torch ran on it."""
    import numpy

    cpu, extensions = processor()
    return {
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu,
        "vector_extensions": extensions,
        "kernels": kernels,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the kernels ATen chose: AVX2, AVX512, ...
        "torch_threads": torch.get_num_threads(),
        "seed": seed,
        "mode": mode,
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "device": "cpu",
    }


def warm(task: Warmup) -> None:
    """Import the recipe's modules and call the function its [lab] warm names (loading its checkpoint, say)
    with the server's arguments, so that the first request finds both done."""
    recipe_dir = Path(task.recipe_dir)
    declared = entry_points(recipe_dir)
    module = load_module(recipe_dir, "lab" if declared["lab"] else "run")
    if task.warm:
        if task.warm not in declared["warm"]:
            raise ValueError(f"{task.warm} is not the recipe's declared warm-up")
        getattr(module, task.warm)(**task.context)
    # What the recipe imported and loaded lives as long as the process: out of the collector's walks, so that a full
    # collection during a reader's run (a sampler's thousands of module calls can set one off) does not walk all of
    # torch's and the recipes' objects.
    gc.freeze()


# What each kind of call calls, by the type of its arguments: a function of (call, its arguments, seed, kept runs)
# that answers the function to run. A call with a request of a client's runs a declared entry of the recipe's own
# module (run.py, lab.py).
def _capture(call: RecipeCall, arguments: CaptureArgs, seed: int, plain_runs: SizedLRU | None) -> Callable[[], Any]:
    from . import capture

    if call.entry != "capture":
        raise ValueError(f"capture.{call.entry} is not a recipe entry point")
    return partial(capture.capture, **call.asked({"recipe_dir": str(call.recipe_dir), "inputs": arguments.inputs}))


def _intervene(call: RecipeCall, arguments: InterveneArgs, seed: int, plain_runs: SizedLRU | None) -> Callable[[], Any]:
    from . import intervene

    asked, sources = call.asked(arguments.args), [call.asked(source) for source in arguments.sources]
    keys = [call.plain_key(each, arguments.key) for each in [arguments.args, *arguments.sources]]
    return partial(intervene.intervene, entry_function(call.recipe_dir, call.entry), asked, arguments.steps,
                   sources, seed, arguments.root, plain_runs, keys[0], keys[1:])


def _outline(call: RecipeCall, arguments: OutlineArgs, seed: int, plain_runs: SizedLRU | None) -> Callable[[], Any]:
    from . import intervene

    return partial(intervene.outlines, entry_function(call.recipe_dir, call.entry),
                   [call.asked(each) for each in arguments.requests], seed, arguments.root, plain_runs,
                   [call.plain_key(each, arguments.key) for each in arguments.requests])


def _activations(call: RecipeCall, arguments: ActivationsArgs, seed: int,
                 plain_runs: SizedLRU | None) -> Callable[[], Any]:
    from . import activations

    return partial(activations.activations, entry_function(call.recipe_dir, call.entry), call.asked(arguments.args),
                   seed, arguments.root, arguments.inputs, arguments.arguments, arguments.node)


def _replay(call: RecipeCall, arguments: ReplayArgs, seed: int, plain_runs: SizedLRU | None) -> Callable[[], Any]:
    import torch

    from . import rounding

    if call.entry != "replay":
        raise ValueError(f"replay.{call.entry} is not a recipe entry point")
    return partial(rounding.replay, load_module(call.recipe_dir, "run").replay, arguments.states, arguments.nudge,
                   seed, torch, call.context)


def _training(call: RecipeCall, arguments: TrainingArgs, seed: int, plain_runs: SizedLRU | None) -> Callable[[], Any]:
    from . import training_stages

    snapshots = call.recipe_dir / read_metadata(call.recipe_dir)["training"]["snapshots"]  # the recipe's own
    entry = entry_function(call.recipe_dir, call.entry)
    return partial(training_stages.stages, entry, call.asked(arguments.args), seed, arguments.root, snapshots)


HANDLERS: dict[type, Callable[..., Callable[[], Any]]] = {
    CaptureArgs: _capture, InterveneArgs: _intervene, OutlineArgs: _outline, TrainingArgs: _training,
    ReplayArgs: _replay, ActivationsArgs: _activations}


def _declared(call: RecipeCall, request: dict, seed: int, plain_runs: SizedLRU | None) -> Callable[[], Any]:
    """A declared entry of the recipe's run.py or lab.py, called with the client's request."""
    if call.entry not in entry_points(call.recipe_dir).get(call.module, ()):
        raise ValueError(f"{call.module}.{call.entry} is not a recipe entry point")
    function = getattr(load_module(call.recipe_dir, call.module), call.entry, None)
    if not callable(function):
        raise ValueError(f"{call.module}.py has no entry point {call.entry}()")
    return partial(function, **call.asked(request))


_warmed: set[str] = set()  # the recipes (with the server's arguments) whose warm-up this process has run


def warmed_first(call: RecipeCall) -> None:
    """The recipe's declared warm-up (a checkpoint loaded, and its weights probed) run in this process before any of
    its lab runs, whether or not the pool sent it first: so that a run observes itself alone (What if? counts every
    module call of the run it changes). A warm-up that fails is left for the run to fail with its own words."""
    warm = entry_points(call.recipe_dir)["warm"]
    if not warm or not entry_points(call.recipe_dir)["lab"] or isinstance(call.args, CaptureArgs):
        return
    key = f"{call.recipe_dir}:{json.dumps(call.context, sort_keys=True)}"
    if key in _warmed:
        return
    try:
        getattr(load_module(call.recipe_dir, "lab"), next(iter(warm)))(**call.context)
    except Exception:  # noqa: BLE001 - the run says why, in its own words
        return
    _warmed.add(key)


def execute(task: dict, torch: ModuleType, seed: int, plain_runs: SizedLRU | None = None) -> dict:
    """Run one task (a RecipeCall's or a Warmup's plain data). `plain_runs` holds the plain runs interventions made,
    for the next change to the same input (compute/intervene.py)."""
    if is_warmup(task):
        started = time.perf_counter()
        warm(Warmup.read(task))
        return {"result": None, "compute_seconds": time.perf_counter() - started}
    call = RecipeCall.read(task)
    run = HANDLERS.get(type(call.args), _declared)(call, call.args, seed, plain_runs)
    warmed_first(call)
    manual_seed(torch, seed)
    started = time.perf_counter()
    result = run()
    return {"result": result, "compute_seconds": time.perf_counter() - started}


def encoded(result, environment: dict, compute_seconds: float) -> Reply:
    """A result as the JSON text it travels as (`result_json`), whether it is finite (JSON proper: NaN and
    infinity are written as NaN and Infinity otherwise, which a replay's comparison reads and no answer
    serves), and its top-level keys where it is an object (an answer spliced beside others checks them)."""
    raw, finite = dumps(result)
    return Reply(raw.decode(), finite, list(result) if isinstance(result, dict) else None, environment,
                 compute_seconds)


class RecipeProcess:
    """What a process that runs recipes holds between tasks (torch loaded, the plain runs interventions made), and
    its one way to answer a task: the reply as plain JSON data, or the error that ended it."""

    def __init__(self, torch: ModuleType, seed: int, kernels: str = "native",
                 shared: SharedRunsFolder | None = None) -> None:
        from .shared_runs import RunsFolder, SharedRuns

        self.torch = torch
        self.seed = seed
        self.env = environment(torch, seed, kernels=kernels)
        # A reader who stacks changes on one input runs it as asked once, whichever recipe process of the machine
        # their requests reach (`shared`).
        self.plain_runs = SharedRuns(caches.LAYERS["runs"].size, RunsFolder.opened(shared) if shared else None)

    def answer(self, task: dict, timeouts: tuple[type[BaseException], ...] = ()) -> dict:
        """The task's reply, as plain data; an exception of `timeouts` (an executor's time limit) says that it timed
        out."""
        try:
            ran = execute(task, self.torch, self.seed, self.plain_runs)
            # Encoded once, here: the text travels to the cache and the client as it is (plain JSON data only:
            # unpickling a torch object would import torch into the web process).
            return encoded(ran["result"], self.env, ran["compute_seconds"]).wire()
        except Exception as exc:  # a recipe's own error goes back to the caller, the process lives on
            refused = "request" if isinstance(exc, Refused) else "unavailable" if isinstance(exc, Unavailable) else None
            return Failure(f"{type(exc).__name__}: {exc}", failure(exc, task), traceback.format_exc(limit=8),
                           refused, str(exc) if refused else "", isinstance(exc, timeouts)).wire()


def failure(exc: BaseException, task: dict) -> str:
    """What went wrong in a run, in words a reader of the answer can use, without the exception's own text (which
    the server logs): where it stopped and, for the failures every recipe can meet, why."""
    module = task.get("module", "run")
    module = "lab" if module in ("intervene", "outline", "training") else module
    entry = task.get("entry", "replay")
    replayed = entry == REPLAY or module == ReplayArgs.MODULE
    where = "the recipe's replay() in run.py" if replayed else f"the recipe's {entry}() in {module}.py"
    if "warm" in task:
        where = "the recipe's warm-up"
    if out_of_memory(exc):
        return f"{where} needed more memory than a recipe process may take (RECIPE_MEMORY_MB)"
    if isinstance(exc, OSError):
        name = Path(exc.filename).name if isinstance(exc.filename, str) else "a file"
        return f"{where} cannot read {name}: {exc.strerror or type(exc).__name__}"
    return f"{where} stopped with {type(exc).__name__}; nothing was answered (the server's log says more)"


def start(torch_threads: int, seed: int, memory_mb: int, kernels: str = "native",
          shared: SharedRunsFolder | None = None) -> RecipeProcess:
    """Make this process a recipe process: torch loaded with its kernel family and threads, deterministic, memory
    capped, sharing its plain runs through `shared`."""
    import torch

    from .intervene import follow_parents

    follow_parents()  # before any recipe builds a model: a part a recipe calls alone is named in its model
    use_kernels(torch, kernels)
    cap_memory(memory_mb)
    torch.set_num_threads(torch_threads)
    deterministic(torch)
    return RecipeProcess(torch, seed, kernels, shared)


class Watchdog:
    """Ends this process when the web process that started it is gone (a SIGKILLed parent leaves its
    children to init: nothing else would stop them), or when a task runs past its timeout and a grace
    period (the pool kills it then; this holds even if the pool's process cannot).

    The web process is watched itself, not this process's parent: the parent is the forkserver, which lives
    on while any process it forked holds its liveness pipe, as each recipe process does. A pid can be reused,
    so the web process is known by its pid and its start time together."""

    GRACE = 5.0  # seconds past the timeout before the worker ends itself
    TICK = 0.5  # seconds between looks

    def __init__(self, web: int, timeout: float) -> None:
        self.web = web
        fields = stat(web)
        self.born = fields[19] if fields else None
        if not self._web_runs():
            os._exit(70)
        self.timeout = timeout
        self.deadline: float | None = None
        threading.Thread(target=self._watch, name="recipe-watchdog", daemon=True).start()

    def _web_runs(self) -> bool:
        fields = stat(self.web)
        if fields is None:  # gone, or no /proc to tell: the signal answers
            return alive(self.web)
        return fields[0] != "Z" and fields[19] == self.born

    def _watch(self) -> None:
        while True:
            if not self._web_runs():
                os._exit(70)
            if self.deadline is not None and time.monotonic() > self.deadline:
                os._exit(71)
            time.sleep(self.TICK)

    def task(self) -> None:
        if self.timeout:
            self.deadline = time.monotonic() + self.timeout + self.GRACE

    def idle(self) -> None:
        self.deadline = None


def stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (its state first, its start time 20th), or None
    where it cannot be read."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def alive(pid: int) -> bool:
    """Whether process `pid` runs: a killed one its parent has not reaped yet (a zombie) does not."""
    try:
        os.kill(pid, 0)
    except OSError:  # no such process, or another user's holds the pid now
        return False
    fields = stat(pid)
    return fields is None or fields[0] != "Z"


def serve(conn: Connection, torch_threads: int, seed: int, memory_mb: int = 0, web: int | None = None,
          timeout: float = 0.0, kernels: str = "native", shared: SharedRunsFolder | None = None) -> None:
    """Answer tasks from the pipe until it closes; `web` is the web process whose runs these are."""
    watchdog = Watchdog(web if web is not None else os.getppid(), timeout)
    process = start(torch_threads, seed, memory_mb, kernels, shared)
    conn.send({"ready": True})  # torch is loaded: from here on, task timeouts measure the recipe alone
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        watchdog.task()
        conn.send(process.answer(task))
        watchdog.idle()


