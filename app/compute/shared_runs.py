"""The plain runs What if? made, shared by every recipe process of a machine through files in one folder.

Each web process (gunicorn's workers) starts recipe processes of its own, and a reader's next request may reach any
of them: the page asks What if?'s options of one web process, whose recipe process runs the case as asked and keeps
it, and the reader's change may reach another, whose recipe process would run the case again beside the changed
run (for the DDPM's sampler, twice the wait: bench/README.md, "What if?"). So a recipe process writes each plain run
it keeps to this folder too, and one that does not hold a run reads it here before running the input again.

A file holds the length of its header, the header as JSON (the run's key, the entry's answer as JSON text, each
output's key, shape and squared norm, the values' type, byte count and SHA-256), then the values' raw bytes: nothing
in it is executed when it is read (no pickle). The folder is this user's alone (made 0700; one that another user
owns, or that others may write into, is not used), so a file in it was written by a recipe process of this user;
still, it is a cache, never an authority: a file that is not whole, holds another key's run, values whose SHA-256 is
not its header's or what no run holds (a square that is negative or not finite), or is a link or anything but a
regular file (a FIFO would block its reader), is a miss, and is removed.
"""

import hashlib
import logging
import math
import os
import stat
import time
from pathlib import Path
from typing import Any

import orjson
import torch

from ..domain.jsonbytes import dumps, loads
from ..domain.lru import SizedLRU
from .intervene import Baseline
from .messages import SharedRunsFolder

SUFFIX = ".run"
PART = ".part"  # a run being written, renamed to its name once whole
STALE_PART_SECONDS = 60.0  # a part older than this was left by a process that died while writing it
TRIM_SHARE = 64  # a process lists the folder again once it has written this share of the bound since it last did
LENGTH = 8  # the bytes that give the header's length, little-endian, at the start of a file

log = logging.getLogger(__name__)


class RunsFolder:
    """Kept runs in files, one a run, named by a hash of its key; past `max_bytes` in all, those least recently
    written or read go first. Each is written whole under a temporary name, then renamed: a reader finds a run whole
    or not at all, whichever process writes it."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.unseen = max_bytes  # bytes written since this process last trimmed the folder: its first write trims

    @classmethod
    def opened(cls, setting: SharedRunsFolder) -> "RunsFolder | None":
        """The setting's folder, made where it is missing; None (each process keeps its runs to itself) where it
        cannot be made, is a link, or is not this user's alone."""
        folder = Path(setting.path)
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            found = os.lstat(folder)
        except OSError as exc:
            log.warning("What if?'s shared runs folder %s cannot be made (%s): each recipe process keeps its own",
                        folder, exc)
            return None
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid() or found.st_mode & 0o077:
            log.warning("What if?'s shared runs folder %s is not this user's alone (a link, another owner, or open to "
                        "others): each recipe process keeps its own", folder)
            return None
        return cls(folder, setting.max_bytes)

    def path(self, key: str) -> Path:
        return self.folder / (hashlib.sha256(key.encode()).hexdigest() + SUFFIX)

    def load(self, key: str) -> tuple[tuple[Any, Baseline], int] | None:
        """The run kept under `key` and the bytes its file takes, or None; a file that is no whole run of this key (a
        link, a cut or foreign file) is removed."""
        path = self.path(key)
        try:
            # A link is never followed, and a FIFO put in a run's place never blocks the open (a regular file, below).
            handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError:
            path.unlink(missing_ok=True)
            return None
        try:
            with os.fdopen(handle, "rb") as opened:
                status = os.fstat(opened.fileno())
                found = read_run(opened, key, status.st_size) if stat.S_ISREG(status.st_mode) else None
                size = status.st_size
            if found is not None:
                os.utime(path)  # read lately: among the last to go
        except OSError:  # removed or cut meanwhile: a miss
            return None
        if found is None:
            path.unlink(missing_ok=True)
            return None
        return found, size  # the values and the answer's JSON, as plain_run measures a run it keeps

    def save(self, key: str, plain: Any, base: Baseline) -> None:
        """Write the run, unless it is not plain JSON data with finite squares or is past the folder's bound; a disk
        that refuses it costs the other processes a run, never this one's answer."""
        header = run_header(key, plain, base)
        if header is None or len(header) + base.bytes() > self.max_bytes:
            return
        part = self.folder / f"{os.getpid()}-{os.urandom(6).hex()}{PART}"
        try:
            with open(part, "xb") as written:
                written.write(len(header).to_bytes(LENGTH, "little") + header)
                written.write(base.values.contiguous().view(torch.uint8).numpy())
            os.replace(part, self.path(key))
        except OSError:
            part.unlink(missing_ok=True)
            return
        # Listed again once this process has written a 64th of the bound since it last did: a folder of thousands of
        # small runs takes longer to list than a small model's run.
        self.unseen += len(header) + base.bytes()
        if self.unseen >= self.max_bytes // TRIM_SHARE:
            self.trim()

    def trim(self) -> None:
        """Remove the runs least recently written or read until the rest fit the bound, and any part a process left
        when it died while writing it."""
        self.unseen = 0
        stale = time.time() - STALE_PART_SECONDS
        found = []
        try:
            entries = list(os.scandir(self.folder))
        except OSError:  # the folder removed meanwhile: the next write fails quietly
            return
        for entry in entries:
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:  # removed meanwhile by another process
                continue
            if entry.name.endswith(SUFFIX):
                found.append((status.st_mtime, status.st_size, entry.path))
            elif entry.name.endswith(PART) and status.st_mtime < stale:
                Path(entry.path).unlink(missing_ok=True)
        total = sum(size for _, size, _ in found)
        for _, size, path in sorted(found):
            if total <= self.max_bytes:
                return
            Path(path).unlink(missing_ok=True)
            total -= size


