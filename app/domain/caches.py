"""Every cache layer of the app, named once: what it keeps, under which key, how far it may grow, and what lets an
entry go. An in-process layer is made here alone (`lru`), but for the runs layer, which a recipe process makes with the
shared runs folder beneath it (compute/shared_runs.py); docs/operations.md's table of layers is held to LAYERS
(tests/test_docs.py).

A request meets the layers in the order below, from the browser down; each key names what the answer depends on (content
hashes, the catalog it was made from), so that a layer is never read stale by a later release or a changed file.
bench/caches.py measures what each in-process layer buys (bench/README.md, "Cache layers").
"""

from dataclasses import dataclass

from .lru import SizedLRU


@dataclass(frozen=True)
class Layer:
    """One cache layer. `size` is its fixed bound in bytes where no setting sets it (None: `bound` says)."""

    name: str
    keeps: str
    key: str
    bound: str
    let_go: str
    where: str
    size: int | None = None


LAYERS: dict[str, Layer] = {layer.name: layer for layer in (
    Layer("proxy", "whole answers to plain GETs of pages, manifests and the catalog, in front of the app (production)",
          "the request's path", "`PROXY_CACHE_SECONDS` each (`X-Accel-Expires`)",
          "its seconds passing; nginx refreshes it in the background", "web/proxy.py, deploy/nginx.conf.in"),
    Layer("responses", "the same answers, per process, before Flask routes the request",
          "scheme, path and the encoding chosen", "`RESPONSE_CACHE_BYTES`",
          "a new catalog (a model's files changed on disk); least recently used first", "web/response_cache.py"),
    Layer("pages", "rendered model pages, per process", "the slug, case, step and checkpoint state",
          "32 MiB", "a new catalog; least recently used first", "web/pages.py", size=32 * 2**20),
    Layer("compressed", "compressed bodies, per process", "the body's ETag (its hash) and the encoding",
          "`COMPRESS_CACHE_BYTES`", "least recently used first (a key names its content: never stale)",
          "web/compression.py"),
    Layer("answers", "verification reports, live runs and rendered model pages, shared by every process (and "
          "machine, with Redis)", "the run key (the hashes of the recording, every recipe file and the checkpoint's "
          "files; torch, the seed) and the request; a page's: those hashes, the page version and its view",
          "`STATE_MAX_BYTES`, `STATE_MAX_ENTRY_BYTES`, `CACHE_SECONDS`",
          "its seconds passing; over the cap, those nearest their expiry", "services/cache.py, services/state.py"),
    Layer("unwritten", "answers the shared store refused while it was down, written back when it answers",
          "the store's key", "4 × `STATE_MAX_ENTRY_BYTES`", "written back, or its expiry passing",
          "services/state.py"),
    Layer("runs", "the plain runs What if? made in a recipe process (their outputs), for the next change to the "
          "same input", "the run key, the entry and the input", "64 MiB per recipe process",
          "least recently used first; the process ending", "compute/worker.py", size=64 * 2**20),
    Layer("shared runs", "the same runs in files that every recipe process of the machine reads (another web "
          "process's, a Celery worker's)", "a hash of the runs layer's key, checked against the key in the file",
          "`SHARED_RUNS_MAX_BYTES` in all (`SHARED_RUNS_DIR`)",
          "least recently written or read first (a key names its content: never stale)", "compute/shared_runs.py"),
)}


def lru(name: str, max_bytes: int | None = None) -> SizedLRU:
    """The in-process store of layer `name`, bounded in bytes (`max_bytes` where a setting sets the bound, else the
    layer's own size): the one place a cache layer is made."""
    layer = LAYERS[name]
    if max_bytes is None and layer.size is None:
        raise ValueError(f"the {name} layer's bound is a setting ({layer.bound}): pass it")
    return SizedLRU(layer.size if max_bytes is None else max_bytes)
