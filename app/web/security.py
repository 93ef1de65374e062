"""Headers every response carries, and the reverse-proxy fix when the app is told it is behind one."""

from flask import Flask, Response, current_app, request
from flask.sessions import SessionInterface
from werkzeug.middleware.proxy_fix import ProxyFix

# No inline script or style anywhere: scripts and styles come from this site's own files.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "font-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])
HSTS = "max-age=31536000; includeSubDomains"


# Set on every response here, and nowhere else, so they are added in one step without checking for them.
HEADERS = [("Content-Security-Policy", CONTENT_SECURITY_POLICY), ("X-Content-Type-Options", "nosniff"),
           ("Referrer-Policy", "strict-origin-when-cross-origin"), ("X-Frame-Options", "DENY")]


# Cross-origin reads: the API's GETs and the model files are public data, readable by a page of any site (as
# datasette's --cors allows); nothing that runs a recipe is, so no other site's page can spend this server's
# compute through its visitors (a POST of JSON needs a preflight, which no answer here grants).
CORS_READ = [("Access-Control-Allow-Origin", "*"), ("Access-Control-Expose-Headers", "ETag, Location, Retry-After")]


def public_read() -> bool:
    """A GET of stored data (the API's reads, a model's files): not one that starts a run (a lab's GET endpoint,
    marked by the API as spending compute)."""
    if request.method not in ("GET", "HEAD"):
        return False
    view = current_app.view_functions.get(request.endpoint)
    if getattr(view, "spends_compute", False):
        return False
    return request.path.startswith("/api/") or request.endpoint == "downloads.model_file"


def secure_headers(response: Response) -> Response:
    response.headers.extend(HEADERS)
    if public_read():
        response.headers.extend(CORS_READ)
    if request.environ.get("wsgi.url_scheme") == "https":  # request.is_secure, without the proxy's cost
        response.headers["Strict-Transport-Security"] = HSTS
    return response


class NoSessions(SessionInterface):
    """Nothing here keeps a session: no cookie is read or signed on any request."""

    def open_session(self, app, request):
        return None  # Flask then uses a null session

    def save_session(self, app, session, response) -> None:
        return None


def init_app(app: Flask) -> None:
    app.session_interface = NoSessions()
    app.after_request(secure_headers)
    proxies = app.config["PROXY_FIX"]
    if proxies:
        # Trust X-Forwarded-For/-Proto/-Host from exactly this many proxies in front of the app.
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies)
