"""A recipe file run as a script imports its neighbours as the server does: inside its folder's package.

    from recipekit.script import package
    __package__ = package(__file__, __package__)  # python run.py: the folder is the package the server loads
    from .model import build_model

The server loads `recipes/<slug>/run.py` as `tensorviz_recipe_<slug>.run`, so that two recipes live side by side in
one process and never shadow each other through a bare `model` module. A script has no package; `package` makes its
folder that same package, so every recipe imports its neighbours one way (`from .model import ...`). Imports nothing
else (the web process reads package names here without torch).
"""

import sys
from pathlib import Path
from types import ModuleType

PACKAGE_PREFIX = "tensorviz_recipe_"


def package_name(folder: Path) -> str:
    """`recipes/bert-base` -> `tensorviz_recipe_bert_base`."""
    return PACKAGE_PREFIX + folder.name.replace("-", "_")


def package(file: str, current: str | None) -> str:
    """The package a recipe file's relative imports resolve in: `current` where it is imported inside one, else its
    folder's, registered now (a folder package, found by its path)."""
    if current:
        return current
    folder = Path(file).resolve().parent
    name = package_name(folder)
    if name not in sys.modules:
        module = ModuleType(name, f"The recipe folder {folder.name}")
        module.__path__ = [str(folder)]
        sys.modules[name] = module
    return name
