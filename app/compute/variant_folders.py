"""A learner's variant carried to a compute worker, and laid out there.

A variant's recipe folder (build/variants.py) is its model's recipe folder with the files its training wrote laid
over them (its weights, knobs.json), at `<slug>/<variant id>/recipe`. A compute worker holds the catalog's recipe
folders, not the variants learners train: a task for a variant names its model's folder and carries the variant's
own files, never code. The worker copies its own folder of that recipe, lays the files over it (once for each
content) and runs the copy, so that the code that runs is always the worker's own.

    carried(recipe_dir, recipes)         the web tier: {"of": "mlp", "files": {name: base64}}, or None
    laid_out(carried, recipes, root)     a compute worker: the folder to run, made once
"""

import base64
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from .errors import RecipeError

CODE = ".py"  # a variant's own files are data; its code is its recipe's
IGNORED = shutil.ignore_patterns("__pycache__")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def carried(recipe_dir: Path, recipes: Path) -> dict | None:
    """What a task carries of a variant's folder: its model's folder name and the files that differ from that
    folder's (base64 by name); None for one of the catalog's own folders (named by its name alone). RecipeError for
    a variant whose code differs from its recipe's (trained from files that have changed since)."""
    recipe_dir, recipes = Path(recipe_dir).resolve(), Path(recipes).resolve()
    if recipe_dir.parent == recipes:
        return None
    of = recipe_dir.parent.parent.name  # <slug>/<variant id>/recipe
    theirs = _files(recipes / of) if (recipes / of).is_dir() else {}
    own = {name: content for name, content in _files(recipe_dir).items() if theirs.get(name) != content}
    changed = sorted(name for name in own if name.endswith(CODE))
    if changed:
        raise RecipeError(f"this variant's code ({', '.join(changed)}) is not its recipe's {of}: it was trained from "
                          "files of the recipe that have changed since; train it again")
    return {"of": of, "files": {name: base64.b64encode(content).decode() for name, content in own.items()}}


def laid_out(variant: dict, recipes: Path, root: Path, kept: int) -> Path | None:
    """The folder a compute worker runs a variant in: its own folder of the variant's recipe with the files carried
    laid over it, made once under `root` for each content (the `kept` most recently used are kept); None where
    this worker has no folder of that recipe. RecipeError for a carried name that is code or leaves the folder."""
    of = recipes / Path(variant["of"]).name
    if not of.is_dir():
        return None
    files = {name: base64.b64decode(content) for name, content in sorted(variant["files"].items())}
    for name in files:
        if name.endswith(CODE) or Path(name).is_absolute() or ".." in Path(name).parts:
            raise RecipeError(f"a variant carries data, not {name!r}: its code is its recipe's")
    digest = hashlib.sha256(b"".join(name.encode() + b"\0" + content + b"\0" for name, content in files.items()))
    home = root / of.name / digest.hexdigest()[:16]
    folder = home / "recipe"
    if folder.is_dir():
        os.utime(home)
        return folder
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".variant-", dir=home.parent))
    shutil.copytree(of, staging / "recipe", ignore=IGNORED)
    for name, content in files.items():
        (staging / "recipe" / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / "recipe" / name).write_bytes(content)
    try:
        os.rename(staging, home)  # whole or not at all: another child laying it out too loses the race quietly
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    _make_room(root, kept)
    return folder


def _make_room(root: Path, kept: int) -> None:
    """Remove the variants laid out here longest unused, past the `kept` newest."""
    homes = sorted((home for recipe in root.iterdir() if recipe.is_dir() for home in recipe.iterdir()
                    if home.is_dir() and not home.name.startswith(".")), key=lambda home: home.stat().st_mtime)
    for home in homes[:-kept]:
        shutil.rmtree(home, ignore_errors=True)
