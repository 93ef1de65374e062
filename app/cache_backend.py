"""A Redis cache that treats an unreachable Redis as a miss: results are recomputed, never lost to a 500."""

import logging

from flask_caching.backends.rediscache import RedisCache
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


class ResilientRedisCache(RedisCache):
    """flask-caching's RedisCache, degrading to 'no cache' while Redis is down and recovering by itself."""

    _down = False

    def _failed(self, action: str, exc: Exception) -> None:
        if not ResilientRedisCache._down:
            log.warning("Redis unreachable (%s: %s); serving without the shared cache until it returns", action, exc)
        ResilientRedisCache._down = True

    def _ok(self) -> None:
        if ResilientRedisCache._down:
            log.warning("Redis reachable again; the shared cache is back")
        ResilientRedisCache._down = False

    def get(self, key):
        try:
            value = super().get(key)
        except RedisError as exc:
            self._failed("get", exc)
            return None
        self._ok()
        return value

    def set(self, key, value, timeout=None):
        try:
            done = super().set(key, value, timeout)
        except RedisError as exc:
            self._failed("set", exc)
            return False
        self._ok()
        return done

    def delete(self, key):
        try:
            return super().delete(key)
        except RedisError as exc:
            self._failed("delete", exc)
            return False

    def clear(self):
        try:
            return super().clear()
        except RedisError as exc:
            self._failed("clear", exc)
            return False
