"""The machine's places to train: training takes a core for minutes, so it is bounded where the CPU is, not per
process. RETRAINING_JOBS places for the whole machine (every machine, with Redis), held in the shared state by the
job that trains in each (a retraining, a learner's variant); a job waits queued for one. A client has one training
started at a time. A place or a client's start held by a job that has ended (its record done, gone, or its heartbeat
stale) is taken over: a place is never held by a job that no longer runs.

    holder = retrainings.job_key(job_id)            # the job's record in the shared state
    release = admit_client(holder, "retraining")    # one at a time per client, RETRAINING_COST of its budget
    take(holder, cancelled)                         # queued until a place frees
"""

import time
from collections.abc import Callable

from flask import current_app, request

from ..compute.errors import RecipeError
from ..compute.retraining import Cancelled
from . import budget
from .extensions import state
from .refusals import BudgetSpent

PLACE_WAIT = 1.0  # seconds between a queued job's looks for a free place (and for its cancel)
# Threads per process and kind of training job: a queued job waits in one, where it hears its cancel within a second
# (past these, a job waits for a thread first).
WAITING_THREADS = 16


def _gone(holder: str) -> bool:
    """Whether the job whose record is kept under `holder` has ended, its process included."""
    record = state.store.get(holder, strict=True)
    if record is None or record.get("state") == "done":
        return True
    return time.time() - record.get("heartbeat", 0) > current_app.config["JOB_STALE_SECONDS"]


def claim(key: str, holder: str, ttl: float) -> bool:
    """Take `key` for the job: free, or held by a job that ended without giving it back."""
    if state.store.add(key, holder, ttl, strict=True):
        return True
    found = state.store.get(key, strict=True)
    if found is not None and found != holder and _gone(found):
        # Taken over only from the holder found: two waiters that both found it gone never both take it.
        state.store.delete_if(key, found)
        return state.store.add(key, holder, ttl, strict=True)
    return found == holder


def places() -> list[str]:
    """The keys of the machine's RETRAINING_JOBS places, each holding the job that trains in it."""
    return [f"retraining-place:{n}" for n in range(current_app.config["RETRAINING_JOBS"])]


def take(holder: str, cancelled: Callable[[], bool], limit: float) -> None:
    """Wait, queued, for one of the machine's places and take it; Cancelled when the job is cancelled meanwhile,
    RecipeError when none frees within `limit` seconds. release() gives it back."""
    ttl = limit + 60  # the training is stopped at its limit; a place outlives it by little
    waited = time.monotonic()
    while True:
        if cancelled():
            raise Cancelled("cancelled while it waited for a place to train")
        if any(claim(key, holder, ttl) for key in places()):
            return
        if time.monotonic() - waited > limit:
            raise RecipeError(f"no place to train freed in {limit:g} s (this server trains "
                              f"{current_app.config['RETRAINING_JOBS']} at a time); start it again later")
        time.sleep(PLACE_WAIT)


def admit_client(holder: str, what: str) -> Callable[[], None]:
    """Admit a training for the request's client: one at a time (BudgetSpent, 429, while its last still runs), each
    spending RETRAINING_COST of its budget. Answers what gives back the client's start and the job's place."""
    config = current_app.config
    client = f"training-client:{request.remote_addr}"
    if not claim(client, holder, 2 * config["RETRAINING_TIMEOUT"] + 60):
        raise BudgetSpent(f"a training you started (a retraining or a variant) has not ended: one at a time per "
                          f"client (wait for it, or cancel it); this {what} was not started", retry_after=10)
    try:
        budget.spend(config["RETRAINING_COST"])
    except BaseException:
        state.store.delete(client)
        raise

    def release() -> None:  # the client's start and the machine's place the job trained in, each if it holds it
        for held in (client, *places()):
            state.store.delete_if(held, holder)

    return release