def run_header(key: str, plain: Any, base: Baseline) -> bytes | None:
    """A run's header as JSON bytes; None where the entry's answer is not JSON data or a square is not finite."""
    try:
        answer, _ = dumps(plain)
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(square) for square in base.squares):
        return None
    return orjson.dumps({"key": key, "answer": answer.decode(), "keys": base.keys,
                         "shapes": [list(shape) for shape in base.shapes], "squares": base.squares,
                         "dtype": str(base.values.dtype).removeprefix("torch."), "bytes": base.bytes(),
                         "sha256": _digest(base.values.contiguous().view(torch.uint8))})


def _digest(raw: torch.Tensor) -> str:
    """The SHA-256 of a run's values as bytes: a file whose values were changed after it was written does not
    check out (10 ms for the DDPM's 23 MB)."""
    return hashlib.sha256(raw.numpy()).hexdigest()


def read_run(opened, key: str, size: int) -> tuple[Any, Baseline] | None:
    """The run a file holds, read from its start, or None where it is not a whole run of `key`."""
    try:
        length = int.from_bytes(opened.read(LENGTH), "little")
        if not 0 < length <= size - LENGTH:
            return None
        header = orjson.loads(opened.read(length))
        count = header["bytes"]
        dtype = getattr(torch, header["dtype"])
        squares = [float(square) for square in header["squares"]]
        if header["key"] != key or size != LENGTH + length + count or not isinstance(dtype, torch.dtype) \
                or not all(0 <= square < math.inf for square in squares):
            return None
        raw = torch.empty(count, dtype=torch.uint8)
        if count and opened.readinto(raw.numpy()) != count or _digest(raw) != header["sha256"]:
            return None
        values = raw.view(dtype) if count else torch.zeros(0, dtype=dtype)
        base = Baseline.from_flat(header["keys"], values, [torch.Size(shape) for shape in header["shapes"]], squares)
        return loads(header["answer"]), base
    except (ValueError, KeyError, TypeError, AttributeError, RuntimeError, OverflowError, RecursionError):
        return None


class SharedRuns(SizedLRU):
    """A recipe process's plain runs (key -> (the entry's answer, Baseline)): in its memory, and in `folder` where
    one is given, which every recipe process of the machine reads."""

    def __init__(self, max_bytes: int, folder: RunsFolder | None) -> None:
        super().__init__(max_bytes)
        self.folder = folder

    def get(self, key):
        found = super().get(key)
        if found is None and self.folder is not None and (loaded := self.folder.load(key)) is not None:
            found, size = loaded
            super().put(key, found, size)
        return found

    def put(self, key, value, size: int) -> None:
        if size > self.max_bytes:  # a run this process would not keep is not written for the others either
            return
        super().put(key, value, size)
        if self.folder is not None:
            self.folder.save(key, *value)
