"""The machine's places to train: training takes a core for minutes, so it is bounded where the CPU is, not per
process. RETRAINING_JOBS places for the whole machine (every machine, with Redis), held in the shared state by the
job that trains in each (a retraining, a learner's variant); a job waits queued for one. A client has one training
started at a time, and its trainings hold places for at most TRAINING_SHARE_SECONDS in any TRAINING_SHARE_WINDOW
(a start past it is a 429 with Retry-After). A place that frees goes to the queued job whose client has trained
least in its window (the earliest queued among equals), so that a client who trains without end never makes
another wait behind its own queue. A place or a client's start held by a job that has ended (its record done,
gone, or its heartbeat stale) is taken over: a place is never held by a job that no longer runs.

    holder = retrainings.job_key(job_id)            # the job's record in the shared state
    release = admit_client(holder, "retraining")    # one at a time per client, RETRAINING_COST of its budget
    take(holder, cancelled)                         # queued until a place frees
"""

import contextlib
import math
import time
from collections.abc import Callable

from flask import current_app, request

from ..compute.errors import RecipeError
from ..compute.retraining import Cancelled
from . import budget
from .extensions import state
from .refusals import BudgetSpent
from .state import StateUnavailable

PLACE_WAIT = 1.0  # seconds between a queued job's looks for a free place (and for its cancel)
QUEUE = "training-queue"  # {holder: [its client's training seconds in the window when queued, when]}: who goes next
USED = "training-used:{client}"  # [[when it ended, seconds it held a place], ...]: a client's trainings in the window
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
        if _in_line(holder) and any(claim(key, holder, ttl) for key in places()):
            _leave_queue(holder)
            return
        if time.monotonic() - waited > limit:
            raise RecipeError(f"no place to train freed in {limit:g} s (this server trains "
                              f"{current_app.config['RETRAINING_JOBS']} at a time); start it again later")
        time.sleep(PLACE_WAIT)


def _in_line(holder: str) -> bool:
    """Whether the job is among the first RETRAINING_JOBS queued jobs still alive, by its client's training in the
    window, then by when it queued (a job the queue does not name looks for a place as it always did)."""
    waiting = state.store.get(QUEUE, strict=True) or {}
    if holder not in waiting:
        return True
    line = sorted((tuple(order), name) for name, order in waiting.items() if name == holder or not _gone(name))
    return holder in [name for _, name in line[:len(places())]]


def _queue(holder: str, used: float) -> None:
    with state.store.locked(f"{QUEUE}-lock"):
        waiting = {name: order for name, order in (state.store.get(QUEUE, strict=True) or {}).items()
                   if not _gone(name)}
        state.store.set(QUEUE, waiting | {holder: [used, time.time()]}, 2 * current_app.config["RETRAINING_TIMEOUT"])


def _leave_queue(holder: str) -> None:
    with state.store.locked(f"{QUEUE}-lock"):
        waiting = state.store.get(QUEUE, strict=True) or {}
        if waiting.pop(holder, None) is not None:
            state.store.set(QUEUE, waiting, 2 * current_app.config["RETRAINING_TIMEOUT"])


def _trained(client: str) -> tuple[float, float]:
    """The seconds the client's trainings held places in the last TRAINING_SHARE_WINDOW, and the seconds until
    enough of them leave the window for it to be under TRAINING_SHARE_SECONDS."""
    config = current_app.config
    now, window = time.time(), config["TRAINING_SHARE_WINDOW"]
    held = sorted((at, seconds) for at, seconds in state.store.items(USED.format(client=client)) if at > now - window)
    used = sum(seconds for _, seconds in held)
    over, wait = used - config["TRAINING_SHARE_SECONDS"], 0.0
    for at, seconds in held:
        if over < 0:
            break
        over -= seconds
        wait = at + window - now
    return used, wait if used >= config["TRAINING_SHARE_SECONDS"] else 0.0


def admit_client(holder: str, what: str) -> Callable[[], None]:
    """Admit a training for the request's client: one at a time (BudgetSpent, 429, while its last still runs), within
    its share of the places (BudgetSpent, 429, once its trainings held them TRAINING_SHARE_SECONDS in the window),
    each spending RETRAINING_COST of its budget; then queue it. Answers what gives back the client's start and the
    job's place, counting the seconds it held the place against the client."""
    config = current_app.config
    address = request.remote_addr or "unknown"
    client = f"training-client:{address}"
    if not claim(client, holder, 2 * config["RETRAINING_TIMEOUT"] + 60):
        raise BudgetSpent(f"a training you started (a retraining or a variant) has not ended: one at a time per "
                          f"client (wait for it, or cancel it); this {what} was not started", retry_after=10)
    try:
        used, wait = _trained(address)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            raise BudgetSpent(f"your trainings held this server's places to train for {used:.0f} s in the last "
                              f"{config['TRAINING_SHARE_WINDOW']:g} s, its share per client "
                              f"({config['TRAINING_SHARE_SECONDS']:g} s); this {what} may start in {seconds} s",
                              retry_after=seconds)
        budget.spend(config["RETRAINING_COST"])
        _queue(holder, used)
    except BaseException:
        state.store.delete(client)
        raise

    def release() -> None:  # the client's start and the machine's place the job trained in, each if it holds it
        record = state.store.get(holder) or {}
        state.store.delete_if(client, holder)
        trained = [key for key in places() if state.store.delete_if(key, holder)]
        with contextlib.suppress(StateUnavailable):  # a queue the store lost meanwhile forgets the job by itself
            _leave_queue(holder)
        if trained and record.get("started"):  # the seconds it held its place count against its client
            seconds = (record.get("finished") or time.time()) - record["started"]
            state.store.push(USED.format(client=address), [time.time(), seconds], 1000,
                             config["TRAINING_SHARE_WINDOW"])

    return release
