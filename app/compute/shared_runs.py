"""Plain runs kept for interventions, shared by every recipe process on the machine through files in one folder.

A recipe process keeps the plain runs it made (a recorded case at its warm-up, a lab input after its reply) in its
own memory first (the `runs` cache layer). Several web processes (gunicorn's workers) each start recipe processes of
their own, and the next request of a reader may reach any of them: so each kept run is also written to a folder that
every recipe process on the machine reads (the `shared runs` layer), and a process that does not hold a run looks
there before it runs the input again. A file holds the run's key, the entry's answer as JSON and the outputs' keys,
shapes and squared norms as JSON, then the outputs' values as raw bytes, then the sha256 of the run's key and all
that: nothing in it is executed when it is read (no pickle). The folder is a cache, never an authority: a file that is
a link, cannot be read whole, fails its digest or holds what no run holds (an overflowing number) is a miss, never an
error, and is removed.
"""

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import orjson
import torch

from ..domain.jsonbytes import dumps
from ..domain.lru import SizedLRU
from .intervene import Baseline

SUFFIX = ".run"
PART = ".part"  # a run being written, renamed to its name once whole
STALE_PART_SECONDS = 60.0
TRIM_SHARE = 64  # a process lists the folder again once it has written this share of its bound
LENGTH = 8  # the bytes that give the header's length, little-endian, at the start of a file
DIGEST = 32  # the bytes of the sha256 at its end, of the run's key and everything before it


def pack(key: str, plain: Any, base: Baseline) -> bytes:
    """A kept run as one file's bytes; TypeError where the entry's answer is not JSON data."""
    answer, _ = dumps(plain)
    values = base.values.contiguous()
    header = json.dumps({"key": key, "answer": answer.decode(), "keys": base.keys,
                         "shapes": [list(shape) for shape in base.shapes], "squares": base.squares,
                         "dtype": str(values.dtype).removeprefix("torch.")}).encode()
    payload = values.view(torch.uint8).numpy().tobytes() if values.numel() else b""
    body = len(header).to_bytes(LENGTH, "little") + header + payload
    return body + hashlib.sha256(key.encode() + body).digest()


def unpack(key: str, data: bytes) -> tuple[Any, Baseline] | None:
    """The kept run in a file's bytes, or None where they hold another key's run, are not whole, fail their digest or
    hold what no run holds."""
    data, digest = data[:-DIGEST], data[-DIGEST:]
    if len(digest) != DIGEST or hashlib.sha256(key.encode() + data).digest() != digest:
        return None
    try:
        length = int.from_bytes(data[:LENGTH], "little")
        header = parsed(data[LENGTH:LENGTH + length])
        if header["key"] != key:  # two keys of one hash
            return None
        dtype = getattr(torch, header["dtype"])
        payload = bytearray(data[LENGTH + length:])
        values = torch.frombuffer(payload, dtype=torch.uint8).view(dtype) if payload else torch.zeros(0, dtype=dtype)
        base = Baseline.laid(header["keys"], values, [torch.Size(shape) for shape in header["shapes"]],
                             [float(square) for square in header["squares"]])
        return parsed(header["answer"]), base
    except (ValueError, KeyError, TypeError, AttributeError, RuntimeError, OverflowError, RecursionError):
        return None


def parsed(text: bytes | str) -> Any:
    """JSON read by orjson (a quarter of the standard library's time on the header of a run of 24 outputs), else by
    the standard library where it holds NaN or infinity, which orjson does not read."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


class RunsFolder:
    """Kept runs in files, one a run, named by a hash of its key; past `max_bytes` in all (and what each process
    wrote since it last looked, a 64th of it at most), the least recently written or read go first. Written whole
    under a temporary name, then renamed: a reader sees a run whole or not at all, whichever process writes it."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.unseen = max_bytes  # bytes this process wrote since it last trimmed the folder (the first write trims)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)

    def path(self, key: str) -> Path:
        return self.folder / (hashlib.sha256(key.encode()).hexdigest() + SUFFIX)

    def load(self, key: str) -> tuple[tuple[Any, Baseline], int] | None:
        """The run kept under `key` and the bytes it takes, or None; a file that is no run of this key's (a link, a
        forged or broken file) is removed."""
        path = self.path(key)
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)  # a link is never followed
        except OSError:
            if path.is_symlink():
                path.unlink(missing_ok=True)
            return None
        try:
            with os.fdopen(handle, "rb") as opened:
                data = opened.read()
            os.utime(path)  # read lately: the last to go
        except OSError:
            return None
        found = unpack(key, data)
        if found is None:
            path.unlink(missing_ok=True)
            return None
        return found, len(data)

    def save(self, key: str, plain: Any, base: Baseline) -> None:
        try:
            data = pack(key, plain, base)
        except TypeError:  # an answer that is no JSON data is kept in its process alone
            return
        if len(data) > self.max_bytes:
            return
        part = self.folder / f"{os.getpid()}-{os.urandom(6).hex()}{PART}"
        try:
            part.write_bytes(data)
            os.replace(part, self.path(key))
        except OSError:  # a full or unwritable disk costs the other processes a run, nothing more
            part.unlink(missing_ok=True)
            return
        # Trimmed once this process has written a 64th of the bound: a folder of thousands of small runs takes tens of
        # milliseconds to list, more than a small model's run.
        self.unseen += len(data)
        if self.unseen >= self.max_bytes // TRIM_SHARE:
            self.trim()

    def trim(self) -> None:
        """Remove the runs least recently written or read until the rest fit `max_bytes`, and any write that a
        process left unfinished (it died between writing and renaming)."""
        found = []
        stale = time.time() - STALE_PART_SECONDS
        try:
            entries = list(os.scandir(self.folder))
        except OSError:  # the folder removed meanwhile: nothing to trim, and the next write fails quietly
            return
        for entry in entries:
            try:
                stat = entry.stat()
            except OSError:  # removed meanwhile by another process
                continue
            if entry.name.endswith(SUFFIX):
                found.append((stat.st_mtime, stat.st_size, entry.path))
            elif entry.name.endswith(PART) and stat.st_mtime < stale:
                Path(entry.path).unlink(missing_ok=True)
        self.unseen = 0
        total = sum(size for _, size, _ in found)
        for _, size, path in sorted(found):
            if total <= self.max_bytes:
                return
            Path(path).unlink(missing_ok=True)
            total -= size


class SharedRuns(SizedLRU):
    """A recipe process's kept runs (key -> (answer, Baseline)): in its memory, and in `folder` where one is given,
    which every recipe process on the machine reads."""

    def __init__(self, max_bytes: int, folder: RunsFolder | None = None) -> None:
        super().__init__(max_bytes)
        self.folder = folder

    def get(self, key):
        found = super().get(key)
        if found is None and self.folder is not None:
            loaded = self.folder.load(key)
            if loaded is not None:
                found, size = loaded
                super().put(key, found, size)
        return found

    def put(self, key, value, size: int) -> None:
        if size > self.max_bytes:  # a run this process would not keep is not written for the others either
            return
        super().put(key, value, size)
        if self.folder is not None:
            self.folder.save(key, *value)
