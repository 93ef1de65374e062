"""What the app holds per instance, on one object: `app.extensions["tensorviz"]`, one attribute per part.

Each part's `init_app` sets its attribute; code reads it through `parts()` within an app context, or
`parts(app)` outside one. A part that is not bound yet is None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flask import Flask, current_app

if TYPE_CHECKING:  # annotations only: the parts import this module to register themselves
    from ..build.variants import Loaded
    from ..compute.executor import Executor
    from ..domain.catalog import LiveCatalog
    from .jobs import LocalJobs
    from .state import Store

KEY = "tensorviz"


@dataclass
class Parts:
    """The app's parts: its catalog, recipe workers, shared store, local jobs and the web tier's caches."""

    catalog: LiveCatalog | None = None  # the models, reloaded when their files change
    pool: Executor | None = None  # where recipe runs go: the local recipe processes, or the Celery workers
    store: Store | None = None  # the state every process shares: jobs, cached answers, budgets
    jobs: LocalJobs | None = None  # the jobs this process runs (verifications, retrainings)
    assets: str = ""  # the static files' version, in their URLs
    pages: str = ""  # the version of what renders a page (templates and code), in shared page keys
    compressed: Any = None  # the web tier's compressed bodies (web.compression.CompressedBodies)
    suspensions_checked: float = float("-inf")  # when the recipes other processes suspended were last read
    variants: Loaded | None = None  # the learners' variants this process has loaded
    variants_dir: str = ""  # where this process unpacks the variants it serves


def parts(app: Flask | None = None) -> Parts:
    """The parts of `app`, else of the current app."""
    return (app or current_app).extensions.setdefault(KEY, Parts())
