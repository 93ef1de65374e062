"""State shared by every process of the app: cached reports and live runs, verification jobs, and the
per-client compute budget.

By default an SQLite file under the instance folder, which every process of this host opens (gunicorn's
workers, the CLI); with a Redis URL, Redis, which every machine shares. Both answer the same small
interface, so the code that keeps state never asks which one it has. The cache part is bounded: values
over `max_entry` bytes are not kept, and when the cached values pass `max_bytes` those nearest their
expiry go first. Jobs and budget counters are never evicted (they expire by themselves).

A store that fails (Redis down, a disk full) degrades instead of failing requests: a read is a miss, a job is not
written (its caller then answers within the request), and only what would start work refuses (503: a budget that
cannot be counted admits nothing);
each outage is logged once. A cached answer written meanwhile (a report, the latest report) is held in the
process, bounded in bytes, served from there to this process's reads, and written when the store answers
again, so that an outage loses nothing this process computed.
"""

import logging
import os
import sqlite3
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..domain import caches
from ..domain.jsonbytes import dumps, loads
from .parts import parts

log = logging.getLogger(__name__)


def encode(value: Any) -> bytes:
    """`value` as the JSON bytes it is kept as; ValueError for NaN or infinity, which JSON cannot hold."""
    raw, finite = dumps(value)
    if not finite:
        raise ValueError("NaN or infinity is not JSON")
    return raw


# Why a budget or a place of work cannot be taken while the store is down.
NOTHING_STARTS = ("the shared state that counts each client's compute budget cannot be reached, so nothing that "
                  "computes starts now (kept answers and stored data are still served)")


class StateUnavailable(Exception):
    """The shared state could not be read where a miss would mislead (a job that exists): 503, try again."""


