"""The JSON API over manifests and files; every error is JSON with a message."""

import hashlib
import json

import pytest

from app.services.config import TestConfig

from .conftest import BERT_MANIFEST, BERT_RECIPE, CATALOG_SLUGS, bert_manifest

REVISION = "0c48027dcf5a807d"


def test_catalog_lists_every_model(client):
    body = client.get("/api/models").get_json()
    assert [m["slug"] for m in body["models"]] == CATALOG_SLUGS
    entry = body["models"][0]
    assert entry["title"] == "Learn from both sides of a masked token"
    assert entry["revision"] == REVISION
    assert entry["milestone"]["year"] == 2018
    assert "NSP" in entry["tags"] and entry["category"] == "Language milestones"
    assert entry["links"]["verifications"] == "/api/models/bert/verifications"
    assert body["unavailable"] == []


def test_catalog_reports_unavailable_models(make_app, tree):
    tree.add("bert")
    tree.add("zeta", manifest=b"[]")
    client = make_app(tree.config(TESTING=True)).test_client()
    body = client.get("/api/models").get_json()
    assert [m["slug"] for m in body["models"]] == ["bert"]
    assert body["unavailable"] == [{"slug": "zeta", "reason": "manifest: must be a JSON object"}]
    response = client.get("/api/models/zeta")
    assert response.status_code == 503
    assert "unavailable: manifest: must be a JSON object" in response.get_json()["error"]["message"]


