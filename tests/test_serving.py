"""Serving in production: security headers, compression, conditional GET and fingerprinted assets."""

import re

import pytest

from app.services.config import TestConfig
from app.services.parts import parts
from app.web.response_cache import ResponseCache
from app.web.security import CONTENT_SECURITY_POLICY

from .conftest import CATALOG_SLUGS, Apps


class Uncached(TestConfig):
    RESPONSE_CACHE_BYTES = 0


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


def test_forwarded_proto_is_trusted_only_when_a_proxy_is_declared(make_app):
    behind = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
    plain = make_app(TestConfig).test_client()
    assert "Strict-Transport-Security" not in plain.get("/", headers=behind).headers
    proxied = make_app({"TESTING": True, "PROXY_FIX": 1}).test_client()
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
    version = parts(app).assets
    urls = re.findall(r'"(/assets/[^"]+)"', page)
    assert {f"/assets/{version}/css/site.css", f"/assets/{version}/js/model-page.js"} <= set(urls)
    response = client.get(f"/assets/{version}/js/labs/masked-lm.js", headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200 and response.headers["Content-Encoding"] == "gzip"
    assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    stale = client.get("/assets/000000000000/js/labs/masked-lm.js")
    assert stale.status_code == 200 and stale.headers["Cache-Control"] == "no-cache"


@pytest.mark.parametrize("path", ["../app/config.py", "%2e%2e/wsgi.py", "..%2fwsgi.py", "/etc/passwd", "nope.js"])
def test_assets_outside_static_are_404(app, client, path):
    response = client.get(f"/assets/{parts(app).assets}/{path}", follow_redirects=True)
    assert response.status_code == 404


def test_the_same_bytes_are_compressed_once_per_encoding(make_app, monkeypatch):
    import brotli

    client = make_app(Uncached).test_client()  # every request reaches Flask

    calls = []
    real = brotli.compress

    def counted(data, **options):
        calls.append(len(data))
        return real(data, **options)

    monkeypatch.setattr("app.web.compression.brotli.compress", counted)
    bodies = {client.get("/api/models/bert", headers={"Accept-Encoding": "br"}).data for _ in range(5)}
    assert len(bodies) == 1 and brotli.decompress(bodies.pop()) == client.get("/api/models/bert").data
    assert len(calls) == 1
    client.get("/api/models/bert", headers={"Accept-Encoding": "gzip"})
    assert len(calls) == 1  # gzip is its own entry; brotli was not called again
    first = client.get("/api/models/bert", headers={"Accept-Encoding": "br"})
    assert first.headers["ETag"].endswith('-br"')
    again = client.get("/api/models/bert", headers={"Accept-Encoding": "br", "If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304


class CountingApp:
    """The Flask app behind the response cache, counting the requests that reach it."""

    def __init__(self, app) -> None:
        self.cache = app.wsgi_app
        self.inner = self.cache.wsgi_app
        self.calls = 0
        self.cache.wsgi_app = self

    def __call__(self, environ, start_response):
        self.calls += 1
        return self.inner(environ, start_response)


@pytest.mark.parametrize("path", ["/models/bert", "/api/models", "/api/models/bert"])
@pytest.mark.parametrize("encoding", ["br", "gzip", ""])
def test_a_plain_get_is_answered_again_byte_for_byte_without_reaching_flask(app, client, path, encoding):
    counting = CountingApp(app)
    headers = {"Accept-Encoding": encoding} if encoding else {}
    first = client.get(path, headers=headers)
    again = client.get(path, headers=headers)
    assert counting.calls == 1
    assert first.status_code == again.status_code == 200
    assert list(first.headers) == list(again.headers) and first.data == again.data
    assert again.headers.get("Content-Encoding") == (encoding or None)
    assert again.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    # an encoding is its own entry, never another client's bytes
    other = client.get(path, headers={"Accept-Encoding": "gzip" if encoding == "br" else "br"})
    assert counting.calls == 2 and other.data != first.data


@pytest.mark.parametrize("request_args", [
    {"query_string": {"case": "nope"}},
    {"headers": {"If-None-Match": '"x"'}},
    {"headers": {"Range": "bytes=0-9"}},
    {"data": b"{}", "content_type": "application/json"},
    {"method": "HEAD"},
    {"method": "OPTIONS"},
])
def test_a_request_that_asks_more_always_reaches_flask(app, client, request_args):
    counting = CountingApp(app)
    args = {"method": "GET"} | request_args
    for _ in range(2):
        client.open("/models/bert", **args)
    assert counting.calls == 2


def test_the_proxy_may_keep_exactly_the_answers_this_process_keeps(make_app, app, client):
    """X-Accel-Expires (nginx's) on a kept answer, never on what reaches Flask every time nor on errors."""
    assert client.get("/api/models/bert").headers["X-Accel-Expires"] == "1"
    assert client.get("/api/models/bert").headers["X-Accel-Expires"] == "1"  # the kept copy says so too
    assert client.get("/models/bert", headers={"Accept-Encoding": "br"}).headers["X-Accel-Expires"] == "1"
    for args in ({"query_string": {"case": "nope"}}, {"headers": {"If-None-Match": '"x"'}}, {"method": "HEAD"}):
        assert "X-Accel-Expires" not in client.open("/models/bert", **({"method": "GET"} | args)).headers, args
    for path in ("/api/models/nope", "/models/bert-base", "/api/models/bert/files"):
        assert "X-Accel-Expires" not in client.get(path).headers, path
    assert "X-Accel-Expires" not in client.post("/api/models/bert/runs", json={"input_ids": [1, 4, 2]}).headers
    kept_nowhere = make_app({"TESTING": True, "PROXY_CACHE_SECONDS": 0}).test_client()
    assert "X-Accel-Expires" not in kept_nowhere.get("/api/models/bert").headers


def test_conditional_requests_still_answer_304_once_the_answer_is_kept(app, client):
    counting = CountingApp(app)
    etag = client.get("/api/models/bert", headers={"Accept-Encoding": "br"}).headers["ETag"]
    client.get("/api/models/bert", headers={"Accept-Encoding": "br"})
    again = client.get("/api/models/bert", headers={"Accept-Encoding": "br", "If-None-Match": etag})
    assert again.status_code == 304 and counting.calls == 2


def test_errors_and_pages_that_read_a_checkpoint_are_not_kept(app, client):
    counting = CountingApp(app)
    for path in ("/api/models/nope", "/models/nope", "/models/bert-base"):
        for _ in range(2):
            client.get(path)
    assert counting.calls == 6
    assert len(counting.cache.kept) == 0


def test_a_changed_model_file_ends_the_kept_answers(make_app, tree):
    import json
    import time

    tree.add("bert")
    app = make_app(tree.config(TESTING=True, CATALOG_RELOAD_SECONDS=0.05))
    client = app.test_client()
    before = client.get("/api/models/bert").get_json()
    page = client.get("/models/bert").get_data(as_text=True)
    assert client.get("/api/models/bert").get_json() == before
    path = tree.manifests / "bert" / "manifest.json"
    path.write_text(json.dumps(before | {"title": "A retitled BERT"}))
    time.sleep(0.1)
    assert client.get("/api/models/bert").get_json()["title"] == "A retitled BERT"
    assert "A retitled BERT" in client.get("/models/bert").get_data(as_text=True)
    assert "A retitled BERT" not in page


def test_the_scheme_behind_a_proxy_is_part_of_the_key(make_app):
    proxied = make_app({"TESTING": True, "PROXY_FIX": 1}).test_client()
    assert "Strict-Transport-Security" not in proxied.get("/").headers
    over_https = proxied.get("/", headers={"X-Forwarded-Proto": "https"})
    assert "Strict-Transport-Security" in over_https.headers
    assert "Strict-Transport-Security" not in proxied.get("/").headers


def test_kept_answers_stay_under_their_bound(make_app):
    app = make_app(TestConfig)
    cache = app.wsgi_app
    cache.kept.max_bytes = 40_000
    client = app.test_client()
    sizes = {path: len(client.get(path, headers={"Accept-Encoding": "br"}).data)
             for path in ("/api/models/bert", "/api/models/gpt", "/api/models/lenet", "/models/bert", "/")}
    assert cache.kept.size <= 40_000 and cache.kept.size == sum(size for _, size in cache.kept.items.values())
    assert len(cache.kept) < len(sizes)


def test_the_cache_can_be_turned_off(make_app):
    app = make_app(Uncached)
    assert not isinstance(app.wsgi_app, ResponseCache)
    assert app.test_client().get("/api/models/bert").status_code == 200


def test_a_sized_lru_drops_the_least_recently_used_first():
    from app.domain.lru import SizedLRU

    lru = SizedLRU(10)
    lru.put("a", "A", 4)
    lru.put("b", "B", 4)
    assert lru.get("a") == "A"  # now the most recently used
    lru.put("c", "C", 4)
    assert lru.get("b") is None and lru.get("a") == "A" and lru.get("c") == "C" and lru.size == 8
    lru.put("a", "AA", 6)  # replaced: its old size no longer counts
    assert lru.size == 10 and lru.get("a") == "AA"
    lru.put("huge", "H", 11)
    assert lru.get("huge") is None and lru.size == 10
    lru.discard("a")
    assert lru.size == 4 and len(lru) == 1


def test_the_catalog_page_is_kept_unless_a_card_reads_the_disk(make_app, tree, app, client):
    """A card says whether a model's checkpoint is on this server (looked at on every request): with such a
    model the catalog page always reaches Flask; without one it is kept like the others."""
    counting = CountingApp(app)
    client.get("/")
    client.get("/")
    assert counting.calls == 2  # this catalog has BERT-base, which reads a checkpoint
    tree.add("bert")
    plain = make_app(tree.config(TESTING=True))
    counting = CountingApp(plain)
    first, again = plain.test_client().get("/"), plain.test_client().get("/")
    assert counting.calls == 1 and first.data == again.data


def cacheable_paths() -> list[str]:
    """Every route declared @cacheable, once for each model of the catalog where it takes a slug."""
    apps = Apps()  # read while the tests are collected: no fixture runs yet
    app = apps(TestConfig)
    paths = []
    for rule in app.url_map.iter_rules():
        if getattr(app.view_functions[rule.endpoint], "cacheable", False):
            slugged = "slug" in rule.arguments  # <model:slug>: a model's slug (or a variant's path, none here)
            paths += [re.sub(r"<(?:\w+:)?slug>", slug, rule.rule) for slug in CATALOG_SLUGS] if slugged else [rule.rule]
    apps.close()
    return sorted(paths)


CACHEABLE = cacheable_paths()


def test_the_cacheable_routes_are_the_ones_declared():
    assert {"/", "/api/models", "/models/bert", "/models/bert/graph.json", "/api/models/bert"} <= set(CACHEABLE)
    assert not any(path.endswith(("/files", "/verifications", ".csv")) for path in CACHEABLE)


@pytest.mark.parametrize("path", [*CACHEABLE, "/api/openapi.json"])
def test_a_kept_answer_equals_a_fresh_one(make_app, app, client, path):
    """What @cacheable declares, checked for every route that declares it: an answer served again from
    memory is the answer an app that keeps nothing makes for the same request, headers and body."""
    client.get(path)
    kept = client.get(path, headers={"Accept-Encoding": "identity"})
    kept = client.get(path, headers={"Accept-Encoding": "identity"})  # the second of this encoding: from memory
    fresh_app = make_app(type("NoKeeping", (TestConfig,), {"RESPONSE_CACHE_BYTES": 0}))
    fresh = fresh_app.test_client().get(path, headers={"Accept-Encoding": "identity"})
    assert kept.status_code == fresh.status_code == 200
    assert kept.data == fresh.data
    assert sorted(kept.headers.items()) == sorted(fresh.headers.items())


def _etags(client, path: str) -> tuple[str, str]:
    """The plain and the brotli representation's ETags."""
    return (client.get(path, headers={"Accept-Encoding": "identity"}).headers["ETag"],
            client.get(path, headers={"Accept-Encoding": "br"}).headers["ETag"])


@pytest.mark.parametrize("encoding", ["identity", "br"])
@pytest.mark.parametrize("path", ["/api/models/bert", "/api/models/gpt/files", "/models/gpt"])
def test_conditional_requests_follow_rfc_9110(client, encoding, path):
    """If-Match compares strongly and `*` matches a resource that exists; If-None-Match compares weakly; If-Match
    is weighed first. A client holding either representation's ETag is answered alike."""
    plain, encoded = _etags(client, path)
    assert plain != encoded and encoded.endswith('-br"')

    def status(**conditions) -> int:
        headers = {"Accept-Encoding": encoding} | {k.replace("_", "-"): v for k, v in conditions.items()}
        return client.get(path, headers=headers).status_code

    assert status(If_Match="*") == 200
    assert status(If_Match=plain) == status(If_Match=encoded) == status(If_Match=f'"x", {encoded}') == 200
    assert status(If_Match=f"W/{plain}") == 412  # a weak tag never matches strongly
    assert status(If_Match='"x"') == 412
    assert status(If_None_Match=plain) == status(If_None_Match=encoded) == 304
    assert status(If_None_Match=f"W/{plain}") == status(If_None_Match="*") == 304
    assert status(If_None_Match='"x"') == 200
    assert status(If_Match='"x"', If_None_Match=plain) == 412  # If-Match first
    assert status(If_Match=plain, If_None_Match=plain) == 304


def test_a_412_is_an_error_in_the_client_s_shape_not_the_representation(client):
    for path, json_expected in (("/api/models/bert", True), ("/models/gpt", False)):
        response = client.get(path, headers={"If-Match": '"x"', "Accept-Encoding": "br"})
        assert response.status_code == 412 and response.is_json == json_expected
        assert len(response.data) < 5000 and "If-Match names no current representation" in response.get_data(True)
        assert response.headers["ETag"].endswith('-br"')  # the representation it did not match
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        unchanged = client.get(path, headers={"If-None-Match": response.headers["ETag"]})
        assert unchanged.status_code == 304 and unchanged.data == b""


def test_head_on_a_lab_get_is_answered_as_get_without_a_body(client):
    path = "/api/models/gpt/trace?input_ids=1,3,6"
    head = client.head(path)
    assert head.status_code == 200 and head.data == b"" and head.headers["ETag"] and head.is_json
    assert client.options(path).headers["Allow"] == "GET, HEAD, OPTIONS"
    refused = client.post(path, json={})
    assert refused.status_code == 405 and set(refused.headers["Allow"].split(", ")) == {"GET", "HEAD"}
