"""What a recipe may import, and whether what it needs is installed.

A recipe names the packages it needs in its requirements.txt (one PEP 508 requirement per line, `#` comments).
Its Python files may import the standard library, its own modules, the recipe kit (recipekit, part of this
project) and the packages that provide the distributions its requirements.txt names; nothing else. Each
requirement must be installed here at a version its specifier admits. `record` refuses a recipe that breaks
either rule, and the catalog serves such a model as unavailable, with the reason: a run could only fail.

A requirement only its training needs (scikit-learn, which ships the digits the recipe kit splits) carries the marker
`; extra == "training"`: the model is served without it, and a retraining is refused, naming it, until it is
installed. `make setup` installs every recipe's requirements, these included (scripts/recipe-requirements). What is
installed is read again whenever a folder of the import path changes (pip adds a package's folder to one), so that a
package installed while the server runs is seen at the catalog's next look.
"""

import ast
import importlib.metadata
import os
import re
import sys
from functools import lru_cache

KIT = "recipekit"  # the recipe kit's package: part of this project, importable by every recipe
REQUIREMENTS_FILE = "requirements.txt"
TRAINING = "training"  # the extra that marks a requirement only train.py needs


def _normal(name: str) -> str:
    """A distribution's name as PEP 503 compares them: scikit_learn, Scikit-Learn and scikit-learn are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_stamp() -> tuple:
    """What is installed, as far as it can change: each folder of the import path with its modification time (a
    package installed or removed adds or removes a folder in one). A few system calls, so asked at every look."""
    found = []
    for folder in sys.path:
        try:
            found.append((folder, os.stat(folder or ".").st_mtime_ns))
        except OSError:
            continue
    return tuple(found)


@lru_cache(maxsize=2)
def _providers(stamp: tuple) -> dict[str, frozenset[str]]:
    """Each importable top-level module and the distributions that provide it, read again when `stamp` (what is
    installed) changes."""
    importlib.invalidate_caches()
    return {module: frozenset(_normal(d) for d in dists)
            for module, dists in importlib.metadata.packages_distributions().items()}


@lru_cache(maxsize=1024)
def _installed(distribution: str, stamp: tuple) -> str | None:
    """The installed version of a distribution, None where it is not installed (read again when `stamp` changes)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def imported(files: dict[str, bytes]) -> dict[str, set[str]]:
    """The top-level modules each Python file imports absolutely (`import torch`, `from sklearn import x`);
    ValueError names a file that does not parse."""
    return {name: set(_imports(name, content)) for name, content in files.items() if name.endswith(".py")}


@lru_cache(maxsize=1024)
def _imports(name: str, content: bytes) -> frozenset[str]:
    """One file's absolute imports, kept by its content: parsing every recipe's files was half of loading the
    catalog, which every app made in a process (a test's, a worker's reload) did again."""
    try:
        tree = ast.parse(content, filename=name)
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"{name} does not parse as Python: {exc.msg if isinstance(exc, SyntaxError) else exc}") \
            from None
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return frozenset(modules)


def uses_kit(files: dict[str, bytes]) -> bool:
    """Whether any of the recipe's Python files imports the recipe kit."""
    try:
        return any(KIT in modules for modules in imported(files).values())
    except ValueError:
        return False


def unmet(requirements: bytes, extra: str = "") -> tuple[list[str], set[str]]:
    """What a requirements.txt asks that is not installed here, each in words with the command that installs it, and
    the distributions it names; `extra` ("training") counts the requirements only that extra needs too."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion

    stamp = installed_stamp()
    found: list[str] = []
    named: set[str] = set()
    for number, line in enumerate(requirements.decode(errors="replace").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            found.append(f"{REQUIREMENTS_FILE} line {number}: {text[:60]!r} is not a requirement ({exc})")
            continue
        named.add(_normal(requirement.name))
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue  # for another platform or Python, or only for training
        plain = str(Requirement(str(requirement).split(";")[0]))
        installed = _installed(requirement.name, stamp)
        if installed is None:
            found.append(f"{REQUIREMENTS_FILE} needs {plain}, which is not installed here (pip install '{plain}', "
                         "or make setup)")
            continue
        try:
            admitted = requirement.specifier.contains(installed, prereleases=True)
        except InvalidVersion:
            admitted = False
        if not admitted:
            found.append(f"{REQUIREMENTS_FILE} needs {plain}, and {requirement.name} {installed} is installed "
                         f"(pip install '{plain}', or make setup)")
    return found, named


def problems(files: dict[str, bytes]) -> list[str]:
    """Everything wrong with what the recipe imports and needs to replay, each in words naming the file or
    requirement; [] when the recipe may run here. `files` are the recipe folder's files by name (requirements.txt
    with them)."""
    found, named = unmet(files.get(REQUIREMENTS_FILE, b""))
    try:
        modules = imported(files)
    except ValueError as exc:
        return [*found, str(exc)]
    own = {name[:-3] for name in files if name.endswith(".py")}
    allowed = set(sys.stdlib_module_names) | own | {KIT, "__future__"}
    for name, imports in sorted(modules.items()):
        for module in sorted(imports - allowed):
            providers = _providers(installed_stamp()).get(module)
            if not providers:
                found.append(f"{name} imports {module}, which no installed package provides; name the package in "
                             f"{REQUIREMENTS_FILE} and install it")
            elif not providers & named:
                found.append(f"{name} imports {module}, which {REQUIREMENTS_FILE} does not name (it is "
                             f"{' or '.join(sorted(providers))})")
    return found
