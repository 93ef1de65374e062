"""Recipe runs sent to Celery workers (compute/tasks.py) instead of the recipe processes of this web process.

An Executor (executor.py), beside pool.py's WorkerPool in this tier, so that services/runs.py (admit, run, release) and
everything above it is the same whichever executor the app is configured with (EXECUTOR = "local" | "celery"). The
web process sends tasks by name over the broker and waits for their reply; it never imports torch.

    admit()   PoolBusy (429) when RECIPE_QUEUE tasks already wait in the queue (counted on the broker in one
              step with every web process's admissions); ComputeUnavailable (503) when it cannot be reached
    run(call) the reply, or the RecipeError that says why there is none: the recipe's own error or refusal,
              a time limit (504), the worker that ran it lost (503), no worker taking it from the queue in
              time (503), the broker or the results out of reach (503)
"""

import time
from collections.abc import Callable
from pathlib import Path

import redis
from celery import Celery
from celery.exceptions import TimeLimitExceeded, WorkerLostError
from celery.exceptions import TimeoutError as WaitedTooLong
from kombu.exceptions import OperationalError

from .errors import ComputeUnavailable, PoolBusy, RecipeCrashed, RecipeError, RecipeTimeout
from .messages import Failure, RecipeCall, Reply, Warmup, read_reply
from .pool import outcome
from .retraining import PROGRESS_SECONDS, Cancelled, RetrainCall, Retrained, read_retrained
from .tasks import GRACE, PROGRESS, RETRAIN, TASK, VARIANT, cancel_key, options
from .variant_folders import carried

QUEUE = "celery"  # Celery's default queue: a Redis list of the tasks no worker has taken yet
SENDING = "tensorviz:celery:sending"  # runs admitted and not yet in the queue, counted with it at admission
UNREACHABLE = (OperationalError, redis.RedisError, ConnectionError, OSError)
POLL_SECONDS = 1.0  # how often a waiting run looks at its task's state
LOST_MARGIN = 10.0  # seconds past a task's hard time limit before its silent worker counts as lost
# Celery's Redis result backend gives up reconnecting with a RuntimeError of its own: the compute tier is out of
# reach then too, never a bug of this request (an answer of 503, not 500).
BACKEND_GAVE_UP = "Retry limit exceeded"

# Admission in one step on the broker, so that runs admitted together by any number of web processes never pass
# the queue's capacity: the tasks waiting and those admitted but not yet sent, against RECIPE_QUEUE.
ADMIT = """
local waiting = redis.call('LLEN', KEYS[1]) + tonumber(redis.call('GET', KEYS[2]) or '0')
if waiting >= tonumber(ARGV[1]) then return waiting end
redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], 60000)
return -1"""


def _unreachable(exc: Exception) -> Exception:
    """The error to answer for a failure to reach the compute tier: a 503 to retry (the exception itself where it is
    a RuntimeError that says nothing of an outage)."""
    if isinstance(exc, RuntimeError) and BACKEND_GAVE_UP not in str(exc):
        return exc
    return ComputeUnavailable("the compute tier's queue or results cannot be reached; try again shortly")


def _poll(result, timeout: float, every: float = POLL_SECONDS) -> tuple[dict | None, str | None, object]:
    """A task's reply if it came within `every` seconds, else its state and the meta it wrote; the RecipeError that
    says why no reply will come (its time limit, `timeout`, passed; its worker lost; the results out of reach)."""
    try:
        return result.get(timeout=every, propagate=True), None, None
    except WaitedTooLong:
        pass
    except TimeLimitExceeded:
        raise RecipeTimeout(f"the recipe ran past its {timeout:g} s timeout and was stopped") from None
    except WorkerLostError as exc:
        raise RecipeCrashed(f"the compute worker running the recipe was lost ({exc})") from None
    except (*UNREACHABLE, RuntimeError) as exc:
        raise _unreachable(exc) from None
    try:
        return None, result.state, result.info
    except (*UNREACHABLE, RuntimeError) as exc:
        raise _unreachable(exc) from None


