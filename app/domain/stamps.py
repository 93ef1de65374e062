"""When a file on disk has changed, without reading it."""

import os


def file_stamp(stat: os.stat_result) -> tuple[int, ...]:
    """What changes whenever a file's content does: its size and times, the change time (ctime) included, which
    no one can set back (an edit that keeps the size and restores the mtime still moves it), and its inode (a
    file replaced by another)."""
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino
