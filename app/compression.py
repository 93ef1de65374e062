"""Response compression, once per content: the compressed bytes are kept in this process, keyed by the
content hash of what was compressed and the encoding, so that the same manifest, page or report is
compressed once and then served from memory. Every strong ETag this app sets is a hash of the body, so a
response that has one is keyed by it; any other body is hashed here (a small fraction of compressing)."""

import gzip
import hashlib
import threading
from collections import OrderedDict

import brotli
from flask import Flask, Response, current_app, request

ENCODINGS = ("br", "gzip")  # in order of preference when the client accepts both equally
MIN_SIZE = 500  # smaller bodies gain nothing


class CompressedBodies:
    """A bounded LRU of compressed bodies."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.items: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, body: bytes, encoding: str, etag: str | None = None) -> bytes:
        key = (etag or hashlib.sha256(body).hexdigest(), encoding)
        with self.lock:
            found = self.items.get(key)
            if found is not None:
                self.items.move_to_end(key)
                return found
        compressed = brotli.compress(body, quality=5) if encoding == "br" else gzip.compress(body, 6, mtime=0)
        with self.lock:
            if key not in self.items and len(compressed) <= self.max_bytes:
                self.items[key] = compressed
                self.size += len(compressed)
                while self.size > self.max_bytes:
                    _, dropped = self.items.popitem(last=False)
                    self.size -= len(dropped)
        return compressed


def compress(response: Response) -> Response:
    """Compress what is worth compressing for a client that accepts it; honour conditional requests on the
    compressed representation (its ETag is the plain one with the encoding appended)."""
    if response.mimetype not in current_app.config["COMPRESS_MIMETYPES"]:
        return response
    response.vary.add("Accept-Encoding")
    encoding = request.accept_encodings.best_match(ENCODINGS)
    if (encoding is None or not 200 <= response.status_code < 300 or response.is_streamed
            or "Content-Encoding" in response.headers):
        return response
    response.direct_passthrough = False
    body = response.get_data()
    if len(body) < MIN_SIZE:
        return response
    etag, weak = response.get_etag()
    compressed = current_app.extensions["tensorviz.compressed"].get(body, encoding, None if weak else etag)
    response.set_data(compressed)
    response.headers["Content-Encoding"] = encoding
    if etag:
        response.set_etag(f"{etag}-{encoding}", weak=weak)
        if request.method in ("GET", "HEAD"):
            response.make_conditional(request)
    return response


def init_app(app: Flask) -> None:
    app.extensions["tensorviz.compressed"] = CompressedBodies(int(app.config["COMPRESS_CACHE_BYTES"]))
    app.after_request(compress)
