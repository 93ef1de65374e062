"""Configuration classes; the environment (TENSORVIZ_*) overrides them in create_app."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Config:
    """Defaults for the embedded server: everything in-process, no external service."""

    MANIFESTS_DIR = str(PROJECT_ROOT / "manifests")
    RECIPES_DIR = str(PROJECT_ROOT / "recipes")
    CATALOG_RELOAD_SECONDS = 2.0  # how often to look for changed model files; 0 loads them once

    DEBUG = False
    SECRET_KEY = None  # from TENSORVIZ_SECRET_KEY; nothing here signs sessions, so a random one is fine
    PROXY_FIX = 0  # number of trusted reverse proxies (X-Forwarded-*); 0 trusts none

    # Requests carry no uploads: small JSON bodies at most.
    MAX_CONTENT_LENGTH = 64 * 1024

    COMPRESS_MIMETYPES = ["text/html", "text/css", "text/csv", "text/plain", "text/x-python",
                          "application/json", "text/javascript", "image/svg+xml"]
    COMPRESS_ALGORITHM = ["br", "gzip"]

    CACHE_TYPE = "SimpleCache"
    CACHE_DEFAULT_TIMEOUT = 24 * 3600
    # With a Redis URL (TENSORVIZ_REDIS_URL, or REDIS_URL), reports, live runs, verification jobs and rate
    # limits are shared by every process and machine that uses the same Redis.
    REDIS_URL = None

    # Recipe execution: separate processes, each replaced when it crashes or passes its timeout.
    RECIPE_WORKERS = 1  # recipes running at once
    RECIPE_QUEUE = 2  # runs that may wait for a worker; beyond that, POSTs answer 429 at once
    RECIPE_TIMEOUT = 120.0  # seconds before a run is killed
    RECIPE_TORCH_THREADS = 1
    RECIPE_MEMORY_MB = 1024  # address space a worker may add after loading torch; 0 for no cap
    RECIPE_SEED = 0  # torch.manual_seed in the worker before every run
    # Per-client limit on every POST (what-if runs, corruptions, verifications).
    RATELIMIT_POSTS = "120 per minute"
    RATELIMIT_STORAGE_URI = "memory://"
    RATELIMIT_IN_MEMORY_FALLBACK_ENABLED = True  # if the shared store goes down, limit per process
    RATELIMIT_SWALLOW_ERRORS = True

    # How long POST /verifications waits for a fresh run before answering 202 with a Location.
    VERIFY_WAIT = 0.5


class TestConfig(Config):
    """Used by the test suite."""

    TESTING = True
    RECIPE_TIMEOUT = 60.0
    RATELIMIT_POSTS = "100000 per minute"
    VERIFY_WAIT = 0.0
