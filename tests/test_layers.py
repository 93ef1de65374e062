"""The tiers of app/ hold their direction (scripts/check-layers, also run by `make lint`)."""

import re
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


TIERS = ("web", "build", "services", "compute", "domain")


def tier_map() -> str:
    """The README's map of app/ by tier: the code block after "`app/` by tier"."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    after = readme[readme.index("`app/` by tier"):]
    return after[after.index("```") + 3:after.index("```", after.index("```") + 3)]


def test_the_readme_tier_map_names_every_module_and_lab_kind_and_nothing_else():
    """The map is read to find a module: each module of each tier (the lab kinds' shared ones too) is on it, under
    its tier, and each lab kind's folder; a name on it that the code lacks is a map gone stale."""
    block = tier_map()
    starts = [block.index(f"app/{tier}/") for tier in TIERS]
    ends = [*starts[1:], len(block)]
    sections = {tier: block[start:end] for tier, start, end in zip(TIERS, starts, ends, strict=True)}
    named = {tier: set(re.findall(r"\b\w+\.py\b", text)) for tier, text in sections.items()}
    labs = PROJECT_ROOT / "app" / "domain" / "labs"
    for tier in TIERS:
        modules = {p.name for p in (PROJECT_ROOT / "app" / tier).glob("*.py") if p.name != "__init__.py"}
        if tier == "domain":  # and the modules every lab kind shares
            modules |= {p.name for p in labs.glob("*.py") if p.name != "__init__.py"}
        assert modules <= named[tier], (tier, modules - named[tier])
    kinds = {p.name for p in labs.iterdir() if (p / "__init__.py").is_file()}
    folders = set(re.findall(r"\b(\w+)/", sections["domain"]))
    assert kinds <= folders, kinds - folders
    existing = {p.name for p in (PROJECT_ROOT / "app").rglob("*.py")} | {"train.py"}  # the recipe file it runs
    assert set().union(*named.values()) <= existing, set().union(*named.values()) - existing
