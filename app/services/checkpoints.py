"""The checkpoint this app's configuration names for a recipe, found once per app context."""

from flask import current_app, g

from ..domain.checkpoints import Checkpoint, CheckpointSpec, CheckpointUnavailable
from ..domain.checkpoints import find as find_in


def find(spec: CheckpointSpec) -> Checkpoint:
    """The checkpoint with its files' hashes; CheckpointUnavailable (503) says what is missing and how to
    provide it. Looked up once per app context (a request, a verification job, a command), so that the
    cache key, the folder handed to the recipe and the report of one request name the same files."""
    found = g.setdefault("tensorviz_checkpoints", {})
    if spec not in found:
        found[spec] = find_in(spec, current_app.config.get(spec.setting), current_app.config["CHECKPOINTS_DIR"])
    return found[spec]


def status(spec: CheckpointSpec) -> dict:
    """What a page shows: whether a checkpoint was found, its name, where from, its files and their size in bytes, or
    what is wrong (`problem`) and how to provide one (`how`)."""
    try:
        found = find(spec)
    except CheckpointUnavailable as exc:
        return {"available": False, "problem": exc.problem, "how": exc.how}
    recognised = spec.recognised(found.sha256)
    return {"available": True, "name": found.name, "source": found.source, "files": found.sha256, "size": found.size,
            "recognised": recognised, "note": recognition(recognised)}


def recognition(recognised: str | None) -> str:
    """What the page and every answer say of a checkpoint's weights: what they are, or that they are not known."""
    if recognised:
        return f"Weights recognised by their sha256: {recognised}."
    return ("Weights not recognised (their sha256 is none this server knows): this may be an untrained model, and its "
            "predictions may mean nothing.")


def identity(spec: CheckpointSpec | None) -> dict:
    """What a live answer says of the checkpoint it ran on (nothing for a model without one)."""
    if spec is None:
        return {}
    try:
        recognised = spec.recognised(find(spec).sha256)
    except CheckpointUnavailable:
        return {}
    return {"checkpoint_recognised": recognised, "checkpoint_note": recognition(recognised)}


def context(spec: CheckpointSpec | None) -> dict:
    """The arguments the server adds to a recipe call: the checkpoint folder, where the recipe has one."""
    return {} if spec is None else {"checkpoint": str(find(spec).folder)}
