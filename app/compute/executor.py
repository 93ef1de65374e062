"""The one interface recipe runs are sent through, whichever executor the app is configured with: the local pool of
recipe processes (pool.py's WorkerPool) or the compute tier's Celery workers (celery_executor.py)."""

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from .messages import RecipeCall, Reply, Warmup
from .retraining import RetrainCall, Retrained


@runtime_checkable
class Executor(Protocol):
    """Where recipe runs go. A run is admitted first (PoolBusy, ComputeUnavailable) and its place released once
    (services/runs.py's Ticket); run and retrain answer the reply or raise the RecipeError that says why not."""

    def admit(self) -> None:
        """Claim a place for one run, running or queued."""

    def release(self) -> None:
        """Give back a place admit() claimed."""

    def run(self, call: RecipeCall) -> Reply:
        """Run the call (a replay, a lab entry, an intervention, a capture): the recipe process's reply."""

    def retrain(self, call: RetrainCall, progressed: Callable[[dict], None],
                cancelled: Callable[[], bool]) -> Retrained:
        """Train the recipe again (compute/retraining.py), telling `progressed` its curves as they grow and asking
        `cancelled` meanwhile: the trainer's reply."""

    def suspend(self, folder: str, reason: str, until: float | None = None) -> None:
        """This recipe cannot start (warm it no more), or its runs hang (refuse them till the epoch time `until`),
        where this executor holds its runs."""

    def prestart(self, warmups: list[Warmup] | None = None) -> None:
        """Start what runs recipes ahead of the first run, where this executor starts anything."""

    def pids(self) -> list[int]:
        """The recipe processes this executor holds in this process (none for a remote one)."""

    def shutdown(self) -> None:
        """Stop what this executor started."""


def run_admitted(executor: Executor, call: RecipeCall) -> Reply:
    """One run that waits for its answer in this thread (the recorder's): admitted, run, its place released, as a
    request's run is (services/runs.py)."""
    executor.admit()
    try:
        return executor.run(call)
    finally:
        executor.release()
