"""Headers every response carries, and the reverse-proxy fix when the app is told it is behind one."""

from flask import Flask, Response, request
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


def secure_headers(response: Response) -> Response:
    headers = response.headers
    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "strict-origin-when-cross-origin")
    headers.setdefault("X-Frame-Options", "DENY")
    if request.is_secure:
        headers.setdefault("Strict-Transport-Security", HSTS)
    return response


def init_app(app: Flask) -> None:
    app.after_request(secure_headers)
    proxies = int(app.config["PROXY_FIX"])
    if proxies:
        # Trust X-Forwarded-For/-Proto/-Host from exactly this many proxies in front of the app.
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies)
