"""Checkpoints: weights a recipe reads from a folder on this server instead of from its own folder.

A recipe declares one in recipe.toml under [checkpoint]: the setting that names the folder, the Hugging
Face repositories whose local cache copy is used when the setting is empty, the files it needs, and the
command that downloads them where a network exists. Nothing is ever downloaded here. The folder found is
handed to the recipe as its `checkpoint` argument, and the files' sha256 hashes are part of every cached
answer's key, so that another checkpoint never answers from this one's cache.
"""

import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .stamps import file_stamp


class CheckpointDeclarationError(ValueError):
    """recipe.toml's [checkpoint] cannot be used; the message names the field."""


@dataclass(frozen=True)
class CheckpointSpec:
    """What a recipe's [checkpoint] declares."""

    setting: str  # the config key naming the folder; TENSORVIZ_<setting> in the environment
    hub: tuple[str, ...]  # Hugging Face repositories looked for in the local cache, in this order
    files: tuple[str, ...]  # every one is needed
    weights: tuple[str, ...]  # one of these is needed, the first present is used
    optional: tuple[str, ...]  # read when present
    download: str  # the command that puts the files in the local cache, where a network exists
    description: str  # what the checkpoint is, in a few words


def checkpoint_spec(declaration: dict) -> CheckpointSpec:
    """The [checkpoint] table of a recipe.toml, checked."""
    def strings(key: str, required: bool = True) -> tuple[str, ...]:
        value = declaration.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) \
                or (required and not value):
            raise CheckpointDeclarationError(f"checkpoint.{key} must be a list of names")
        return tuple(value)

    setting = declaration.get("setting")
    if not isinstance(setting, str) or not setting.isidentifier() or not setting.isupper():
        raise CheckpointDeclarationError("checkpoint.setting must be an upper-case setting name")
    for key in ("download", "description"):
        if not isinstance(declaration.get(key), str):
            raise CheckpointDeclarationError(f"checkpoint.{key} must be a string")
    return CheckpointSpec(setting, strings("hub"), strings("files"), strings("weights"),
                          strings("optional", required=False), declaration["download"], declaration["description"])


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint folder found on this server, with the hash of every file the recipe reads."""

    folder: Path
    source: str  # how it was found, said without the server's paths
    sha256: dict[str, str]

    @property
    def digest(self) -> str:
        return hashlib.sha256(repr(sorted(self.sha256.items())).encode()).hexdigest()


class CheckpointUnavailable(Exception):
    """No usable checkpoint (a request answers 503): what is wrong (`problem`) and how to provide one (`how`, where
    known), which the message says together and a page shows apart (the instructions once)."""

    def __init__(self, problem: str, how: str = "") -> None:
        super().__init__(f"{problem} {how}".strip())
        self.problem, self.how = problem, how

    @property
    def description(self) -> str:
        return str(self.args[0])


def instructions(spec: CheckpointSpec) -> str:
    """How to provide the checkpoint, in the words the page and the API both use."""
    needed = ", ".join(spec.files) + " and " + " or ".join(spec.weights)
    return (f"Where a network exists, download it with `{spec.download}` (it lands in the local Hugging Face "
            f"cache, where TensorViz looks), or set TENSORVIZ_{spec.setting} to a folder holding {needed}; "
            "then reload this page.")


def hub_cache() -> Path:
    """The local Hugging Face cache: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    return Path(home) / "hub"


def _cached_snapshot(repository: str) -> Path | None:
    """The snapshot `refs/main` points to in the local cache, else the newest one holding a config."""
    folder = hub_cache() / ("models--" + repository.replace("/", "--"))
    try:
        ref = (folder / "refs" / "main").read_text().strip()
        if ref and (folder / "snapshots" / ref).is_dir():
            return folder / "snapshots" / ref
        snapshots = [p for p in (folder / "snapshots").iterdir() if (p / "config.json").is_file()]
    except OSError:
        return None
    return max(snapshots, key=lambda p: p.stat().st_mtime, default=None)


@lru_cache(maxsize=64)
def _file_sha256(path: str, stamp: tuple[int, ...]) -> str:
    """A file's hash, computed once per stamp (stamps.py: any edit changes it): a checkpoint's weights are
    hundreds of megabytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _hashes(spec: CheckpointSpec, folder: Path, source: str) -> Checkpoint:
    missing = [name for name in spec.files if not (folder / name).is_file()]
    weights = next((name for name in spec.weights if (folder / name).is_file()), None)
    if missing or weights is None:
        absent = missing[0] if missing else " or ".join(spec.weights)
        raise CheckpointUnavailable(f"The {spec.description} checkpoint ({source}) lacks {absent}.",
                                    instructions(spec))
    names = [*spec.files, weights, *(n for n in spec.optional if (folder / n).is_file())]
    hashes = {}
    for name in names:
        stat = (folder / name).stat()
        hashes[name] = _file_sha256(str((folder / name).resolve()), file_stamp(stat))
    return Checkpoint(folder, source, hashes)


def locate(spec: CheckpointSpec, configured: str | None) -> tuple[Path, str] | None:
    """Where the checkpoint is and how it was found: the folder the setting names (`configured`), else the
    local Hugging Face cache."""
    if configured:
        return Path(configured), f"the folder TENSORVIZ_{spec.setting} names"
    for repository in spec.hub:
        snapshot = _cached_snapshot(repository)
        if snapshot is not None:
            return snapshot, f"{repository} in the local Hugging Face cache"
    return None


def find(spec: CheckpointSpec, configured: str | None) -> Checkpoint:
    """The checkpoint with its files' hashes; CheckpointUnavailable says what is missing and how to
    provide it. `configured` is the setting's value, if any."""
    located = locate(spec, configured)
    if located is None:
        raise CheckpointUnavailable(f"No {spec.description} checkpoint is on this server.", instructions(spec))
    folder, source = located
    try:  # is_dir() too raises for a setting that cannot be checked: a name too long, a denied or failing mount
        if not folder.is_dir():
            raise CheckpointUnavailable(f"{source[0].upper()}{source[1:]} is not a folder.", instructions(spec))
        return _hashes(spec, folder, source)
    except OSError as exc:
        raise CheckpointUnavailable(f"The {spec.description} checkpoint ({source}) cannot be read: "
                                    f"{exc.strerror or type(exc).__name__}.", instructions(spec)) from exc
