"""Recipe folders as Python packages under slug-qualified names.

Every recipe has its own `model.py` and `run.py`. Loaded as `tensorviz_recipe_<slug>.model` and
`tensorviz_recipe_<slug>.run`, two recipes live side by side in one process (a recipe worker, a test
session) and never shadow each other through a bare `model` module. Nothing here imports torch: the
web process uses it only for names and hashes.
"""

import hashlib
import importlib
import sys
import tomllib
from pathlib import Path
from types import ModuleType

PACKAGE_PREFIX = "tensorviz_recipe_"


def package_name(recipe_dir: Path) -> str:
    """`recipes/bert-base` -> `tensorviz_recipe_bert_base`."""
    return PACKAGE_PREFIX + recipe_dir.name.replace("-", "_")


def source_digest(recipe_dir: Path) -> str:
    """One hash over the recipe's Python files: what the loaded code depends on."""
    digest = hashlib.sha256()
    for path in sorted(recipe_dir.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
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


class RecipeMetadataError(ValueError):
    """A recipe folder's metadata is missing or malformed; the message names the file and the field."""


def read_metadata(recipe_dir: Path) -> dict:
    """The recipe's declarations (`recipe.toml`): page metadata, recording inputs, the lab; {} without one."""
    path = recipe_dir / METADATA_FILE
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RecipeMetadataError(f"{recipe_dir.name}/{METADATA_FILE} is not valid TOML: {exc}") from exc
