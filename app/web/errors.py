"""Errors: JSON with a message under /api, a friendly page everywhere else; never a bare 500."""

from flask import Flask, jsonify, render_template, request
from werkzeug.exceptions import HTTPException, InternalServerError, default_exceptions

from ..compute.errors import (
    ComputeUnavailable,
    PoolBusy,
    RecipeCrashed,
    RecipeError,
    RecipeRefused,
    RecipeSuspended,
    RecipeTimeout,
    RecipeUnavailable,
)
from ..domain.checkpoints import CheckpointUnavailable
from ..domain.labs.fields import FieldError
from ..domain.shapes import Error
from ..services.refusals import BudgetSpent, ModelMissing, ModelUnavailable, NoLiveLab, NotYours, RequirementMissing
from ..services.state import StateUnavailable

# The one table from what the services and the compute tier refuse or fail with (their own types, never HTTP) to
# the status it answers, the first that matches. A failed run is the server's (503: the recipe, its process or the
# compute tier; 504: its time ran out), never the client's: a request the recipe refuses is a 400 (RecipeRefused).
STATUS = ((FieldError, 400), (RecipeRefused, 400), (ModelMissing, 404), (NoLiveLab, 404), (BudgetSpent, 429),
          (NotYours, 403), (ModelUnavailable, 503), (RecipeSuspended, 503), (CheckpointUnavailable, 503),
          (RequirementMissing, 503), (RecipeUnavailable, 503), (PoolBusy, 429), (RecipeTimeout, 504),
          (RecipeCrashed, 503), (ComputeUnavailable, 503), (StateUnavailable, 503), (RecipeError, 503))
# Nothing was answered, and a moment later may be: the answer says when to ask again.
RETRY = (PoolBusy, RecipeCrashed, ComputeUnavailable, StateUnavailable)
REFUSALS = tuple(error for error, _ in STATUS)  # what handle_refusal answers

BUSY_RETRY_AFTER = 5  # seconds: about the time a queue of warm recipe runs takes to drain


def _wants_json() -> bool:
    return request.path == "/api" or request.path.startswith("/api/")


def error_body(status: int, name: str, message: str) -> Error:
    """The API's error shape, wherever an error is answered (here, and nginx's own refusals: proxy.py)."""
    return {"error": {"status": status, "name": name, "message": message}}


def handle_http_error(error: HTTPException):
    """Render an HTTP error for the client that asked."""
    status = error.code or 500
    message = error.description or error.name
    if _wants_json():
        response = jsonify(error_body(status, error.name, message))
    else:
        response = render_template("error.html", status=status, name=error.name, message=message)
    headers = error.get_response().headers
    extra = {k: v for k, v in headers.items() if k.lower() in ("allow", "retry-after")}
    return response, status, extra


def status_of(error: Exception) -> int:
    """The HTTP status of a request refused with `error`, or of a run that failed with it."""
    return next(status for kind, status in STATUS if isinstance(error, kind))


def handle_refusal(error: Exception):
    """A request refused, or a recipe run that failed: the status from STATUS, with the reason;
    Retry-After too where a moment later may succeed (the workers and their queue full, 429; a worker that
    crashed or a compute queue that cannot be reached, 503; a spent budget, when it frees)."""
    status = status_of(error)
    if isinstance(error, RETRY):
        return handle_http_error(default_exceptions[status](f"{error}; retry in {BUSY_RETRY_AFTER} s",
                                                            retry_after=BUSY_RETRY_AFTER))
    if getattr(error, "retry_after", None):  # a refusal that says itself when to ask again (a spent budget)
        return handle_http_error(default_exceptions[status](str(error), retry_after=error.retry_after))
    return handle_http_error(default_exceptions[status](str(error)))


def handle_unexpected(error: Exception):
    """Log the bug and answer like any other error."""
    from flask import current_app

    current_app.logger.exception("unhandled error on %s", request.path)
    return handle_http_error(InternalServerError("An unexpected error occurred; it has been logged."))


def register(app: Flask) -> None:
    app.register_error_handler(HTTPException, handle_http_error)
    for refusal in REFUSALS:
        app.register_error_handler(refusal, handle_refusal)
    app.register_error_handler(Exception, handle_unexpected)
