"""The tiers of app/ hold their direction (scripts/check-layers, also run by `make lint`)."""

import runpy
import shutil
from types import SimpleNamespace

from app.config import PROJECT_ROOT

layers = SimpleNamespace(**runpy.run_path(str(PROJECT_ROOT / "scripts" / "check-layers")))  # a script, no .py


def test_no_module_imports_from_a_tier_above_its_own():
    assert layers.violations(PROJECT_ROOT / "app") == []


def test_an_upward_import_or_an_untiered_module_is_named(tmp_path):
    app = tmp_path / "app"
    shutil.copytree(PROJECT_ROOT / "app", app, ignore=shutil.ignore_patterns("__pycache__"))
    catalog = app / "catalog.py"
    catalog.write_text(catalog.read_text() + "\nfrom .api import bp  # a domain module reaching into the web\n")
    (app / "newcomer.py").write_text("X = 1\n")
    worker = app / "worker.py"
    worker.write_text(worker.read_text() + "\nfrom flask import current_app\n")
    found = layers.violations(app)
    assert f"{worker}: the compute tier imports flask, which it may not" in found
    assert f"{catalog}: the domain tier imports api from the web tier above it" in found
    assert f"{app / 'newcomer.py'}: in no tier; add it to scripts/check-layers" in found
