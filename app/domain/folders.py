"""Model folders read as what they are: files inside them, never a link out of them, and messages about them that
name no folder of the server.

A recipe or manifest folder may hold a link to another of its own files; a link that leaves the folder (to
/etc/passwd, /proc/self/environ, another model's weights) makes the model unavailable, so that nothing outside
the project is ever read as a model's file or served.
"""

import os
import re
import sys
import tempfile
from pathlib import Path

MOST_ENTRIES = 10_000  # files and folders a model folder may hold; a larger tree is not a recipe


class FolderError(ValueError):
    """A model folder cannot be read as one: the message names the file by its place in the project."""


def inside(path: Path, root: Path) -> bool:
    """Whether `path`, its links followed, lies within `root` (whose own links are followed too)."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a loop of links
        return False


def check_links(folder: Path, shown: str) -> None:
    """Refuse a folder that is itself a link out of its parent, or that holds a link leaving it anywhere below
    (walked without following links; at most MOST_ENTRIES entries). `shown` is how messages name it
    (`recipes/gpt`)."""
    if folder.is_symlink() and not inside(folder, folder.parent):
        raise FolderError(f"{shown} is a link out of its folder; a model's folders may not leave the project")
    seen = 0
    for top, folders, files in os.walk(folder, followlinks=False):
        for name in (*folders, *files):
            seen += 1
            if seen > MOST_ENTRIES:
                raise FolderError(f"{shown} holds more than {MOST_ENTRIES:,} files and folders")
            path = Path(top) / name
            if path.is_symlink() and not inside(path, folder):
                where = path.relative_to(folder).as_posix()
                raise FolderError(f"{shown}/{where} is a link out of its folder; links may not leave it")


def read_inside(folder: Path, name: str, shown: str, most: int | None = None) -> bytes:
    """The bytes of `folder/name`, which must be a file within the folder (after links) and hold at most `most`
    bytes; FolderError says which file and why, without the server's path."""
    path = folder / name
    if not inside(path, folder):
        raise FolderError(f"{shown}/{name} is a link out of its folder; links may not leave it")
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise FolderError(f"{shown}/{name} is not a file")
        if most is not None and size > most:
            raise FolderError(f"{shown}/{name} holds {size:,} bytes, over the {most:,} this server reads")
        with path.open("rb") as stream:  # read no more than the bound, should it grow meanwhile
            content = stream.read(most + 1 if most is not None else -1)
    except OSError as exc:
        raise FolderError(f"cannot read {shown}/{name}: {exc.strerror or type(exc).__name__}") from None
    if most is not None and len(content) > most:
        raise FolderError(f"{shown}/{name} holds more than the {most:,} bytes this server reads")
    return content


ABSOLUTE_FOLDERS = re.compile(r"(?<![\w.~])/(?:[^\s'\"/:]+/)+")
# A quoted path (as Python's errors write one) ends at its quote, so its folders may hold spaces.
QUOTED_FOLDERS = re.compile(r"(?<=['\"])/(?:[^'\"\n/]+/)+")


def _known_folders() -> list[str]:
    """The folders a message may name whose names may hold spaces, which no pattern can tell from the words
    around a path: the home folder, the temporary folder, the Python installation, the working folder."""
    found = {str(Path.home()), tempfile.gettempdir(), sys.prefix, sys.base_prefix, os.getcwd()}
    return sorted((f.rstrip("/") + "/" for f in found if len(f) > 1), key=len, reverse=True)


def without_paths(message: str, roots: tuple[str, ...] = ()) -> str:
    """A message without the server's folders: /srv/app/recipes/x/w.bin -> w.bin, also where a folder's name holds
    a space: a path under one of `roots` (the folders a call names: its recipes, a checkpoint) or a known folder,
    or a quoted path ('/srv/my models/w.bin' -> 'w.bin')."""
    for root in sorted((r.rstrip("/") + "/" for r in roots if r.startswith("/") and len(r) > 1), key=len, reverse=True):
        message = message.replace(root, "")
    for folder in _known_folders():
        message = message.replace(folder, "/")
    return ABSOLUTE_FOLDERS.sub("", QUOTED_FOLDERS.sub("", message))
