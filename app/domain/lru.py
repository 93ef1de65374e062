"""A thread-safe least-recently-used map bounded by the total size of what it holds: every per-process
cache (compressed bodies, whole responses, rendered pages, reports read from the shared store)."""

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class SizedLRU:
    """Values with a size in bytes; past `max_bytes` the least recently used go first. A value larger than
    the whole bound is not kept."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        with self.lock:
            found = self.items.get(key)
            if found is None:
                return None
            self.items.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value: Any, size: int) -> None:
        if size > self.max_bytes:
            return
        with self.lock:
            old = self.items.pop(key, None)
            if old is not None:
                self.size -= old[1]
            self.items[key] = (value, size)
            self.size += size
            while self.size > self.max_bytes:
                _, (_, dropped) = self.items.popitem(last=False)
                self.size -= dropped

    def discard(self, key: Hashable) -> None:
        with self.lock:
            old = self.items.pop(key, None)
            if old is not None:
                self.size -= old[1]

    def __len__(self) -> int:
        return len(self.items)

    # Read like a mapping (for tests and diagnostics), without touching the order of use.
    def keys(self) -> list:
        with self.lock:
            return list(self.items)

    def __iter__(self):
        return iter(self.keys())

    def __getitem__(self, key: Hashable) -> Any:
        with self.lock:
            return self.items[key][0]