def test_manifest_is_served_unchanged_with_etag(client):
    response = client.get("/api/models/bert")
    assert response.status_code == 200
    assert response.content_type == "application/json"
    assert response.data == BERT_MANIFEST.read_bytes()
    etag = response.headers["ETag"]
    assert etag == f'"{hashlib.sha256(response.data).hexdigest()}"'
    again = client.get("/api/models/bert", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.data == b""
    assert client.get("/api/models/bert", headers={"If-None-Match": '"other"'}).status_code == 200


def test_files_list_actual_and_recorded_hashes(client):
    body = client.get("/api/models/bert/files").get_json()
    files = {f["name"]: f for f in body["files"]}
    assert set(files) >= {"model.py", "run.py", "requirements.txt", "graph.tensorviz.json"}
    model_py = files["model.py"]
    disk = (BERT_RECIPE / "model.py").read_bytes()
    assert model_py["sha256"] == hashlib.sha256(disk).hexdigest() and model_py["size"] == len(disk)
    assert model_py["recorded_sha256"] == bert_manifest()["provenance"]["sourceSha256"]
    assert model_py["matches_recording"] is False and "Differs from the file recorded" in model_py["note"]
    assert model_py["url"] == f"/models/bert/{REVISION}/model.py"


@pytest.mark.parametrize("name, content_type", [
    ("model.py", "text/x-python; charset=utf-8"),
    ("run.py", "text/x-python; charset=utf-8"),
    ("requirements.txt", "text/plain; charset=utf-8"),
    ("graph.tensorviz.json", "application/json"),
])
def test_downloads_match_the_listing(client, name, content_type):
    listing = {f["name"]: f for f in client.get("/api/models/bert/files").get_json()["files"]}
    response = client.get(listing[name]["url"])
    assert response.status_code == 200
    assert response.content_type == content_type
    assert hashlib.sha256(response.data).hexdigest() == listing[name]["sha256"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("path", [
    f"/models/bert/{REVISION}/manifest.json",
    f"/models/bert/{REVISION}/__init__.py",
    "/models/bert/ffffffffffffffff/model.py",
    f"/models/nope/{REVISION}/model.py",
    f"/models/bert/{REVISION}/..%2f..%2fwsgi.py",
    f"/models/bert/{REVISION}/%2e%2e/%2e%2e/wsgi.py",
    f"/models/bert/{REVISION}/../../wsgi.py",
    f"/models/bert/{REVISION}//etc/passwd",
    f"/models/bert/{REVISION}/%2Fetc%2Fpasswd",
])
def test_anything_outside_the_file_list_is_404(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert b"root:" not in response.data and b"create_app" not in response.data


def test_unknown_model_and_route_answer_json(client):
    for path in ("/api/models/nope", "/api/models/nope/files", "/api/nothing-here"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.get_json()["error"]["message"]


def test_wrong_method_answers_json_405(client):
    response = client.delete("/api/models/bert")
    assert response.status_code == 405
    assert response.get_json()["error"]["status"] == 405
    assert "GET" in response.headers["Allow"]


def test_oversized_body_answers_json_413(client):
    response = client.post("/api/models/bert/verifications", data=b"x" * (TestConfig.MAX_CONTENT_LENGTH + 1),
                           content_type="application/json")
    assert response.status_code == 413
    assert response.get_json()["error"]["status"] == 413


def test_latest_verification_is_404_before_any(client):
    response = client.get("/api/models/bert/verifications/latest")
    assert response.status_code == 404
    assert "not been verified" in response.get_json()["error"]["message"]


def test_unknown_job_is_404(client):
    response = client.get("/api/models/bert/verifications/0123abcd")
    assert response.status_code == 404
    assert response.get_json()["error"]["message"]


def test_browser_404_is_a_page(client):
    response = client.get("/models/nope/x/y")
    assert response.status_code == 404
    assert response.content_type.startswith("text/html")
    assert b"Back to all models" in response.data


def test_a_recipe_answer_is_spliced_into_its_envelope_as_it_was_written(app):
    from app.web.api import _spliced

    with app.app_context():
        def body(*args, **kwargs):
            return json.loads(_spliced(*args, **kwargs).get_data())

        assert body({"kind": "x"}, "{}") == {"kind": "x"}
        assert body({"kind": "x"}, '{"b":[1,2.5],"c":{"d":null}}') == {"kind": "x", "b": [1, 2.5], "c": {"d": None}}
        assert body({"kind": "x"}, "{}", under="case", first='"id":"live"') == {"kind": "x", "case": {"id": "live"}}
        assert body({"kind": "x"}, '{"m":[]}', under="case", first='"id":"live"') == \
            {"kind": "x", "case": {"id": "live", "m": []}}


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_not_declared_json_is_a_415(client, content_type):
    """Another site's page can send text/plain or a form without a preflight: neither starts a run."""
    body = b'{"input_ids": [1, 5, 7, 3]}'
    for path in ("/api/models/gpt/runs", "/api/models/gpt/interventions", "/api/models/lenet/training"):
        response = client.post(path, data=body, content_type=content_type)
        assert response.status_code == 415, (path, response.status_code)
        assert "Content-Type: application/json" in response.get_json()["error"]["message"]


def test_public_reads_are_open_to_every_origin_and_nothing_that_runs_a_recipe_is(client):
    origin = {"Origin": "https://elsewhere.example"}
    files = client.get("/api/models/gpt/files").get_json()["files"]
    for path in ("/api/models", "/api/models/gpt", "/api/openapi.json", files[0]["url"]):
        response = client.get(path, headers=origin)
        assert response.headers["Access-Control-Allow-Origin"] == "*", path
        assert "ETag" in response.headers["Access-Control-Expose-Headers"]
    assert "Access-Control-Allow-Origin" not in client.get("/models/gpt", headers=origin).headers  # a page
    run = client.post("/api/models/gpt/runs", json={"input_ids": [1, 5, 7, 3]}, headers=origin)
    assert run.status_code == 200 and "Access-Control-Allow-Origin" not in run.headers
    preflight = client.options("/api/models/gpt/runs", headers=origin | {
        "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    assert "Access-Control-Allow-Origin" not in preflight.headers  # the browser sends no cross-site POST


def test_nothing_that_runs_a_recipe_is_readable_or_startable_from_another_sites_page(client):
    """A lab's GET endpoint runs a recipe: no CORS header on it. A request a browser marks as sent by another
    site's page starts nothing (403), whatever its method; a verification POSTed as a form is a 415."""
    origin = {"Origin": "https://elsewhere.example"}
    trace = "/api/models/bert/trace?input_ids=1,4,3,2,6,2&segment_ids=0,0,0,0,1,1&position=2"
    ran = client.get(trace, headers=origin)
    assert ran.status_code == 200 and "Access-Control-Allow-Origin" not in ran.headers
    for method, path, body in (("GET", trace, None), ("POST", "/api/models/gpt/runs", {"input_ids": [1, 5, 7, 3]}),
                               ("POST", "/api/models/gpt/verifications", None),
                               ("POST", "/api/models/mlp/interventions", {"case": "xor", "interventions": [
                                   {"node": "hidden", "action": "zero"}]})):
        for site in ("cross-site", "same-site"):
            refused = client.open(path, method=method, json=body, headers={"Sec-Fetch-Site": site})
            assert refused.status_code == 403, (path, site)
            assert "another site's page cannot start a recipe run" in refused.get_json()["error"]["message"]
    own = client.get(trace, headers={"Sec-Fetch-Site": "same-origin"})
    assert own.status_code == 200
    form = client.post("/api/models/gpt/verifications", data={"a": "1"})
    assert form.status_code == 415 and "Content-Type: application/json" in form.get_json()["error"]["message"]
    assert client.get("/api/models", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200  # stored data
