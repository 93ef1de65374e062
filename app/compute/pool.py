"""A pool of recipe worker processes: bounded concurrency, hard timeouts, crashed workers replaced.

The errors a run ends with (errors.py) are named here too, where the services take them from."""

import logging
import math
import multiprocessing
import multiprocessing.forkserver
import os
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from ..domain.folders import without_paths
from . import worker
from .errors import (
    PoolBusy,
    RecipeCrashed,
    RecipeError,
    RecipeRefused,
    RecipeSuspended,
    RecipeTimeout,
    RecipeUnavailable,
)
from .messages import Failure, RecipeCall, Reply, SharedRunsFolder, Warmup, read_reply
from .retraining import RetrainCall, Retrained, retrain_watched

log = logging.getLogger(__name__)


# The shape of a recipe process's reply (its result as JSON text since 2): part of every kept answer's key,
# so that a release never reads a reply kept by another in another shape. Change it with the shape.
REPLY_FORMAT = 2


def outcome(reply: Reply | Failure, call: RecipeCall) -> Reply:
    """A recipe process's reply, whichever executor carried it: the reply when it ran, else the RecipeError
    (a refusal with its status) that says why not, without the server's folders."""
    if isinstance(reply, Reply):
        return reply
    roots = (str(Path(call.recipe_dir).parent), *(v for v in call.context.values() if isinstance(v, str)))
    if reply.refused:
        refusal = RecipeRefused if reply.refused == "request" else RecipeUnavailable
        raise refusal(without_paths(reply.message, roots))
    log.warning("recipe %s failed: %s\n%s", Path(call.recipe_dir).name, without_paths(reply.error, roots),
                without_paths(reply.traceback, roots))
    if reply.timed_out:
        raise RecipeTimeout("the recipe ran past its timeout and was stopped")
    # Said in words (the worker's `words`), without the exception's text, which the log above keeps.
    raise RecipeError(without_paths(reply.words or "the recipe failed; nothing was answered", roots))


STARTUP_TIMEOUT = 120.0  # seconds a new worker may take to start Python and import torch


class _Worker:
    """One recipe process with the pipe to it, and the warm-ups it has still to run (`pending`: each recipe's
    start)."""

    def __init__(self, ctx, torch_threads: int, seed: int, memory_mb: int, timeout: float,
                 pending: list[Warmup] | None = None, kernels: str = "native",
                 shared: SharedRunsFolder | None = None) -> None:
        self.pending: list[Warmup] = list(pending or [])
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=worker.serve, args=(child, torch_threads, seed, memory_mb, os.getpid(), timeout, kernels, shared),
            name="tensorviz-recipe", daemon=True,
        )
        self.process.start()
        child.close()
        try:
            if self.conn.poll(STARTUP_TIMEOUT) and self.conn.recv().get("ready"):
                return
        except (EOFError, OSError):
            pass
        self.kill()
        raise RecipeCrashed(f"a recipe worker failed to start (exit code {self.process.exitcode})")

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def alive(self) -> bool:
        """Whether an idle worker can take a task: an idle one sends nothing, so a pipe with something to read
        has been closed by a process that ended (told at once, before its exit status reaches this process)."""
        return self.process.is_alive() and not self.conn.poll()

    def kill(self) -> None:
        self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()


def worker_context() -> multiprocessing.context.BaseContext:
    """Where recipe processes come from: forks of one server process per web process that imported torch
    once (multiprocessing's forkserver), so that a worker starts in a tenth of a second, not the seconds
    of a torch import. The server is a fresh interpreter with no threads, so forking it is safe where
    forking the web process (threads, sockets, locks held) is not."""
    context = multiprocessing.get_context("forkserver")
    # Before the server starts (then a no-op): torch, and the configuration torch.use_deterministic_algorithms
    # imports, so that each recipe process starts without either.
    context.set_forkserver_preload(["app.compute.worker", "torch", "torch._inductor.config"])
    return context


def start_worker_server() -> None:
    """Start this web process's forkserver now (its torch import takes seconds) rather than when the first recipe
    process is asked for: gunicorn calls it as soon as a web worker is forked, so the import runs while the worker
    loads the app, and the first What if? after a start waits for it that much less."""
    worker_context()
    multiprocessing.forkserver.ensure_running()