class Store:
    """The interface, and the degrade-on-failure rule both backends share."""

    errors: tuple[type[Exception], ...] = ()

    def __init__(self, max_bytes: int, max_entry: int, clock: Callable[[], float] | None = None) -> None:
        self.max_bytes = max_bytes
        self.max_entry = max_entry
        # Epoch seconds for expiries and budget hits. None is the store's own clock (Redis times its budget by the
        # server's, one for every machine); a test where time is the subject hands one it moves.
        self.injected_clock = clock
        self.clock = clock or time.time
        self._down = False
        # Cached writes the store refused while down: key -> (JSON bytes, epoch expiry), written back on recovery.
        self._unwritten = caches.lru("unwritten", 4 * max_entry)
        self._writing_back = threading.Lock()

    def _guard(self, action: str, call, fallback):
        try:
            result = call()
        except self.errors as exc:
            self._went_down(action, exc)
            return fallback
        self._answered()
        return result

    def _strictly(self, action: str, call, why: str):
        """`call()`'s answer, or StateUnavailable saying `why` this cannot be done while the store is down."""
        try:
            result = call()
        except self.errors as exc:
            self._went_down(action, exc)
            raise StateUnavailable(why) from None
        self._answered()
        return result

    def _answered(self) -> None:
        """The store answered: if it was down, it is back, and what was held meanwhile is written."""
        if self._down:
            log.warning("shared state available again")
            self._down = False
            self._write_back()

    def _went_down(self, action: str, exc: Exception) -> None:
        if not self._down:
            log.warning("shared state unavailable (%s: %s); degrading until it answers again", action, exc)
        self._down = True

    def _write_back(self) -> None:
        """Write what was held while the store was down (each with what is left of its time), oldest first."""
        if not self._writing_back.acquire(blocking=False):
            return  # another thread of this process is writing them
        try:
            written = 0
            for key in self._unwritten.keys():
                held = self._unwritten.get(key)
                if held is not None and held[1] > self.clock():
                    self._set(key, held[0], held[1] - self.clock(), True)
                    written += 1
                self._unwritten.discard(key)
            if written:
                log.warning("shared state: %d answers held during the outage written back", written)
        except self.errors as exc:
            self._went_down("write back", exc)
        finally:
            self._writing_back.release()

    def get(self, key: str, strict: bool = False) -> Any | None:
        """The value under `key`, or None when absent or expired. A store that cannot be read is a miss, unless
        `strict` (a job a client polls, whose absence would be a false 404): then StateUnavailable."""
        raw = self.get_json(key, strict)
        return None if raw is None else loads(raw)

    def get_json(self, key: str, strict: bool = False) -> bytes | None:
        """The value under `key` as the JSON bytes it is kept as (to serve without parsing it)."""
        held = self._unwritten.get(key)
        if held is not None and held[1] > self.clock():
            return held[0]  # newer than anything the store holds: written here while it was down
        if not strict:
            return self._guard("get", lambda: self._get(key), None)
        return self._strictly("get", lambda: self._get(key), "the shared state cannot be reached now, so this cannot "
                              "be looked up; nothing was lost: ask again shortly")

    def set(self, key: str, value: Any, ttl: float, cached: bool = False) -> bool:
        """Keep `value` for `ttl` seconds; a `cached` value may be evicted early to respect the size cap. Whether
        it was written (not while the store is down, nor a value that is not JSON or over the entry cap)."""
        try:
            raw = encode(value)
        except ValueError:  # NaN or infinity: not JSON, so not kept
            return False
        if cached and len(raw) > self.max_entry:
            return False
        self._unwritten.discard(key)  # this value is newer than any held one
        written = self._guard("set", lambda: self._set(key, raw, ttl, cached) or True, False)
        if not written and cached:
            self._unwritten.put(key, (raw, self.clock() + ttl), len(raw))
        return written

    def add(self, key: str, value: Any, ttl: float, strict: bool = False) -> bool:
        """Keep `value` only if nothing is kept under `key`; whether it was kept. While the store is down every add
        succeeds, so that work is duplicated rather than refused; unless `strict` (a place that bounds work: a
        retraining's), and then StateUnavailable."""
        if strict:
            return self._strictly("add", lambda: self._add(key, encode(value), ttl), NOTHING_STARTS)
        return self._guard("add", lambda: self._add(key, encode(value), ttl), True)

    def delete(self, key: str) -> None:
        self._unwritten.discard(key)
        self._guard("delete", lambda: self._delete(key), None)

    def delete_if(self, key: str, value: Any) -> bool:
        """Delete `key` only while it holds `value`, in one step: a holder gives back (or a successor takes over)
        what it held, never what another took a moment before. Whether it was deleted."""
        return bool(self._guard("delete_if", lambda: self._delete_if(key, encode(value)), False))

    def admit(self, key: str, limit: int, window: float, units: int = 1) -> float:
        """Record `units` hits unless that would make more than `limit` in the last `window` seconds: a sliding
        window, so that no span of that length ever holds more. 0 when admitted, else the seconds until they will
        be (infinite when `units` is over `limit`: never). A store that cannot count is StateUnavailable: work
        that spends a budget is refused rather than admitted without one."""
        if units > limit:
            return float("inf")
        return self._strictly("admit", lambda: self._admit(key, limit, window, units), NOTHING_STARTS)

    def push(self, key: str, value: Any, limit: int, ttl: float) -> bool:
        """Append `value` to the list under `key`, keeping its last `limit` values for `ttl` seconds from this push,
        in one step (pushes from any number of processes are all kept); whether it was written."""
        try:
            raw = encode(value)
        except ValueError:
            return False
        return self._guard("push", lambda: self._push(key, raw, limit, ttl) or True, False)

    def items(self, key: str) -> list:
        """The list under `key`, oldest first; empty when there is none or the store cannot be read."""
        return [loads(raw) for raw in self._guard("items", lambda: self._items(key), [])]

    @contextmanager
    def locked(self, name: str, seconds: float = 10.0) -> Iterator[None]:
        """Hold the lock `name` in every process (every machine, with Redis) while the block rewrites what it guards,
        so that no two writers lose each other's change; a dead holder's lock expires after `seconds`.
        StateUnavailable while the store is down."""
        holder = uuid.uuid4().hex
        while not self.add(name, holder, seconds, strict=True):
            time.sleep(0.05)
        try:
            yield
        finally:
            self.delete_if(name, holder)

    # Backends implement these; values are JSON bytes, `expires` an epoch time.
    def _get(self, key: str) -> bytes | None: ...
    def _set(self, key: str, raw: bytes, ttl: float, cached: bool) -> None: ...
    def _add(self, key: str, raw: bytes, ttl: float) -> bool: ...
    def _delete(self, key: str) -> None: ...
    def _delete_if(self, key: str, raw: bytes) -> bool: ...
    def _admit(self, key: str, limit: int, window: float, units: int) -> float: ...
    def _push(self, key: str, raw: bytes, limit: int, ttl: float) -> None: ...
    def _items(self, key: str) -> list[bytes]: ...

    def close(self) -> None:
        """Release connections (the SQLite file stays)."""


