"""Serving in production: security headers, compression, conditional GET and fingerprinted assets."""

import re

import pytest

from app import create_app
from app.config import TestConfig
from app.security import CONTENT_SECURITY_POLICY


@pytest.mark.parametrize("path", ["/", "/models/bert", "/api/models", "/api/models/nope", "/models/nope",
                                  "/models/bert/0c48027dcf5a807d/model.py"])
def test_every_response_carries_the_security_headers(client, path):
    headers = client.get(path).headers
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "strict-origin-when-cross-origin"
    assert "Strict-Transport-Security" not in headers


def test_hsts_only_over_https(client):
    assert "Strict-Transport-Security" in client.get("/", base_url="https://localhost").headers


def test_forwarded_proto_is_trusted_only_when_a_proxy_is_declared():
    behind = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
    plain = create_app(TestConfig).test_client()
    assert "Strict-Transport-Security" not in plain.get("/", headers=behind).headers
    proxied = create_app({"TESTING": True, "PROXY_FIX": 1}).test_client()
    assert "Strict-Transport-Security" in proxied.get("/", headers=behind).headers


def test_no_inline_script_or_style_in_the_pages(client):
    for path in ("/", "/models/bert", "/models/nope"):
        page = client.get(path).get_data(as_text=True)
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page)
        assert "<style" not in page and " style=" not in page


def test_json_and_pages_are_compressed(client):
    for path in ("/api/models/bert", "/models/bert", "/api/models"):
        response = client.get(path, headers={"Accept-Encoding": "gzip"})
        assert response.headers["Content-Encoding"] == "gzip"
        assert "Accept-Encoding" in response.headers["Vary"]


def test_every_json_get_answers_304_to_its_etag(client):
    for path in ("/api/models", "/api/models/bert", "/api/models/bert/files"):
        first = client.get(path, headers={"Accept-Encoding": "gzip"})
        etag = first.headers["ETag"]
        again = client.get(path, headers={"Accept-Encoding": "gzip", "If-None-Match": etag})
        assert again.status_code == 304, path


def test_assets_are_fingerprinted_and_cached_for_a_year(app, client):
    page = client.get("/models/bert").get_data(as_text=True)
    version = app.extensions["tensorviz.assets"]
    urls = re.findall(r'"(/assets/[^"]+)"', page)
    assert {f"/assets/{version}/css/site.css", f"/assets/{version}/js/model-page.js"} <= set(urls)
    response = client.get(f"/assets/{version}/js/labs/masked-lm.js", headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200 and response.headers["Content-Encoding"] == "gzip"
    assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    stale = client.get("/assets/000000000000/js/labs/masked-lm.js")
    assert stale.status_code == 200 and stale.headers["Cache-Control"] == "no-cache"


@pytest.mark.parametrize("path", ["../app/config.py", "%2e%2e/wsgi.py", "..%2fwsgi.py", "/etc/passwd", "nope.js"])
def test_assets_outside_static_are_404(app, client, path):
    response = client.get(f"/assets/{app.extensions['tensorviz.assets']}/{path}", follow_redirects=True)
    assert response.status_code == 404


def test_the_same_bytes_are_compressed_once_per_encoding(app, client, monkeypatch):
    import brotli

    calls = []
    real = brotli.compress

    def counted(data, **options):
        calls.append(len(data))
        return real(data, **options)

    monkeypatch.setattr("app.compression.brotli.compress", counted)
    bodies = {client.get("/api/models/bert", headers={"Accept-Encoding": "br"}).data for _ in range(5)}
    assert len(bodies) == 1 and brotli.decompress(bodies.pop()) == client.get("/api/models/bert").data
    assert len(calls) == 1
    client.get("/api/models/bert", headers={"Accept-Encoding": "gzip"})
    assert len(calls) == 1  # gzip is its own entry; brotli was not called again
    first = client.get("/api/models/bert", headers={"Accept-Encoding": "br"})
    assert first.headers["ETag"].endswith('-br"')
    again = client.get("/api/models/bert", headers={"Accept-Encoding": "br", "If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304