class CeleryExecutor:
    """Sends recipe runs to the compute tier's queue and waits for each reply."""

    def __init__(self, broker: str, backend: str | None, timeout: float, queue: int, memory_mb: int, recipes: Path,
                 on_hang: Callable[[str], None] | None = None) -> None:
        self.timeout = timeout
        self.recipes = recipes  # the catalog's recipe folders, named by name in a task; a variant's is carried
        self._on_hang = on_hang  # told of a run that ran past its time limit (its recipe is suspended for a while)
        self.capacity = queue
        self.celery = Celery("tensorviz-web")
        self.celery.conf.update(options(broker, backend, timeout, memory_mb))
        self.broker = redis.Redis.from_url(broker, socket_timeout=2, socket_connect_timeout=2)
        self._admit = self.broker.register_script(ADMIT)

    def admit(self) -> None:
        """A place in the queue, counted on the broker at once with every web process's; PoolBusy when
        RECIPE_QUEUE runs wait already, ComputeUnavailable when the queue cannot be reached. Nothing to release:
        a run is counted as waiting until a worker takes it from the queue."""
        try:
            waiting = int(self._admit(keys=[QUEUE, SENDING], args=[self.capacity]))
        except redis.RedisError:
            raise ComputeUnavailable("the compute queue cannot be reached; try again shortly") from None
        if waiting >= 0:
            raise PoolBusy(f"{waiting} recipe runs already wait for the compute workers")

    def release(self) -> None:
        pass

    def suspend(self, folder: str, reason: str, until: float | None = None) -> None:
        """Nothing here: the compute workers warm no recipe ahead, and a model suspended is refused before its runs
        reach the queue (the catalog lists it unavailable in every web process)."""

    def run(self, call: RecipeCall) -> Reply:
        """Send the call to the queue and wait for a worker's reply, saying truly what happened when none comes:
        no worker took it (the queue's wait), it ran past its time limit, or the worker that took it was lost."""
        try:
            result = self.celery.send_task(TASK, args=[self._task(call)])
        except (*UNREACHABLE, RuntimeError) as exc:
            raise _unreachable(exc) from None
        finally:
            self._sent()
        try:
            answered = outcome(read_reply(self._wait(result)), call)
        except RecipeTimeout:
            if self._on_hang is not None:
                self._on_hang(str(call.recipe_dir))
            raise
        finally:
            try:
                result.forget()
            except (*UNREACHABLE, RuntimeError):
                pass
        return answered

    def _task(self, call: RecipeCall | RetrainCall) -> dict:
        """The call as its task carries it: a catalog folder by its name, a learner's variant with its own files."""
        variant = carried(call.recipe_dir, self.recipes)
        return call.wire() | ({VARIANT: variant} if variant is not None else {})

    def _sent(self) -> None:
        """The admitted run is in the queue (or was refused): the queue's length counts it now."""
        try:
            self.broker.decr(SENDING)
        except redis.RedisError:
            pass  # the count expires on its own

    def _wait(self, result) -> dict:
        """The task's reply, polled every POLL_SECONDS with its state: waiting in the queue at most as long as the
        runs ahead of it may take, and running at most its hard time limit and a margin."""
        queued_for = self.timeout * self.capacity + GRACE
        waiting_since, started = time.monotonic(), None
        while True:
            reply, state, _ = _poll(result, self.timeout)
            if reply is not None:
                return reply
            now = time.monotonic()
            if state == "PENDING":  # in the queue: not yet taken, or given back when its worker's child died
                if started is not None:
                    waiting_since, started = now, None
                if now - waiting_since > queued_for:
                    raise ComputeUnavailable(f"the run waited {now - waiting_since:.0f} s in the queue and no compute "
                                             "worker took it; try again shortly")
            elif started is None:
                started = now
            elif now - started > self.timeout + GRACE + LOST_MARGIN:
                # Past its hard time limit without a word: the worker that took it died with it. Redis gives the
                # task back to the queue after the visibility timeout; this request does not wait for that.
                raise RecipeCrashed("the compute worker that took this run stopped answering; the run goes back to "
                                    "the queue for another worker")

    def retrain(self, call: RetrainCall, progressed: Callable[[dict], None],
                cancelled: Callable[[], bool]) -> Retrained:
        """A retraining on a compute worker (compute/tasks.py's RETRAIN), its progress read from the task's state
        as it trains; `cancelled()` asked meanwhile, and a stop sent through the broker when it says so. The reply,
        or RecipeTimeout, Cancelled, RecipeCrashed (its worker lost) or a RecipeError that says why not."""
        try:
            result = self.celery.send_task(RETRAIN, args=[self._task(call)], soft_time_limit=call.timeout + GRACE,
                                           time_limit=call.timeout + 2 * GRACE)
        except (*UNREACHABLE, RuntimeError) as exc:
            raise _unreachable(exc) from None
        asked, started = False, None
        deadline = time.monotonic() + call.timeout * (1 + self.capacity) + GRACE  # queued behind others, then run
        try:
            while True:
                reply, state, info = _poll(result, call.timeout, PROGRESS_SECONDS)
                if reply is not None:
                    break
                if state == PROGRESS and isinstance(info, dict):
                    progressed(info)
                if state != "PENDING" and started is None:
                    started = time.monotonic()
                if not asked and cancelled():
                    try:
                        self.broker.set(cancel_key(result.id), 1, ex=int(call.timeout + 60))
                        asked = True
                    except redis.RedisError:
                        pass  # asked again at the next poll
                now = time.monotonic()
                if started is None and now > deadline:
                    raise ComputeUnavailable("no compute worker took the retraining; try again shortly")
                if started is not None and now - started > call.timeout + 2 * GRACE + LOST_MARGIN:
                    raise RecipeCrashed("the compute worker retraining the recipe stopped answering")
        finally:
            try:
                result.forget()
            except (*UNREACHABLE, RuntimeError):
                pass
        retrained = read_retrained(reply)
        if isinstance(retrained, Failure):
            raise (Cancelled if retrained.cancelled else RecipeTimeout if retrained.timed_out else RecipeError)(
                retrained.words)
        return retrained

    def prestart(self, warmups: list[Warmup] | None = None) -> None:
        """Nothing to start here: the compute workers load torch when their children start."""

    def pids(self) -> list[int]:
        return []

    def shutdown(self) -> None:
        self.broker.close()
