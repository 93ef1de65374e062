"""The compute tier's entry point: Celery workers that run the recipes (compute/tasks.py).

    TENSORVIZ_REDIS_URL=redis://host:6379/0 celery -A compute_worker worker --concurrency 2 --loglevel info

Settings are the web tier's (app/services/config.py), overridden by the same TENSORVIZ_* variables, so both
tiers agree on the broker, the recipes and the limits.
"""

import os

from flask import Config as Settings

from app.compute.tasks import make_celery
from app.services.config import PROJECT_ROOT, Config
from app.services.config import settings as checked


def settings() -> dict:
    """The settings as the web tier reads them (Config, then the TENSORVIZ_* variables), each checked against its
    declared type and range and of that type (services/config.settings), as the factory does: one rule for both."""
    found = Settings(str(PROJECT_ROOT))
    found.from_object(Config)
    found.from_prefixed_env("TENSORVIZ")
    found["REDIS_URL"] = found["REDIS_URL"] or os.environ.get("REDIS_URL")  # as the web tier reads it
    return checked(found)


celery = make_celery(settings())
