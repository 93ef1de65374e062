"""The one way the web app starts a recipe run.

    ticket = admit()          # a place in the pool for one run; PoolBusy (429) when there is none
    try:
        reply = run(call)     # the worker's reply; a RecipeError says why there is none
    finally:
        ticket.release()      # once, from whichever thread finished the run

`submit(call, key)` is all of it for a request that waits for its answer: the cached answer under `key`
(`run_key` names everything it depends on), else admission, the run, the answer checked to be JSON
(`answerable`) and kept. A refused request or a failed run raises its own type of error (never an HTTP
exception): the web tier's one table (web/errors.py) answers each with its status. Every
recipe run of a request (lab endpoints, verifications, and next, interventions) goes through here; the
recorder's CLI runs its own pool directly.
"""

import threading
from functools import cache as once
from importlib import metadata

from flask import current_app

from ..compute.errors import (
    RecipeError,
    RecipeRefused,
)
from ..compute.executor import Executor
from ..compute.messages import RecipeCall, Reply, read_reply
from ..compute.pool import REPLY_FORMAT
from . import budget, checkpoints
from .cache import cache
from .extensions import workers


@once
def torch_version() -> str:
    """The workers' torch, read from package metadata so that the web process never imports it.
    Read once per process: parsing the metadata costs more than serving a cached report."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "not installed"


def run_key(model) -> str:
    """Everything a recipe run's answer depends on, as content hashes: the recording's bytes (its sha256,
    not its declared revision), every recipe file, the checkpoint's files where it reads one, torch, the
    seed, the kernel family and the shape of a reply. Part of every cached answer's key; CheckpointUnavailable (503)
    when its checkpoint is missing."""
    seed, kernels = current_app.config["RECIPE_SEED"], current_app.config["RECIPE_KERNELS"]
    key = (f"{model.slug}:{model.etag}:{model.recipe_sha256}:torch-{torch_version()}:seed-{seed}:kernels-{kernels}"
           f":reply-{REPLY_FORMAT}")
    return key if model.checkpoint is None else f"{key}:checkpoint-{checkpoints.find(model.checkpoint).digest}"


class Ticket:
    """A place in the pool for one run, released exactly once whichever thread ends the run."""

    def __init__(self, pool: Executor) -> None:
        self._pool = pool
        self._taken = True
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            taken, self._taken = self._taken, False
        if taken:
            self._pool.release()


def admit() -> Ticket:
    """Claim a place for one run, running or queued; PoolBusy (429) when the pool and its queue are full."""
    pool = workers.pool
    pool.admit()
    return Ticket(pool)


def run(call: RecipeCall) -> Reply:
    """Run the call in a worker (its place admitted already): the reply, or a RecipeError saying why not."""
    return workers.pool.run(call)


def answerable(call: RecipeCall, reply: Reply, blame: RecipeRefused | None = None) -> Reply:
    """The reply, when its result can be answered as JSON: NaN and infinity cannot (a replay's are compared
    instead, so verification does not ask this). The recipe process said which when it encoded it. `blame`, where
    the request made them (an intervention that blew the values up), is raised instead of the server's 503."""
    if not reply.finite:
        raise blame or RecipeError(f"the recipe's {call.entry}() answered NaN or infinity, which JSON cannot carry")
    return reply


def submit(call: RecipeCall, key: str, blame: RecipeRefused | None = None) -> tuple[Reply, bool]:
    """The reply to the call and whether it came from the cache (kept under `key`, which names everything
    the answer depends on, for CACHE_SECONDS); a failed run raises its RecipeError (web/errors.py answers it), a
    result that is not finite `blame` where given (see answerable)."""
    found = cache.get(key)
    if found is not None:
        return read_reply(found), True
    budget.spend()  # only a run that starts counts: not a refused request, nor a kept answer
    ticket = admit()
    try:
        reply = answerable(call, run(call), blame)
    finally:
        ticket.release()
    cache.set(key, reply.wire(), timeout=current_app.config["CACHE_SECONDS"])
    return reply, False