class WorkerPool:
    """Runs recipe tasks in long-lived processes (worker_context), at most `size` at a time.

    Workers start at prestart() (or on first use) and stay warm; one that crashes or times out is killed
    and a fresh one takes its place. A task that finds no idle worker while one is starting waits for it rather
    than starting another; behind one warming a recipe (which may hang to its bound) it waits `patience` at most.

    Warm-ups (a recipe's imports, its checkpoint) are one per recipe folder,
    each bounded by `warmup_timeout`. A worker takes runs as soon as torch is loaded and warms in the time it
    would idle, one recipe at a time, so that no recipe's warm-up holds another recipe's run for more than one
    step; a run of a recipe whose warm-up this worker has not made yet makes that one first. A recipe whose warm-up
    raises FAILS_IN_A_ROW times in a row is suspended: no worker warms it again, and `on_failing(recipe_dir,
    reason)` tells the service, which makes its model unavailable. A warm-up whose process was killed by a signal
    (the OOM killer's, a machine short of memory) is no word of the recipe's: it is not counted, and is tried again
    in idle time after a backoff (BACKOFF_FIRST seconds, doubled each time to BACKOFF_MOST), or at once by a run
    that needs it.

    A hang costs only its own recipe. A run waits for a worker behind runs of its own recipe, but behind another's
    for at most `patience` seconds: then it runs in a worker of its own (at most `size` such at once), so that a
    recipe that hangs holds no other model's request. A run past `timeout` is killed (RecipeTimeout), and
    `on_hang(recipe_dir)` tells the service before the run's place is given back, which suspends the recipe for a
    while (suspend with `until`): its runs waiting meanwhile are refused (RecipeSuspended) rather than hang in turn.
    """

    FAILS_IN_A_ROW = 2
    BACKOFF_FIRST = 1.0
    BACKOFF_MOST = 300.0

    def __init__(self, size: int, timeout: float, torch_threads: int, seed: int, queue: int = 0,
                 memory_mb: int = 0, warmup_timeout: float | None = None,
                 on_failing: Callable[[str, str], None] | None = None,
                 kernels: str = "native", patience: float = 0.25,
                 on_hang: Callable[[str], None] | None = None, shared: SharedRunsFolder | None = None) -> None:
        self.size = size
        self.capacity = size + queue  # runs admitted at once: running plus waiting for a worker
        self._admitted = 0
        self.timeout = timeout
        self.warmup_timeout = min(timeout, warmup_timeout) if warmup_timeout else timeout
        self._torch_threads = torch_threads
        self._seed = seed
        self._memory_mb = memory_mb
        self._kernels = kernels  # the family every recipe process computes with (recipekit/kernels.py)
        self._shared = shared  # where the machine's recipe processes share What if?'s plain runs
        self._ctx = worker_context()
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._returned = threading.Condition(self._lock)  # a worker joined the idle ones, or a start ended
        self._starting = 0  # workers being started in the background
        self._warming: list[_Worker] = []  # idle workers taken out to run one warm-up
        self._waiting = 0  # runs waiting for a worker: idle time is theirs before any warm-up's
        self._warmups: dict[str, Warmup] = {}  # by recipe folder: what every new worker runs when it idles
        self._failures: dict[str, int] = {}  # by recipe folder: warm-ups failed in a row
        self.failing: dict[str, str] = {}  # by recipe folder: why its warm-up is no longer run
        self._last_error: dict[str, str] = {}  # by recipe folder: how its last failed warm-up failed
        self._backoff: dict[str, tuple[float, float]] = {}  # by recipe folder: warmed no sooner than, and the delay
        self._on_failing = on_failing
        self._closed = False
        self.patience = patience
        self._on_hang = on_hang
        self._extra = 0  # runs in a worker of their own, past `patience` behind another recipe's
        self._running: dict[str, int] = {}  # by recipe folder: its runs in a worker now
        self._hangs: dict[str, tuple[float, str]] = {}  # by recipe folder: the epoch time it may run again, and why

    def admit(self) -> None:
        """Claim a place for one run, running or queued; PoolBusy when there is none. Pair with release()."""
        with self._lock:
            if self._admitted >= self.capacity:
                raise PoolBusy(f"all {self.size} recipe workers are busy and {self.capacity - self.size} runs wait")
            self._admitted += 1

    def release(self) -> None:
        with self._lock:
            self._admitted -= 1

    def _new_worker(self) -> _Worker:
        with self._lock:
            pending = [warmup for folder, warmup in self._warmups.items() if folder not in self.failing]
        return _Worker(self._ctx, self._torch_threads, self._seed, self._memory_mb, self.timeout, pending,
                       self._kernels, self._shared)

    def _take(self) -> _Worker:
        """An idle worker: the one returned last; else one that is starting, waited for; else, past `patience`
        behind a worker warming a recipe (which may hang to its bound), a new one."""
        with self._lock:
            self._waiting += 1
            try:
                while True:
                    while self._idle:
                        candidate = self._idle.pop()
                        if candidate.alive():
                            return candidate
                        candidate.kill()
                    if self._starting:  # a worker that will be idle soon
                        waited = self._returned.wait(STARTUP_TIMEOUT)
                    elif self._warming:  # a warm-up holds no run longer than the patience behind another model's
                        waited = self._returned.wait(self.patience)
                    else:
                        break
                    if not waited:
                        break
            finally:
                self._waiting -= 1
        return self._new_worker()

    def _release(self, w: _Worker, started: bool = False) -> None:
        """Return a worker to the idle ones (a worker taken out to warm is back); `started`: it is one the background
        start made. Then let an idle worker warm, where no run waits."""
        with self._lock:
            self._starting -= started
            if w in self._warming:
                self._warming.remove(w)
            stays = len(self._idle) < self.size and not self._closed
            if stays:
                self._idle.append(w)
            self._returned.notify_all()  # a worker to take, or one start fewer to wait for
        if not stays:
            w.kill()  # a replacement started while a request started its own: keep no more than size
        self._warm_when_idle()

    @contextmanager
    def _turn(self, folder: str):
        """A place to run one of this recipe's runs: one of the `size`, waited for behind runs of this recipe as long
        as they take, but behind other recipes' for `patience` seconds at most (then a worker of its own)."""
        extra = False
        if not self._slots.acquire(timeout=self.patience):
            with self._lock:
                extra = not self._running.get(folder) and self._extra < self.size
                self._extra += extra
            if not extra:
                self._slots.acquire()
        with self._lock:
            self._running[folder] = self._running.get(folder, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._running[folder] -= 1
                self._extra -= extra
            if not extra:
                self._slots.release()

    def _refuse_suspended(self, folder: str) -> None:
        with self._lock:
            until, reason = self._hangs.get(folder, (0.0, ""))
        left = until - time.time()
        if left > 0:
            raise RecipeSuspended(f"this model is suspended: {reason}; it is tried again in {math.ceil(left)} s",
                                 math.ceil(left))

    def run(self, call: RecipeCall) -> Reply:
        """Run the call in a worker; returns the worker's reply, or raises a RecipeError saying why not."""
        folder = str(call.recipe_dir)
        self._refuse_suspended(folder)
        with self._turn(folder):
            self._refuse_suspended(folder)  # suspended while this run waited its turn
            w = self._ready(self._take(), folder)
            try:
                w.conn.send(call.wire())
                if not w.conn.poll(self.timeout):
                    w.kill()
                    self._start_in_background(1)
                    if self._on_hang is not None:  # told while this run holds its place: no run of it starts meanwhile
                        self._on_hang(folder)
                    raise RecipeTimeout(f"the recipe ran past its {self.timeout:g} s timeout and was stopped")
                reply = read_reply(w.conn.recv())
            except (EOFError, OSError) as exc:
                w.process.join(timeout=5)
                code = w.process.exitcode
                w.kill()
                self._start_in_background(1)
                raise RecipeCrashed(f"the recipe worker died (exit code {code}) before answering") from exc
            self._release(w)
        return outcome(reply, call)

    def retrain(self, call: RetrainCall, progressed: Callable[[dict], None],
                cancelled: Callable[[], bool]) -> Retrained:
        """A retraining (compute/retraining.py) in a process of its own, started from this thread: not one of the
        pool's recipe processes, whose kernels and threads are the server's, not the training's. RecipeTimeout,
        Cancelled or a RecipeError when it ends without a report; a pool shut down meanwhile (its server stopping)
        cancels it, so that no training outlives the server that started it."""
        return retrain_watched(call, progressed, lambda: self._closed or cancelled())

    def _ready(self, w: _Worker, folder: str) -> _Worker:
        """Make this recipe's own warm-up in the worker first, never another's. A start that fails fails the run,
        saying why."""
        own = [step for step in w.pending if step.recipe_dir == folder]
        w.pending = [step for step in w.pending if step.recipe_dir != folder]
        for step in own:
            if self._warm(w, step):
                continue
            self._start_in_background(1)
            raise RecipeCrashed(f"the recipe did not start in its process: {self._why(folder)}")
        return w

    def prestart(self, warmups: list[Warmup] | None = None) -> None:
        """Start every worker in the background; each runs `warmups` (one per recipe folder: importing its recipe,
        loading a checkpoint) in time it would idle, so that the first runs find them warm."""
        with self._lock:
            self._warmups = {warmup.recipe_dir: warmup for warmup in warmups or []}
        self._start_in_background(self.size)

    def _start_in_background(self, count: int) -> None:
        """Start workers (at boot, or to replace one that was killed) without making a request wait."""
        with self._lock:
            self._starting += count

        def start() -> None:
            for started in range(count):
                try:
                    w = self._new_worker()
                except RecipeError:  # a worker that cannot start is reported by the run that needs it
                    with self._lock:
                        self._starting -= count - started
                        self._returned.notify_all()
                    return
                self._release(w, started=True)

        threading.Thread(target=start, name="recipe-start", daemon=True).start()

    def _warm_when_idle(self) -> None:
        """Take an idle worker out to run one of its warm-ups still to run, unless a run waits for a worker."""
        with self._lock:
            if self._waiting:
                return
            now = time.monotonic()
            found = next(((w, step) for w in self._idle for step in w.pending
                          if self._backoff.get(step.recipe_dir, (0.0, 0.0))[0] <= now), None)
            if found is None:
                return
            found, task = found
            self._idle.remove(found)
            self._warming.append(found)
            found.pending.remove(task)

        def warm() -> None:
            if self._warm(found, task):
                self._release(found)
            else:
                with self._lock:
                    self._warming.remove(found)
                    self._returned.notify_all()
                self._start_in_background(1)

        threading.Thread(target=warm, name="recipe-warm", daemon=True).start()

    def _warm(self, w: _Worker, task: Warmup) -> bool:
        """Run one recipe's warm-up in the worker, within `warmup_timeout`; whether the worker lives on. A warm-up
        that raised, hung or ended its process is counted against its recipe (a worker that hangs or dies is
        killed); one whose process was killed by a signal is tried again after a backoff; one that succeeds clears
        both."""
        folder = task.recipe_dir
        error, sound, signalled = None, True, False
        try:
            w.conn.send(task.wire())
            if not w.conn.poll(self.warmup_timeout):
                error, sound = f"warming it ran past {self.warmup_timeout:g} s", False
            else:
                reply = read_reply(w.conn.recv())
                if isinstance(reply, Failure):
                    error = f"warming it raised {without_paths(reply.error, (str(Path(folder).parent),))}"
        except (EOFError, OSError):
            w.process.join(timeout=5)
            error, sound = f"its process died while warming it (exit code {w.process.exitcode})", False
            signalled = w.process.exitcode is not None and w.process.exitcode < 0  # killed, not its own exit
        if error is None:
            with self._lock:
                self._failures.pop(folder, None)
                self._backoff.pop(folder, None)
            return True
        if self._closed:  # killed by the pool's own shutdown: nothing to count or to try again
            w.kill()
            return False
        if not signalled:
            self._failed(folder, error)
            if not sound:
                w.kill()
            return sound
        w.kill()
        with self._lock:
            self._last_error[folder] = error
            delay = min(self.BACKOFF_MOST, 2 * self._backoff.get(folder, (0.0, self.BACKOFF_FIRST / 2))[1])
            self._backoff[folder] = (time.monotonic() + delay, delay)
        log.warning("warming %s failed: %s; tried again in %g s", Path(folder).name, error, delay)
        retry = threading.Timer(delay, self._warm_when_idle)  # even where no run comes to prompt it
        retry.daemon = True
        retry.start()
        return False

    def _failed(self, folder: str, error: str) -> None:
        log.warning("warming %s failed: %s", Path(folder).name, error)
        with self._lock:
            self._last_error[folder] = error
            self._failures[folder] = self._failures.get(folder, 0) + 1
            if self._failures[folder] < self.FAILS_IN_A_ROW or folder in self.failing:
                return
            self.failing[folder] = f"{error} ({self.FAILS_IN_A_ROW} times in a row)"
            self._failures.pop(folder)
            reason = self.failing[folder]
        if self._on_failing is not None:
            self._on_failing(folder, reason)

    def suspend(self, folder: str, reason: str, until: float | None = None) -> None:
        """This recipe cannot start (another process found: warm it no more), or its runs hang (refuse them till the
        epoch time `until`)."""
        with self._lock:
            if until is not None:
                if until > self._hangs.get(folder, (0.0, ""))[0]:
                    self._hangs[folder] = (until, reason)
                return
            self.failing.setdefault(folder, reason)
            for w in (*self._idle, *self._warming):
                w.pending = [step for step in w.pending if step.recipe_dir != folder]

    def _why(self, folder: str) -> str:
        with self._lock:
            return self.failing.get(folder) or self._last_error.get(folder, "its warm-up failed")

    def warming(self) -> int:
        """Workers starting or taken out to warm, and warm-up steps the idle ones have still to run: 0 once the warming
        in idle time is done (for tests and diagnostics)."""
        with self._lock:
            return self._starting + len(self._warming) + sum(len(w.pending) for w in self._idle)

    def pids(self) -> list[int]:
        """Process ids of the idle workers, those warming in idle time included (for tests and diagnostics)."""
        with self._lock:
            return [w.pid for w in (*self._idle, *self._warming) if w.pid is not None]

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True  # a worker taken out to warm is killed when it returns
            for w in self._idle:
                w.kill()
            self._idle.clear()
