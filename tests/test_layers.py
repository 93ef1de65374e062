"""The tiers of app/ hold their direction (scripts/check-layers, also run by `make lint`)."""

import runpy
import shutil
from types import SimpleNamespace

from app.services.config import PROJECT_ROOT

layers = SimpleNamespace(**runpy.run_path(str(PROJECT_ROOT / "scripts" / "check-layers")))  # a script, no .py


def test_no_module_imports_from_a_tier_above_its_own():
    assert layers.violations(PROJECT_ROOT / "app") == []


def test_an_upward_import_a_web_import_below_the_services_or_a_module_outside_the_tiers_is_named(tmp_path):
    app = tmp_path / "app"
    shutil.copytree(PROJECT_ROOT / "app", app, ignore=shutil.ignore_patterns("__pycache__"))
    catalog = app / "domain" / "catalog.py"
    catalog.write_text(catalog.read_text() + "\nfrom ..web.api import bp  # a domain module reaching into the web\n")
    kind = app / "domain" / "labs" / "masked_lm" / "__init__.py"
    kind.write_text(kind.read_text() + "\nfrom ....services.runs import submit\n")
    fields = app / "domain" / "labs" / "fields.py"
    fields.write_text(fields.read_text() + "\nfrom werkzeug.exceptions import BadRequest\n")
    (app / "newcomer.py").write_text("X = 1\n")
    worker = app / "compute" / "worker.py"
    worker.write_text(worker.read_text() + "\nfrom flask import current_app\nfrom app.build.cli import register\n")
    found = layers.violations(app)
    assert f"{worker}: the compute tier imports flask, which it may not" in found
    assert f"{worker}: the compute tier imports from the build tier above it" in found
    assert f"{fields}: the domain tier imports werkzeug, which it may not" in found
    assert f"{catalog}: the domain tier imports from the web tier above it" in found
    assert f"{kind}: the domain tier imports from the services tier above it" in found
    assert any(line.startswith(f"{app / 'newcomer.py'}: in no tier") for line in found)
    assert len(found) == 6


def test_imports_for_annotations_alone_are_not_held_against_a_tier(tmp_path):
    module = tmp_path / "app" / "domain" / "typed.py"
    module.parent.mkdir(parents=True)
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..web.api import bp\n")
    assert layers.violations(tmp_path / "app") == []
