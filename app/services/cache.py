"""Answers kept for reuse (verification reports, live runs, rendered model pages), through Flask-Caching.

    cache.get(key) / cache.set(key, value, timeout)     # `cache` is a flask_caching.Cache bound in create_app

Configured with Flask-Caching's own CACHE_* settings. The default backend, SharedStoreCache, is the app's
shared store (services/state.py): the SQLite file every process of the host shares, or with REDIS_URL Redis,
shared by every machine; it keeps the store's byte bounds (STATE_MAX_BYTES, STATE_MAX_ENTRY_BYTES: those
nearest expiry go first) and its rule that a failing store is a miss, never an error. Any other backend
Flask-Caching offers can be named instead (CACHE_TYPE = "RedisCache" with CACHE_REDIS_URL), with its own
bounds. Keys name everything an answer depends on (content hashes: runs.run_key); jobs and budgets are
not answers and stay in the store itself.
"""

from typing import Any

from flask import Flask
from flask_caching import Cache
from flask_caching.backends.base import BaseCache

from .parts import parts
from .state import encode

FOREVER = 10 * 365 * 86400  # seconds: the store keeps every entry with an expiry


class SharedStoreCache(BaseCache):
    """A Flask-Caching backend over the app's shared store: values are JSON data, kept as `cached` entries
    (evicted first when the store is full)."""

    def __init__(self, app: Flask, default_timeout: int) -> None:
        super().__init__(default_timeout=default_timeout)
        self.app = app

    @classmethod
    def factory(cls, app: Flask, config: dict, args: list, kwargs: dict) -> "SharedStoreCache":
        return cls(app, kwargs["default_timeout"])

    @property
    def store(self):
        return parts(self.app).store

    def get(self, key: str) -> Any:
        return self.store.get(key)

    def get_json(self, key: str) -> bytes | None:
        """The value as the JSON bytes it is kept as, to serve without parsing it."""
        return self.store.get_json(key)

    def seconds(self, timeout: int | None) -> float:
        """A Flask-Caching timeout as the store's: 0 means kept until evicted."""
        return self._normalize_timeout(timeout) or FOREVER

    def set(self, key: str, value: Any, timeout: int | None = None) -> bool:
        self.store.set(key, value, self.seconds(timeout), cached=True)
        return True

    def add(self, key: str, value: Any, timeout: int | None = None) -> bool:
        return self.store.add(key, value, self.seconds(timeout))

    def delete(self, key: str) -> bool:
        self.store.delete(key)
        return True

    def has(self, key: str) -> bool:
        return self.store.get_json(key) is not None

    def clear(self) -> bool:
        return False  # the store holds jobs and budgets too: answers expire or are evicted, never wiped


def init_app(app: Flask) -> None:
    """Bind the app's cache: Flask-Caching's settings, defaulting to the shared store for CACHE_SECONDS."""
    app.config.setdefault("CACHE_DEFAULT_TIMEOUT", app.config["CACHE_SECONDS"])
    cache.init_app(app)


def raw(key: str) -> bytes | None:
    """A kept answer as JSON bytes: as kept where the backend keeps JSON (the shared store), else encoded."""
    backend = cache.cache
    if isinstance(backend, SharedStoreCache):
        return backend.get_json(key)
    value = backend.get(key)
    return None if value is None else encode(value)


cache = Cache()
