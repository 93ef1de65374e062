"""Recipe runs sent to Celery workers (compute/tasks.py) instead of the recipe processes of this web process.

The same interface as compute/pool.py's WorkerPool, so that runs.py (admit, run, release) and everything
above it is the same whichever executor the app is configured with (EXECUTOR = "local" | "celery"). The
web process sends tasks by name over the broker and waits for their reply; it never imports torch.

    admit()   PoolBusy (429) when RECIPE_QUEUE tasks already wait in the queue; ComputeUnavailable (503)
              when the broker cannot be reached
    run(call) the reply, or the RecipeError that says why there is none: the recipe's own error or refusal,
              a time limit (504), a worker lost twice (503), the broker down (503)
"""

import redis
from celery import Celery
from celery.exceptions import TimeLimitExceeded, WorkerLostError
from celery.exceptions import TimeoutError as WaitedTooLong
from kombu.exceptions import OperationalError

from ..compute.pool import ComputeUnavailable, PoolBusy, RecipeCall, RecipeCrashed, RecipeTimeout, outcome
from ..compute.tasks import GRACE, TASK, options

QUEUE = "celery"  # Celery's default queue: a Redis list of the tasks no worker has taken yet
UNREACHABLE = (OperationalError, redis.RedisError, ConnectionError, OSError)


class CeleryExecutor:
    """Sends recipe runs to the compute tier's queue and waits for each reply."""

    def __init__(self, broker: str, backend: str | None, timeout: float, queue: int, memory_mb: int) -> None:
        self.timeout = timeout
        self.capacity = queue
        self.celery = Celery("tensorviz-web")
        self.celery.conf.update(options(broker, backend, timeout, memory_mb))
        self.broker = redis.Redis.from_url(broker, socket_timeout=2, socket_connect_timeout=2)

    def admit(self) -> None:
        """A place in the queue; PoolBusy when RECIPE_QUEUE tasks wait already, ComputeUnavailable when the
        queue cannot be reached. Nothing to release: the queue's length is the count."""
        try:
            waiting = self.broker.llen(QUEUE)
        except redis.RedisError:
            raise ComputeUnavailable("the compute queue cannot be reached; try again shortly") from None
        if waiting >= self.capacity:
            raise PoolBusy(f"{waiting} recipe runs already wait for the compute workers")

    def release(self) -> None:
        pass

    def run(self, call: RecipeCall) -> dict:
        """Send the call to the queue and wait for a worker's reply (at most the time every queued run and
        this one may take)."""
        try:
            result = self.celery.send_task(TASK, args=[call.task()])
        except UNREACHABLE:
            raise ComputeUnavailable("the compute queue cannot be reached; try again shortly") from None
        try:
            reply = result.get(timeout=self.timeout * (self.capacity + 1) + GRACE, propagate=True)
        except (TimeLimitExceeded, WaitedTooLong):
            raise RecipeTimeout(f"the recipe ran past its {self.timeout:g} s timeout and was stopped") from None
        except WorkerLostError as exc:
            raise RecipeCrashed(f"the compute worker running the recipe was lost ({exc})") from None
        except UNREACHABLE:
            raise ComputeUnavailable("the compute tier's results cannot be reached; try again shortly") from None
        finally:
            try:
                result.forget()
            except UNREACHABLE:
                pass
        return outcome(reply, call)

    def prestart(self, warmups: list[dict] | None = None) -> None:
        """Nothing to start here: the compute workers load torch when their children start."""

    def pids(self) -> list[int]:
        return []

    def shutdown(self) -> None:
        self.broker.close()
