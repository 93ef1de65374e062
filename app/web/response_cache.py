"""Whole responses to plain GETs of what the model files alone decide (a stored manifest, a model page as
first shown), kept per process and answered again, byte for byte, before Flask sees the request.

A route declares it with @cacheable where it is declared, when its answer depends on nothing but the
catalog, the path and the encoding chosen (and says which of its answers read more). The answer it
produced, after every after_request hook (compression, ETag, security headers), is kept under the path
and encoding, tagged with the catalog it was made from, and served only while that catalog is still the
current one: a file changed on disk ends it with the catalog's next reload. Requests
that ask anything more (a query string, a body, a conditional or range header, any method but GET) always
reach Flask.

The same answers carry `X-Accel-Expires: PROXY_CACHE_SECONDS`, nginx's header for how long it may keep an
answer: the production proxy (deploy/nginx.conf.in) keeps them that long and serves them without the web tier,
and passes to the app every request this module would pass to Flask (the same CONDITIONS)."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import wraps

from flask import Flask, Response, current_app, request

from ..domain import caches
from ..domain.catalog import LiveCatalog
from ..services.parts import parts
from .compression import chosen_encoding

# A request with any of these is answered by Flask (conditional.py), never from what is kept.
CONDITIONS = ("HTTP_IF_NONE_MATCH", "HTTP_IF_MATCH", "HTTP_IF_MODIFIED_SINCE", "HTTP_IF_UNMODIFIED_SINCE",
              "HTTP_IF_RANGE", "HTTP_RANGE")
KEEP = "tensorviz.keep"  # set in the WSGI environ by a @cacheable view that answered
PROXY_EXPIRES = "X-Accel-Expires"  # nginx reads it and does not pass it on; a client without nginx ignores it


def cacheable(unless: Callable[..., bool] | None = None) -> Callable:
    """Declare that the view's answer depends only on the catalog, its path and the encoding chosen, so
    that a plain GET of it is kept; `unless(**view_args)` names the answers that read more (a checkpoint's
    state on disk). An answer that raised (a 404) is never kept. tests/test_serving.py checks every
    declared route: an answer served again equals the one an app that keeps nothing makes."""
    def declare(view: Callable) -> Callable:
        @wraps(view)
        def answer(*args, **view_args):  # positional too: prerender calls a view as a function
            response = view(*args, **view_args)
            if unless is None or not unless(*args, **view_args):
                request.environ[KEEP] = True
            return response

        answer.cacheable = True
        return answer

    return declare


@dataclass(frozen=True)
class KeptResponse:
    """A whole answer as it was sent, and the catalog it was made from (kept while that catalog is current)."""

    catalog: object  # the catalog the answer was made from
    status: str
    headers: list[tuple[str, str]]
    body: bytes


def cache_key(environ: dict) -> tuple | None:
    """What a plain GET's answer is kept under, or None for a request that must reach Flask."""
    if (environ["REQUEST_METHOD"] != "GET" or environ.get("QUERY_STRING")
            or environ.get("CONTENT_LENGTH", "0") not in ("", "0") or "HTTP_TRANSFER_ENCODING" in environ
            or any(name in environ for name in CONDITIONS)):
        return None
    return (environ["wsgi.url_scheme"], environ.get("SCRIPT_NAME", ""), environ.get("PATH_INFO", ""),
            chosen_encoding(environ.get("HTTP_ACCEPT_ENCODING", "")))


class ResponseCache:
    """WSGI middleware in front of the Flask app (inside any ProxyFix, so the scheme is the client's)."""

    def __init__(self, wsgi_app: Callable, live_catalog: LiveCatalog, max_bytes: int) -> None:
        self.wsgi_app = wsgi_app
        self.live_catalog = live_catalog
        self.kept = caches.lru("responses", max_bytes)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        key = cache_key(environ)
        if key is None:
            return self.wsgi_app(environ, start_response)
        catalog = self.live_catalog.current()
        kept = self.kept.get(key)
        if kept is not None:
            if kept.catalog is catalog:
                start_response(kept.status, list(kept.headers))
                return [kept.body]
            self.kept.discard(key)

        answered = {}

        def capture(status: str, headers: list, exc_info=None):
            answered["status"], answered["headers"] = status, list(headers)
            return start_response(status, headers, exc_info)

        body = self.wsgi_app(environ, capture)
        if not environ.get(KEEP) or not answered.get("status", "").startswith("200 "):
            return body
        try:
            data = b"".join(body)
        finally:
            if hasattr(body, "close"):
                body.close()
        # Tagged with the catalog current before the view ran: if the view already saw a newer one, the
        # entry is merely dropped on its next use.
        self.kept.put(key, KeptResponse(catalog, answered["status"], answered["headers"], data), len(data))
        return [data]


def proxy_bypass() -> str:
    """The nginx variables that send a request past what the proxy keeps: what cache_key refuses (a query
    string, a body, a conditional or range header; nginx keeps the answers to GET and HEAD alone)."""
    return " ".join(["$args", "$http_content_length", "$http_transfer_encoding",
                     *("$" + name.lower() for name in CONDITIONS)])


def mark_for_proxy(response: Response) -> Response:
    """Let the proxy keep an answer this process would keep (a @cacheable view's plain GET, 200)."""
    seconds = current_app.config["PROXY_CACHE_SECONDS"]
    if seconds and request.environ.get(KEEP) and response.status_code == 200 and cache_key(request.environ):
        response.headers[PROXY_EXPIRES] = str(seconds)
    return response


def init_app(app: Flask) -> None:
    app.after_request(mark_for_proxy)
    max_bytes = app.config["RESPONSE_CACHE_BYTES"]
    if max_bytes:
        app.wsgi_app = ResponseCache(app.wsgi_app, parts(app).catalog, max_bytes)
