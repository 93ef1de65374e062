"""Recipe folders as Python packages under slug-qualified names.

Every recipe has its own `model.py` and `run.py`. Loaded as `tensorviz_recipe_<slug>.model` and
`tensorviz_recipe_<slug>.run` (the names a recipe run as a script gives itself: recipekit/script.py), two recipes
live side by side in one process (a recipe worker, a test session) and never shadow each other through a bare
`model` module. Nothing here imports torch: the web process uses it only for names and hashes.
"""

import hashlib
import importlib
import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType

from recipekit.script import package_name

from .folders import FolderError, read_inside


def source_digest(recipe_dir: Path) -> str:
    """One hash over the recipe's Python files: what the loaded code depends on."""
    digest = hashlib.sha256()
    for path in sorted(recipe_dir.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def kit_folder() -> Path | None:
    """Where the recipe kit (recipekit) lives, found without importing it (it imports torch)."""
    spec = importlib.util.find_spec("recipekit")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def kit_digest() -> str:
    """One hash over every file of the recipe kit: a recipe that imports it depends on all of them."""
    folder = kit_folder()
    digest = hashlib.sha256()
    if folder is not None:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _forget(package: str) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


def load_package(recipe_dir: Path) -> ModuleType:
    """The recipe folder as a package; loaded again when its files changed since the last load, so the
    code that runs is always the code on disk."""
    recipe_dir = recipe_dir.resolve()
    package = package_name(recipe_dir)
    digest = source_digest(recipe_dir)
    loaded = sys.modules.get(package)
    if loaded is not None and getattr(loaded, "__recipe_digest__", None) == digest \
            and getattr(loaded, "__recipe_dir__", None) == str(recipe_dir):
        return loaded
    _forget(package)
    module = ModuleType(package, f"The recipe folder {recipe_dir.name}")
    module.__path__ = [str(recipe_dir)]  # submodules are found in the folder, as for any package
    module.__package__ = package
    module.__recipe_digest__ = digest
    module.__recipe_dir__ = str(recipe_dir)
    sys.modules[package] = module
    return module


def load_module(recipe_dir: Path, module: str) -> ModuleType:
    """`recipes/<slug>/<module>.py` imported inside its recipe package."""
    package = load_package(recipe_dir)
    return importlib.import_module(f"{package.__name__}.{module}")


METADATA_FILE = "recipe.toml"
METADATA_MOST_BYTES = 1 << 20  # a declaration is text of a few kilobytes; a larger file is not one


class RecipeMetadataError(ValueError):
    """A recipe folder's metadata is missing or malformed; the message names the file and the field."""


def read_metadata(recipe_dir: Path) -> dict:
    """The recipe's declarations (`recipe.toml`) as TOML reads them, unchecked (declaration.read_declaration
    checks them): page metadata, recording inputs, the lab. RecipeMetadataError when it is missing, too large,
    a link out of the folder, or not TOML."""
    shown = f"recipes/{recipe_dir.name}"
    if not (recipe_dir / METADATA_FILE).exists():
        raise RecipeMetadataError(f"{shown}/{METADATA_FILE} is missing: every recipe declares itself there")
    try:
        text = read_inside(recipe_dir, METADATA_FILE, shown, METADATA_MOST_BYTES).decode()
        return tomllib.loads(text)
    except FolderError as exc:
        raise RecipeMetadataError(str(exc)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RecipeMetadataError(f"{shown}/{METADATA_FILE} is not valid TOML: {exc}") from None
    except RecursionError:
        raise RecipeMetadataError(f"{shown}/{METADATA_FILE} nests too deeply to be a declaration") from None
