"""Configuration classes; the environment (TENSORVIZ_*) overrides them in create_app."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Config:
    """Defaults for the embedded server: everything in-process, no external service."""

    MANIFESTS_DIR = str(PROJECT_ROOT / "manifests")
    RECIPES_DIR = str(PROJECT_ROOT / "recipes")

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

    # Recipe execution: separate processes, each replaced when it crashes or passes its timeout.
    RECIPE_WORKERS = 1  # recipes running at once
    RECIPE_TIMEOUT = 120.0  # seconds before a run is killed
    RECIPE_TORCH_THREADS = 1
    RECIPE_SEED = 0  # torch.manual_seed in the worker before every run
    # How long POST /verifications waits for a fresh run before answering 202 with a Location.
    VERIFY_WAIT = 0.5


class TestConfig(Config):
    """Used by the test suite."""

    TESTING = True
    RECIPE_TIMEOUT = 60.0
    VERIFY_WAIT = 0.0
