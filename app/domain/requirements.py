"""What a recipe may import, and whether what it needs is installed.

A recipe names the packages it needs in its requirements.txt (one PEP 508 requirement per line, `#` comments).
Its Python files may import the standard library, its own modules, the recipe kit (recipekit, part of this
project) and the packages that provide the distributions its requirements.txt names; nothing else. Each
requirement must be installed here at a version its specifier admits. `record` refuses a recipe that breaks
either rule, and the catalog serves such a model as unavailable, with the reason: a run could only fail.
"""

import ast
import importlib.metadata
import re
import sys
from functools import cache, lru_cache

KIT = "recipekit"  # the recipe kit's package: part of this project, importable by every recipe
REQUIREMENTS_FILE = "requirements.txt"


def _normal(name: str) -> str:
    """A distribution's name as PEP 503 compares them: scikit_learn, Scikit-Learn and scikit-learn are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _providers() -> dict[str, frozenset[str]]:
    """Each importable top-level module and the distributions that provide it (read once per process)."""
    return {module: frozenset(_normal(d) for d in dists)
            for module, dists in importlib.metadata.packages_distributions().items()}


@cache
def _installed(distribution: str) -> str | None:
    """The installed version of a distribution, None where it is not installed (read once per process, as
    _providers is)."""
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


def problems(files: dict[str, bytes]) -> list[str]:
    """Everything wrong with what the recipe imports and needs, each in words naming the file or requirement;
    [] when the recipe may run here. `files` are the recipe folder's files by name (requirements.txt with them)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion

    found: list[str] = []
    named: set[str] = set()
    for number, line in enumerate(files.get(REQUIREMENTS_FILE, b"").decode(errors="replace").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            found.append(f"{REQUIREMENTS_FILE} line {number}: {text[:60]!r} is not a requirement ({exc})")
            continue
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue  # for another platform or Python
        named.add(_normal(requirement.name))
        installed = _installed(requirement.name)
        if installed is None:
            found.append(f"{REQUIREMENTS_FILE} needs {requirement}, which is not installed here "
                         f"(pip install '{requirement}')")
            continue
        try:
            admitted = requirement.specifier.contains(installed, prereleases=True)
        except InvalidVersion:
            admitted = False
        if not admitted:
            found.append(f"{REQUIREMENTS_FILE} needs {requirement}, and {requirement.name} {installed} is installed")
    try:
        modules = imported(files)
    except ValueError as exc:
        return [*found, str(exc)]
    own = {name[:-3] for name in files if name.endswith(".py")}
    allowed = set(sys.stdlib_module_names) | own | {KIT, "__future__"}
    for name, imports in sorted(modules.items()):
        for module in sorted(imports - allowed):
            providers = _providers().get(module)
            if not providers:
                found.append(f"{name} imports {module}, which no installed package provides; name the package in "
                             f"{REQUIREMENTS_FILE} and install it")
            elif not providers & named:
                found.append(f"{name} imports {module}, which {REQUIREMENTS_FILE} does not name (it is "
                             f"{' or '.join(sorted(providers))})")
    return found