# What the cached values take is kept as a running total, by triggers in the writes' own transactions: summing
# it, and finding what expired, scanned every row (bench/store.py measures a cached write among 20,000 answers).
# COUNTED sums it from the rows: once for a file made before the total, and again where the
# total drifted.
TOTAL = "SELECT bytes FROM totals WHERE name = 'cached'"
COUNTED = "SELECT COALESCE(SUM(size), 0) FROM entries WHERE cached = 1"
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY, value BLOB NOT NULL, expires REAL NOT NULL, size INTEGER NOT NULL, cached INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_expiry ON entries (cached, expires);
CREATE INDEX IF NOT EXISTS entries_by_expiry ON entries (expires);
CREATE TABLE IF NOT EXISTS hits (key TEXT NOT NULL, at REAL NOT NULL, expires REAL NOT NULL);
CREATE INDEX IF NOT EXISTS hits_by_key ON hits (key, at);
CREATE INDEX IF NOT EXISTS hits_by_expiry ON hits (expires);
CREATE TABLE IF NOT EXISTS totals (name TEXT PRIMARY KEY, bytes INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS lists (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, value BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS lists_by_key ON lists (key, seq);
INSERT OR IGNORE INTO totals SELECT 'cached', ({COUNTED});
CREATE TRIGGER IF NOT EXISTS cached_added AFTER INSERT ON entries WHEN new.cached = 1
    BEGIN UPDATE totals SET bytes = bytes + new.size WHERE name = 'cached'; END;
CREATE TRIGGER IF NOT EXISTS cached_removed AFTER DELETE ON entries WHEN old.cached = 1
    BEGIN UPDATE totals SET bytes = bytes - old.size WHERE name = 'cached'; END;
CREATE TRIGGER IF NOT EXISTS cached_changed AFTER UPDATE ON entries
    BEGIN UPDATE totals SET bytes = bytes + new.size * new.cached - old.size * old.cached WHERE name = 'cached'; END;
"""


INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL: deletes free pages that incremental_vacuum gives back
# The file on disk is held to the cached values' cap too (their keys, the indexes and the jobs and budget counters,
# which are never evicted, included), but never below this, what the empty tables and a few jobs take; and the
# write-ahead log is cut back to WAL_BYTES after each checkpoint.
FILE_FLOOR_BYTES = 2**20
FILE_SLACK_BYTES = 64 * 1024
WAL_BYTES = 16 * 2**20


class SQLiteStore(Store):
    """One SQLite file (WAL mode) shared by the processes of one host; a connection per thread."""

    errors = (sqlite3.Error,)

    def __init__(self, path: str | None, max_bytes: int, max_entry: int,
                 clock: Callable[[], float] | None = None) -> None:
        super().__init__(max_bytes, max_entry, clock)
        if path is None:  # a private file for this app alone (tests)
            folder = tempfile.mkdtemp(prefix="tensorviz-state-")
            path = os.path.join(folder, "state.sqlite3")
            weakref.finalize(self, _remove, folder)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._local = threading.local()
        self._run(self._create)

    @staticmethod
    def _create(db: sqlite3.Connection) -> None:
        """The tables, in one transaction: the total is counted once, before any write the triggers miss. A new
        file gives the pages its deletes free back to the disk (incremental auto-vacuum; a file made before it is
        converted once, where no other process holds it)."""
        if db.execute("PRAGMA auto_vacuum").fetchone()[0] != INCREMENTAL:
            db.execute(f"PRAGMA auto_vacuum = {INCREMENTAL}")  # takes effect now on an empty file, else at VACUUM
            if db.execute("PRAGMA page_count").fetchone()[0] > 0:
                try:
                    db.execute("VACUUM")
                except sqlite3.OperationalError:  # another process has it open in a transaction: next start
                    pass
        try:
            db.executescript(f"BEGIN IMMEDIATE; {SCHEMA} COMMIT;")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            # No busy timeout: SQLite's own handler sleeps for whole milliseconds, rising to 100 ms, when
            # another process writes; _run retries in steps of 0.1 ms instead.
            db = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
            self._local.db = db
            self._run(lambda db: db.execute("PRAGMA journal_mode=WAL"))
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"PRAGMA journal_size_limit = {WAL_BYTES}")  # the log is cut back to this after a checkpoint
        return db

    BUSY_SECONDS = 10.0  # how long a statement waits for another process's write before failing

    def _run(self, work):
        """`work(connection)`, retried while another process holds the write lock."""
        deadline = time.monotonic() + self.BUSY_SECONDS
        pause = 0.0001
        while True:
            try:
                return work(self._db())
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or time.monotonic() > deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 0.005)

    def _get(self, key: str) -> bytes | None:
        row = self._run(lambda db: db.execute("SELECT value, expires FROM entries WHERE key = ?", (key,)).fetchone())
        return row[0] if row and row[1] > self.clock() else None

    def _set(self, key: str, raw: bytes, ttl: float, cached: bool) -> None:
        # An upsert, not INSERT OR REPLACE: a replaced row fires no delete trigger, and the total would drift.
        self._run(lambda db: db.execute(
            "INSERT INTO entries VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
            "expires = excluded.expires, size = excluded.size, cached = excluded.cached",
            (key, raw, self.clock() + ttl, len(raw), int(cached))))
        if cached:
            self._run(self._evict)

    def _evict(self, db: sqlite3.Connection) -> None:
        """Drop what expired, then the cached values nearest their expiry while they are over the cap, or while the
        file on disk (keys and indexes included) is; the pages freed go back to the disk."""
        now = self.clock()
        db.execute("DELETE FROM lists WHERE key IN (SELECT substr(key, 6) FROM entries WHERE key LIKE 'list:%' "
                   "AND expires <= ?)", (now,))
        db.execute("DELETE FROM entries WHERE expires <= ?", (now,))
        db.execute("DELETE FROM hits WHERE expires <= ?", (now,))
        db.execute("PRAGMA incremental_vacuum")
        (total,) = db.execute(TOTAL).fetchone()
        # The pages a checkpoint has yet to cut off the file's end: a little room under the cap for them.
        room = max(self.max_bytes, FILE_FLOOR_BYTES) - FILE_SLACK_BYTES
        while total > self.max_bytes or self._file_bytes(db) > room:
            oldest = db.execute("SELECT key, size FROM entries WHERE cached = 1 ORDER BY expires LIMIT 1").fetchone()
            if oldest is None:
                if total > self.max_bytes:  # the total counts more than is kept (an older writer replaced rows)
                    db.execute(f"UPDATE totals SET bytes = ({COUNTED}) WHERE name = 'cached'")
                return
            db.execute("DELETE FROM entries WHERE key = ?", (oldest[0],))
            total -= oldest[1]
            db.execute("PRAGMA incremental_vacuum")

    @staticmethod
    def _file_bytes(db: sqlite3.Connection) -> int:
        """What the file takes on disk."""
        return db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]

    def _add(self, key: str, raw: bytes, ttl: float) -> bool:
        def add(db: sqlite3.Connection) -> bool:
            now = self.clock()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM entries WHERE key = ? AND expires <= ?", (key, now))
                added = db.execute("INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, 0)",
                                   (key, raw, now + ttl, len(raw))).rowcount == 1
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return added

        return self._run(add)

    def _delete(self, key: str) -> None:
        self._run(lambda db: db.execute("DELETE FROM entries WHERE key = ?", (key,)))

    def _delete_if(self, key: str, raw: bytes) -> bool:
        return self._run(lambda db: db.execute("DELETE FROM entries WHERE key = ? AND value = ? AND expires > ?",
                                               (key, raw, self.clock())).rowcount == 1)

    def _admit(self, key: str, limit: int, window: float, units: int) -> float:
        def admit(db: sqlite3.Connection) -> float:
            now = self.clock()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM hits WHERE key = ? AND at <= ?", (key, now - window))
                count = db.execute("SELECT COUNT(*) FROM hits WHERE key = ?", (key,)).fetchone()[0]
                room = count + units <= limit
                if room:
                    db.executemany("INSERT INTO hits VALUES (?, ?, ?)", [(key, now, now + window)] * units)
                # The hit whose leaving makes room: the (count + units - limit)-th oldest.
                freeing = None if room else db.execute(
                    "SELECT at FROM hits WHERE key = ? ORDER BY at LIMIT 1 OFFSET ?",
                    (key, count + units - limit - 1)).fetchone()[0]
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return 0.0 if room else freeing + window - now

        return self._run(admit)

    def _push(self, key: str, raw: bytes, limit: int, ttl: float) -> None:
        def push(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("INSERT INTO lists (key, value) VALUES (?, ?)", (key, raw))
                db.execute("DELETE FROM lists WHERE key = ? AND seq NOT IN (SELECT seq FROM lists WHERE key = ? "
                           "ORDER BY seq DESC LIMIT ?)", (key, key, limit))
                # The list lives as long as its last push: its expiry is an entry's, which eviction leaves alone.
                db.execute("INSERT INTO entries VALUES (?, x'', ?, 0, 0) ON CONFLICT (key) DO UPDATE SET "
                           "expires = excluded.expires", (f"list:{key}", self.clock() + ttl))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        self._run(push)

    def _items(self, key: str) -> list[bytes]:
        def items(db: sqlite3.Connection) -> list[bytes]:
            alive = db.execute("SELECT expires FROM entries WHERE key = ?", (f"list:{key}",)).fetchone()
            if alive is None or alive[0] <= self.clock():
                return []
            return [row[0] for row in db.execute("SELECT value FROM lists WHERE key = ? ORDER BY seq", (key,))]

        return self._run(items)

    def cached_bytes(self) -> int:
        """What the cached values take now (for tests and the README's figures)."""
        return self._run(lambda db: db.execute(TOTAL).fetchone()[0])

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


def _remove(folder: str) -> None:
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    os.rmdir(folder)


class RedisStore(Store):
    """Redis, shared by every machine. Cached values are indexed by expiry in a sorted set, with their
    sizes, so that the cap holds without relying on the server's eviction policy."""

    def __init__(self, url: str, max_bytes: int, max_entry: int, prefix: str = "tensorviz:",
                 clock: Callable[[], float] | None = None) -> None:
        import redis

        super().__init__(max_bytes, max_entry, clock)
        self.errors = (redis.RedisError,)
        self.client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self.prefix = prefix
        # One command per budget hit, timed by Redis's own clock (one for every machine) unless a clock was
        # injected: drop the hits older than the window, then record this one if there is room; the answer is how
        # long until there is.
        self._admit_script = self.client.register_script("""
            local now = tonumber(ARGV[5])
            if not now then
                local t = redis.call('TIME')
                now = t[1] + t[2] / 1e6
            end
            local window, limit, units = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4])
            redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
            local count = redis.call('ZCARD', KEYS[1])
            if count + units > limit then
                local i = count + units - limit - 1  -- the hit whose leaving makes room
                local freeing = redis.call('ZRANGE', KEYS[1], i, i, 'WITHSCORES')[2]
                return tostring(tonumber(freeing) + window - now)
            end
            for n = 1, units do redis.call('ZADD', KEYS[1], now, ARGV[3] .. ':' .. n) end
            redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
            return '0'""")
        self._delete_if_script = self.client.register_script("""
            if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
            return 0""")
        self.index = prefix + "cached:by-expiry"
        self.sizes = prefix + "cached:sizes"
        self.total = prefix + "cached:bytes"

    def _get(self, key: str) -> bytes | None:
        return self.client.get(self.prefix + key)

    def _set(self, key: str, raw: bytes, ttl: float, cached: bool) -> None:
        name = self.prefix + key
        if not cached:
            self.client.set(name, raw, px=int(ttl * 1000))
            return
        with self.client.pipeline() as pipe:
            pipe.set(name, raw, px=int(ttl * 1000))
            pipe.zadd(self.index, {name: self.clock() + ttl})
            pipe.hget(self.sizes, name)
            pipe.hset(self.sizes, name, len(raw))
            _, _, previous, _ = pipe.execute()
        total = self.client.incrby(self.total, len(raw) - int(previous or 0))
        if total > self.max_bytes or self.client.zcount(self.index, 0, self.clock()):
            self._evict()

    def _evict(self) -> None:
        """Forget what expired, then drop the values nearest their expiry while over the cap."""
        expired = self.client.zrangebyscore(self.index, 0, self.clock())
        self._drop(expired, delete=False)
        while int(self.client.get(self.total) or 0) > self.max_bytes:
            popped = self.client.zpopmin(self.index, 1)
            if not popped:
                break
            self._drop([name for name, _ in popped], delete=True)

    def _drop(self, names: list[bytes], delete: bool) -> None:
        if not names:
            return
        sizes = self.client.hmget(self.sizes, names)
        with self.client.pipeline() as pipe:
            if delete:
                pipe.delete(*names)
            pipe.zrem(self.index, *names)
            pipe.hdel(self.sizes, *names)
            pipe.decrby(self.total, sum(int(s or 0) for s in sizes))
            pipe.execute()

    def _add(self, key: str, raw: bytes, ttl: float) -> bool:
        return bool(self.client.set(self.prefix + key, raw, px=int(ttl * 1000), nx=True))

    def _delete(self, key: str) -> None:
        self.client.delete(self.prefix + key)

    def _delete_if(self, key: str, raw: bytes) -> bool:
        return bool(self._delete_if_script(keys=[self.prefix + key], args=[raw]))

    def _push(self, key: str, raw: bytes, limit: int, ttl: float) -> None:
        name = self.prefix + "list:" + key
        with self.client.pipeline() as pipe:  # MULTI/EXEC: one step, whoever else pushes
            pipe.rpush(name, raw)
            pipe.ltrim(name, -limit, -1)
            pipe.pexpire(name, int(ttl * 1000))
            pipe.execute()

    def _items(self, key: str) -> list[bytes]:
        return self.client.lrange(self.prefix + "list:" + key, 0, -1)

    def _admit(self, key: str, limit: int, window: float, units: int) -> float:
        args = [window, limit, uuid.uuid4().hex, units]
        if self.injected_clock is not None:
            args.append(repr(self.injected_clock()))
        wait = self._admit_script(keys=[self.prefix + "hits:" + key], args=args)
        return float(wait)

    def cached_bytes(self) -> int:
        return int(self.client.get(self.total) or 0)

    def close(self) -> None:
        self.client.close()


class SharedState:
    """Flask extension: the app's store, chosen by its configuration."""

    def init_app(self, app) -> None:
        max_bytes = app.config["STATE_MAX_BYTES"]
        max_entry = app.config["STATE_MAX_ENTRY_BYTES"]
        url = app.config.get("REDIS_URL")
        if url:
            store: Store = RedisStore(url, max_bytes, max_entry)
        else:
            path = app.config["STATE_PATH"]
            if path == "":
                path = os.path.join(app.instance_path, "state.sqlite3")
            store = SQLiteStore(path, max_bytes, max_entry)
        parts(app).store = store

    @property
    def store(self) -> Store:
        return parts().store
