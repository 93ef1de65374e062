"""The tiers of app/ hold their direction, with no import cycles ([tool.importlinter] in pyproject.toml, checked by
import-linter's `lint-imports`, also run by `make lint`), and the README's map of them is whole."""

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from app.services.config import PROJECT_ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the app/ under root, with root's pyproject.toml (root first on the path, before the
    installed project)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([LINT_IMPORTS, "--no-logo", "--no-cache"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)


def copy_of_the_project(tmp_path: Path) -> Path:
    shutil.copytree(PROJECT_ROOT / "app", tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_every_contract_is_kept():
    found = lint_imports(PROJECT_ROOT)
    assert found.returncode == 0, found.stdout
    assert "Contracts: 3 kept, 0 broken." in found.stdout


def test_an_upward_import_a_web_import_below_the_services_and_a_cycle_are_each_named(tmp_path):
    root = copy_of_the_project(tmp_path)
    append(root / "app/domain/catalog.py", "\nfrom ..web.api import bp  # a domain module reaching into the web\n")
    append(root / "app/domain/labs/masked_lm/__init__.py", "\nfrom ....services.runs import submit\n")
    append(root / "app/domain/labs/fields.py", "\nfrom werkzeug.exceptions import BadRequest\n")
    append(root / "app/compute/worker.py", "\nfrom flask import current_app\nfrom app.build.cli import register\n")
    append(root / "app/compute/process.py", "\nfrom . import worker  # the worker imports process: a loop\n")
    found = lint_imports(root)
    assert found.returncode == 1
    report = found.stdout
    assert "Contracts: 0 kept, 3 broken." in report
    for line in ("- app.domain.catalog -> app.web.api", "- app.domain.labs.masked_lm -> app.services.runs",
                 "- app.compute.worker -> app.build.cli", "-   app.domain.labs.fields -> werkzeug",
                 "-   app.compute.worker -> flask", "No cycles are allowed in app.compute.", "- .process -> .worker"):
        assert line in report, line


def test_imports_for_annotations_alone_are_not_held_against_a_tier(tmp_path):
    root = copy_of_the_project(tmp_path)
    annotation = "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..web.api import bp\n"
    append(root / "app/domain/catalog.py", annotation)
    found = lint_imports(root)
    assert found.returncode == 0, found.stdout


def test_every_module_of_app_lies_in_a_tier():
    """A module outside the tiers would be held by no contract."""
    layers = next(c["layers"] for c in tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"][
        "importlinter"]["contracts"] if c["id"] == "tiers")
    assert layers == [f"app.{tier}" for tier in TIERS]
    app = PROJECT_ROOT / "app"
    outside = [p for p in app.rglob("*.py") if p.parent == app and p.name != "__init__.py"
               or p.parent != app and p.relative_to(app).parts[0] not in TIERS]
    assert outside == []
    assert all((app / tier / "__init__.py").is_file() for tier in TIERS)  # import-linter finds packages alone


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
