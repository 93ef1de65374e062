"""Conditional GETs, answered once for every response that carries a strong ETag (the API, the pages, the
model files, the assets), as RFC 9110 section 13.2.2 orders them: If-Match first (a strong comparison; `*`
matches a resource that exists), then If-None-Match (a weak comparison; `*` too). A resource's current
ETags are the plain representation's and each encoding's (compression appends the encoding), so a client
holding either kind is answered alike. This runs after compression, when the ETag is final."""

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import PreconditionFailed
from werkzeug.http import parse_etags, unquote_etag

from .compression import ENCODINGS
from .errors import handle_http_error


def current_etags(etag: str) -> tuple[str, ...]:
    """Every strong ETag of this content: the plain representation's and each encoded one's."""
    plain = next((etag[: -len(e) - 1] for e in ENCODINGS if etag.endswith(f"-{e}")), etag)
    return (plain, *(f"{plain}-{e}" for e in ENCODINGS))


def precondition(environ: dict, etag: str) -> int | None:
    """412, 304, or None to send the representation, for a GET or HEAD of a resource that exists."""
    tags = current_etags(etag)
    if "HTTP_IF_MATCH" in environ:
        listed = parse_etags(environ["HTTP_IF_MATCH"])
        if not listed.star_tag and not any(listed.contains(tag) for tag in tags):
            return 412
    if "HTTP_IF_NONE_MATCH" in environ:
        listed = parse_etags(environ["HTTP_IF_NONE_MATCH"])
        if listed.star_tag or any(listed.contains_weak(tag) for tag in tags):
            return 304
    return None


def conditional(response: Response) -> Response:
    """Answer If-Match and If-None-Match on a successful GET or HEAD: 304 without a body, or 412 as every error
    is answered (JSON under /api, a page elsewhere) and never the representation it did not match."""
    environ = request.environ
    if (request.method not in ("GET", "HEAD") or response.status_code != 200
            or ("HTTP_IF_MATCH" not in environ and "HTTP_IF_NONE_MATCH" not in environ)):
        return response
    header = response.headers.get("ETag")
    if header is None or header.startswith("W/"):
        return response
    status = precondition(environ, unquote_etag(header)[0])
    if status == 304:
        response.status_code = 304
        response.set_data(b"")
        for name in ("Content-Length", "Content-Encoding"):
            response.headers.pop(name, None)
    elif status == 412:
        refused = current_app.make_response(handle_http_error(PreconditionFailed(
            f"If-Match names no current representation; the ETag is {header}")))
        for name, value in response.headers.items():  # the security headers, Vary and the ETag; not the body's
            if not name.lower().startswith("content-") and name.lower() not in ("cache-control", "expires"):
                refused.headers[name] = value
        return refused
    return response


def init_app(app: Flask) -> None:
    """Register before compression: after_request hooks run last-registered first, so this sees its ETag."""
    app.after_request(conditional)
