"""Each model's verification history, kept in the shared state so that every process and machine adds to one:
the server's own verifications and retrainings, and the reports readers' verifiers post (kept apart as a
client's, each client's in a list of its own, so that no number of posts pushes the server's or another reader's
out). Bounded: the server's last HISTORY_LIMIT entries, each client's last CLIENT_ENTRIES, and HISTORY_LIMIT
clients, for HISTORY_SECONDS after the last push. The clients are kept first come: once HISTORY_LIMIT are listed,
a new one takes the place of the one listed last, never an earlier one's, so that no number of addresses posting
at once displaces the reports readers had shared before them."""

import hashlib
import time

from flask import current_app, request
from pydantic import ValidationError

from ..domain.catalog import Model
from ..domain.history import environment_id, retraining_entry, summarized, verification_entry
from ..domain.labs.fields import FieldError
from ..domain.shapes import History, SharedEntry, validator
from .extensions import state
from .jobs import rfc3339

CLIENT_ENTRIES = 3  # a reader's latest entries kept per model: one client's flood folds into these


def _key(model: Model, reported_by: str) -> str:
    return f"history:{model.slug}:{reported_by}"


def _client_key(model: Model, client: str) -> str:
    """Each client's own list: a client posting without end pushes out only its own entries."""
    return f"history:{model.slug}:client:{hashlib.sha256(client.encode()).hexdigest()[:16]}"


def record(model: Model, entry: dict, client: str | None = None) -> dict:
    """Keep one entry (history.verification_entry's or retraining_entry's) in its reporter's list (a reader's in the
    list of its `client`, named in the list of the model's clients): the entry as kept, with its time."""
    config = current_app.config
    stored = entry | {"at": rfc3339(time.time())}
    if client is None:
        state.store.push(_key(model, entry["reported_by"]), stored, config["HISTORY_LIMIT"], config["HISTORY_SECONDS"])
        return stored
    key = _client_key(model, client)
    state.store.push(key, stored, CLIENT_ENTRIES, config["HISTORY_SECONDS"])
    with state.store.locked(_key(model, "readers-lock")):
        listed = [name for name in state.store.get(_key(model, "readers")) or [] if state.store.items(name)]
        if key not in listed:
            listed[config["HISTORY_LIMIT"] - 1:] = [key]  # full: the last listed gives up its place, no earlier one
        state.store.set(_key(model, "readers"), listed, config["HISTORY_SECONDS"])
    return stored


def verified(model: Model, report: dict) -> None:
    """The server's verification report, kept where it compared (an error compared nothing)."""
    if report["status"] in ("passed", "failed"):
        record(model, verification_entry(report, "server"))


def retrained(model: Model, report: dict) -> None:
    """The server's retraining report, kept where it compared."""
    if report["status"] in ("passed", "failed"):
        record(model, retraining_entry(report, model.revision, "server"))


def shared(model: Model, body) -> dict:
    """A report a reader's verifier posts, checked (FieldError names what is wrong) and kept as a client's."""
    try:
        entry = validator(SharedEntry).validate_python(body)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "body"
        raise FieldError(f"{where}: {problem['msg']}") from None
    if entry["values_failed"] > entry["values"]:
        raise FieldError("values_failed: more than values")
    return record(model, entry | {"reported_by": "client", "environment_id": environment_id(entry["environment"])},
                  request.remote_addr or "unknown")


def answer(model: Model) -> History:
    """The model's history: its environments, the drift between the server's on its current revision, its entries
    (each client's latest CLIENT_ENTRIES)."""
    listed = state.store.get(_key(model, "readers")) or []  # each client's list, in the order they came
    readers = [e for key in listed if isinstance(key, str) for e in state.store.items(key)]
    entries = sorted([*state.store.items(_key(model, "server")), *readers], key=lambda e: e["at"])
    return {"model": model.slug, "limit": current_app.config["HISTORY_LIMIT"],
            **summarized(entries, model.revision)}
