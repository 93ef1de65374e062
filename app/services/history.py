"""Each model's verification history, kept in the shared state so that every process and machine adds to one:
the server's own verifications and retrainings, and the reports readers' verifiers post (kept apart as a
client's, in a list of their own, so that no number of posts pushes the server's out). Bounded: the last
HISTORY_LIMIT entries of each list, for HISTORY_SECONDS after its last one."""

import time

from flask import current_app
from pydantic import ValidationError

from ..domain.catalog import Model
from ..domain.history import environment_id, retraining_entry, summarized, verification_entry
from ..domain.labs.fields import FieldError
from ..domain.shapes import History, SharedEntry, validator
from .extensions import state
from .jobs import rfc3339

REPORTERS = ("server", "client")


def _key(model: Model, reported_by: str) -> str:
    return f"history:{model.slug}:{reported_by}"


def record(model: Model, entry: dict) -> dict:
    """Keep one entry (history.verification_entry's or retraining_entry's) in its reporter's list: the entry as
    kept, with its time."""
    config = current_app.config
    kept = entry | {"at": rfc3339(time.time())}
    state.store.push(_key(model, entry["reported_by"]), kept, config["HISTORY_LIMIT"],
                     config["HISTORY_SECONDS"])
    return kept


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
    return record(model, entry | {"reported_by": "client", "environment_id": environment_id(entry["environment"])})


def answer(model: Model) -> History:
    """The model's history: its environments, the drift between them on its current revision, its entries."""
    entries = sorted((e for by in REPORTERS for e in state.store.items(_key(model, by))), key=lambda e: e["at"])
    return {"model": model.slug, "limit": current_app.config["HISTORY_LIMIT"],
            **summarized(entries, model.revision)}
