"""Response compression, once per content: the compressed bytes are kept in this process, keyed by the
content hash of what was compressed and the encoding, so that the same manifest, page or report is
compressed once and then served from memory. Every strong ETag this app sets is a hash of the body, so a
response that has one is keyed by it; any other body is hashed here (a small fraction of compressing)."""

import gzip
import hashlib
from functools import lru_cache

import brotli
from flask import Flask, Response, request
from werkzeug.http import parse_accept_header

from ..domain import caches
from ..services.parts import parts

ENCODINGS = ("br", "gzip")  # in order of preference when the client accepts both equally
MIN_SIZE = 500  # smaller bodies gain nothing


class CompressedBodies:
    """The compressed bodies, in a bounded LRU, and which media types are compressed."""

    def __init__(self, max_bytes: int, mimetypes: list[str]) -> None:
        self.mimetypes = frozenset(mimetypes)
        self.kept = caches.lru("compressed", max_bytes)

    def get(self, body: bytes, encoding: str, etag: str | None = None) -> bytes:
        key = (etag or hashlib.sha256(body).hexdigest(), encoding)
        compressed = self.kept.get(key)
        if compressed is None:
            compressed = brotli.compress(body, quality=5) if encoding == "br" else gzip.compress(body, 6, mtime=0)
            self.kept.put(key, compressed, len(compressed))
        return compressed


def compress(response: Response) -> Response:
    """Compress what is worth compressing for a client that accepts it; the compressed representation's ETag is
    the plain one with the encoding appended (conditional.py answers conditional requests on either). Headers
    are read and written directly: this runs on every response."""
    state = parts().compressed
    headers = response.headers
    if headers.get("Content-Type", "").split(";", 1)[0] not in state.mimetypes:
        return response
    vary = headers.get("Vary")
    if not vary:
        headers["Vary"] = "Accept-Encoding"
    elif "accept-encoding" not in vary.lower():
        headers["Vary"] = f"{vary}, Accept-Encoding"
    encoding = chosen_encoding(request.environ.get("HTTP_ACCEPT_ENCODING", ""))
    if (encoding is None or not 200 <= response.status_code < 300 or response.is_streamed
            or "Content-Encoding" in headers):
        return response
    response.direct_passthrough = False
    body = response.get_data()
    if len(body) < MIN_SIZE:
        return response
    etag = headers.get("ETag")
    strong = etag is not None and not etag.startswith("W/")
    response.set_data(state.get(body, encoding, etag if strong else None))
    headers["Content-Encoding"] = encoding
    if etag:
        headers["ETag"] = f'{etag[:-1]}-{encoding}"'
    return response


@lru_cache(maxsize=64)
def chosen_encoding(accept_encoding: str) -> str | None:
    """The best encoding this client accepts, by its q-values (browsers send few distinct headers)."""
    return parse_accept_header(accept_encoding).best_match(ENCODINGS)


def init_app(app: Flask) -> None:
    parts(app).compressed = CompressedBodies(app.config["COMPRESS_CACHE_BYTES"],
                                                              app.config["COMPRESS_MIMETYPES"])
    app.after_request(compress)
