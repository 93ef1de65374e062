"""Trust under hostile input and edited files: reports keyed by what they checked, bad bodies and hostile
manifests answered cleanly, and the shared state bounded."""

import copy
import html
import json
import re
import time

import pytest

from app.domain.graphlayout import build_preview
from app.services.config import TestConfig
from app.services.state import SQLiteStore, StateUnavailable

from .conftest import (
    BERT_MANIFEST,
    ModelTree,
    bert_manifest,
    check_bounded_cache,
    check_sliding_budget,
    check_units_and_lists,
)

RUN = {"input_ids": [1, 4, 3, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2]}


def tree_app(make_app, tree: ModelTree, **settings):
    return make_app(type("Tree", (TestConfig,), tree.config(CATALOG_RELOAD_SECONDS=0.01, **settings)))


def verified(client) -> dict:
    """POST a verification and follow its job to the report."""
    response = client.post("/api/models/bert/verifications")
    if response.status_code == 200:
        return response.get_json()
    location = response.headers["Location"]
    for _ in range(600):
        job = client.get(location).get_json()
        if job["state"] == "done":
            return job["report"]
        time.sleep(0.1)
    raise AssertionError("the verification never finished")


# ---- 1. a report is keyed by the bytes it checked


def test_an_edited_recording_is_verified_again_and_fails(make_app, tree):
    tree.add("bert", BERT_MANIFEST.read_bytes())
    app = tree_app(make_app, tree)
    client = app.test_client()
    first = verified(client)
    assert first["status"] == "passed"
    assert client.post("/api/models/bert/verifications").get_json()["cached"] is True
    edited = json.loads(BERT_MANIFEST.read_text())
    edited["experiment"]["cases"][0]["matrices"][0]["values"][0][0] += 0.01  # the revision stays
    (tree.manifests / "bert" / "manifest.json").write_text(json.dumps(edited))
    time.sleep(0.05)
    again = verified(client)
    assert again["cached"] is False and again["status"] == "failed"
    assert again["revision"] == first["revision"] and again["manifest_sha256"] != first["manifest_sha256"]
    latest = client.get("/api/models/bert/verifications/latest").get_json()
    assert latest["status"] == "failed"


def test_live_runs_are_keyed_by_the_recording_too(make_app, tree):
    tree.add("bert", BERT_MANIFEST.read_bytes())
    app = tree_app(make_app, tree)
    client = app.test_client()
    assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is False
    assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is True
    edited = json.loads(BERT_MANIFEST.read_text())
    edited["description"] += " Edited."
    (tree.manifests / "bert" / "manifest.json").write_text(json.dumps(edited))
    time.sleep(0.05)
    assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is False


def test_a_reply_kept_by_a_release_of_another_reply_shape_is_never_read(make_app, tree, monkeypatch):
    """A deploy that changes what a recipe process answers starts from fresh keys: the store may still hold
    the old release's replies (a Redis, an SQLite file), and reading one in the new shape would fail."""
    from app.services import runs

    tree.add("bert", BERT_MANIFEST.read_bytes())
    app = tree_app(make_app, tree)
    client = app.test_client()
    monkeypatch.setattr(runs, "REPLY_FORMAT", "an older shape")
    assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is False
    assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is True
    monkeypatch.undo()
    assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is False


# ---- 5. bad bodies and odd requests


def test_a_deeply_nested_body_is_a_400(client):
    body = "[" * 30_000 + "]" * 30_000  # under the size limit, far past the parser's recursion limit
    response = client.post("/api/models/bert/runs", data=body, content_type="application/json")
    assert response.status_code == 400 and response.is_json
    assert response.get_json()["error"]["message"].startswith("body:")


def test_a_body_without_length_is_cut_at_the_limit(app):
    client = app.test_client()
    big = json.dumps({"input_ids": [1] * 40_000}).encode()
    environ = {"wsgi.input_terminated": True}
    from io import BytesIO

    response = client.post("/api/models/bert/runs", input_stream=BytesIO(big), content_type="application/json",
                           environ_overrides=environ, headers={"Transfer-Encoding": "chunked"})
    assert response.status_code == 413 and response.is_json


def test_options_and_unknown_api_paths_answer_json(client):
    for path in ("/api", "/api/nowhere"):
        response = client.open(path, method="OPTIONS")
        assert response.status_code == 404 and response.is_json, path
    allowed = client.options("/api/models")
    assert allowed.status_code == 204 and allowed.data == b"" and "GET" in allowed.headers["Allow"]


def test_if_match_mismatch_is_a_412_in_the_error_shape(client):
    response = client.get("/api/models/bert", headers={"If-Match": '"not-the-etag"'})
    assert response.status_code == 412 and response.is_json
    body = response.get_json()
    assert set(body) == {"error"} and body["error"]["status"] == 412
    assert len(response.data) < 500  # not the manifest it did not match


# ---- 6. hostile manifests


def served(make_app, tree: ModelTree, manifest: dict):
    tree.add("bert", manifest)
    return tree_app(make_app, tree)


def test_a_case_id_with_unicode_and_quotes_exports_with_rfc_6266_names(make_app, tree):
    manifest = bert_manifest()
    manifest["experiment"]["cases"][0]["id"] = 'résumé "quoted"'
    app = served(make_app, tree, manifest)
    client = app.test_client()
    page = client.get("/models/bert").get_data(as_text=True)
    for kind in ("csv", "json"):
        link = f'/models/bert/cases/r%C3%A9sum%C3%A9%20%22quoted%22.{kind}'
        assert link in page
        response = client.get(link)
        assert response.status_code == 200
        disposition = response.headers["Content-Disposition"]
        assert disposition == (f'attachment; filename="bert-r_sum_ _quoted_.{kind}"; '
                               f"filename*=UTF-8''bert-r%C3%A9sum%C3%A9%20%22quoted%22.{kind}")
        disposition.encode("latin-1")  # a header every server can send


@pytest.mark.parametrize("case_id", ["a/b", "line\nbreak", "back\\slash", "x.json", ""])
def test_a_case_id_the_app_cannot_serve_makes_the_model_unavailable(make_app, tree, case_id):
    manifest = bert_manifest()
    manifest["experiment"]["cases"][0]["id"] = case_id
    body = served(make_app, tree, manifest).test_client().get("/api/models").get_json()
    [gone] = body["unavailable"]
    assert "experiment.cases[0].id" in gone["reason"]


def test_a_layer_without_params_still_renders(make_app, tree):
    manifest = bert_manifest()
    for layer in manifest["layers"]:
        if layer["id"] in ("encoder.attention", "encoder.attention.softmax", "mlm_decoder"):
            layer.pop("params", None)
    app = served(make_app, tree, manifest)
    client = app.test_client()
    assert client.get("/api/models").get_json()["unavailable"] == []
    assert client.get("/models/bert").status_code == 200
    trace = client.get("/api/models/bert/trace?input_ids=1,4,3,2,6,2&segment_ids=0,0,0,0,1,1&position=2")
    assert trace.status_code == 200


def test_only_http_links_are_linked(make_app, tree):
    manifest = bert_manifest()
    manifest["milestone"]["papers"] = [{"title": "Script", "url": "javascript:alert(1)"},
                                       {"title": "Data", "url": "data:text/html,<b>hi</b>"},
                                       {"title": "Real", "url": "https://arxiv.org/abs/1810.04805"}]
    page = served(make_app, tree, manifest).test_client().get("/models/bert").get_data(as_text=True)
    assert 'href="javascript:' not in page and 'href="data:' not in page
    assert '<a href="https://arxiv.org/abs/1810.04805" rel="noopener">Real</a>' in page
    assert "Script" in page and "not linked" in page


def test_dot_labels_are_escaped():
    manifest = bert_manifest()
    hostile = copy.deepcopy(manifest)
    for layer in hostile["layers"]:
        if layer["id"] == "mlm_decoder":
            layer["op"] = 'Linear"]; evil [label="x'
            layer["label"] = 'back\\slash\nnewline'
    svg = build_preview(hostile)  # graphviz parsed the source: one node per layer, each under its own id
    ids = [html.unescape(i) for i in re.findall(r'<g id="(node&#45;[^"]*)" class="node">', svg)]
    assert len(ids) == len(set(ids)) == len(hostile["layers"]) - 2  # every layer but the two open modules
    assert "node-mlm_decoder" in ids and not any("evil" in i for i in ids)
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    assert 'Linear"]; evil [label="x 8→16' in texts and "back\\slash" in texts and "newline" in texts


def test_unavailable_reasons_and_recipe_errors_name_no_server_path(make_app, tree):
    tree.add("bert", BERT_MANIFEST.read_bytes())
    (tree.recipes / "bert" / "lab.py").write_text(
        "def live_run(**request):\n    open('/nonexistent/folder/weights.bin')\n")
    app = tree_app(make_app, tree)
    response = app.test_client().post("/api/models/bert/runs", json=RUN)
    assert response.status_code == 503
    message = response.get_json()["error"]["message"]
    assert message == "the recipe's live_run() in lab.py cannot read weights.bin: No such file or directory"
    tree.add("gpt", BERT_MANIFEST.read_bytes())
    (tree.recipes / "gpt" / "model.py").chmod(0)
    reasons = [u["reason"] for u in make_app(tree.config(TESTING=True, STATE_PATH=None)).test_client()
               .get("/api/models").get_json()["unavailable"]]
    (tree.recipes / "gpt" / "model.py").chmod(0o644)
    assert reasons and all(str(tree.recipes) not in r and "/tmp" not in r for r in reasons), reasons


@pytest.mark.parametrize("body", [
    "    open('/nonexistent/my folder/weights.bin')",  # quoted by Python's error: the quote ends the path
    "    raise RuntimeError(f'cannot use {__file__} now')",  # under the recipes' folder, which has a space
])
def test_a_server_folder_with_a_space_is_not_named_either(make_app, tmp_path, body):
    (tmp_path / "user name").mkdir()
    tree = ModelTree(tmp_path / "user name")
    tree.add("bert", BERT_MANIFEST.read_bytes())
    (tree.recipes / "bert" / "lab.py").write_text(f"def live_run(**request):\n{body}\n")
    app = tree_app(make_app, tree)
    message = app.test_client().post("/api/models/bert/runs", json=RUN).get_json()["error"]["message"]
    assert ("weights.bin" in message or "lab.py" in message) and "name" not in message, message
    assert "folder" not in message and "/nonexistent" not in message, message


# ---- 4. the shared cache is bounded


def test_the_cache_is_bounded_and_jobs_are_never_evicted(tmp_path):
    check_bounded_cache(SQLiteStore(str(tmp_path / "state.sqlite3"), max_bytes=10_000, max_entry=4_000))


def test_the_cached_total_follows_every_write_and_is_counted_once_for_a_file_made_before_it(tmp_path):
    """The cached bytes are a running total kept by the writes themselves; it always equals a count of the rows,
    through replacements (cached or not), deletions, adds, expiry and eviction, and a file written before the
    total existed is counted when a store first opens it."""
    import sqlite3
    import time

    path = str(tmp_path / "state.sqlite3")
    old = sqlite3.connect(path, isolation_level=None)  # the table as the release before made it, no total
    old.execute("CREATE TABLE entries (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires REAL NOT NULL, "
                "size INTEGER NOT NULL, cached INTEGER NOT NULL)")
    later = time.time() + 60
    old.executemany("INSERT INTO entries VALUES (?, x'00', ?, ?, ?)", [("a", later, 300, 1), ("b", later, 200, 1),
                                                                       ("job", later, 50, 0)])
    old.close()
    store = SQLiteStore(path, max_bytes=3_000, max_entry=2_000)

    def counted() -> int:
        return store._run(lambda db: db.execute("SELECT COALESCE(SUM(size), 0) FROM entries WHERE cached = 1")
                          .fetchone()[0])

    assert store.cached_bytes() == counted() == 500
    store.set("a", {"v": "x" * 100}, ttl=60, cached=True)  # replaced by a smaller value
    store.set("b", {"v": "x"}, ttl=60)  # replaced by a value that is not cached
    store.set("job", {"v": "x" * 10}, ttl=60, cached=True)  # and the other way round
    store.delete("a")
    store.add("lock", {"v": 1}, ttl=60)
    store.set("soon", {"v": "x" * 500}, ttl=0.01, cached=True)
    time.sleep(0.02)
    for i in range(12):  # past the cap: the nearest expiry goes first
        store.set(f"report-{i}", {"v": "x" * 400, "i": i}, ttl=60 + i, cached=True)
        assert store.cached_bytes() == counted() <= 3_000
    assert store.get("soon") is None and store.get("report-11")["i"] == 11 and store.get("report-0") is None
    # A writer of the release before (INSERT OR REPLACE fires no trigger) leaves the total counting too much:
    # once nothing is left to evict, it is counted again.
    store._run(lambda db: db.execute("UPDATE totals SET bytes = bytes + 100000"))
    store.set("after", {"v": "x" * 10}, ttl=120, cached=True)
    assert store.cached_bytes() == counted() and store.get("after") is None  # everything went, the total is true
    store.set("again", {"v": "x" * 10}, ttl=120, cached=True)
    assert store.get("again") == {"v": "x" * 10} and store.cached_bytes() == counted()


def test_sqlite_charges_units_whole_and_keeps_bounded_lists(tmp_path):
    check_units_and_lists(SQLiteStore(str(tmp_path / "state.sqlite3"), max_bytes=10_000, max_entry=4_000))


def test_the_budget_holds_over_any_window_of_its_length(tmp_path):
    check_sliding_budget(lambda clock: SQLiteStore(str(tmp_path / "state.sqlite3"), max_bytes=10_000, max_entry=4_000,
                                                   clock=clock))


def test_the_store_degrades_when_its_file_breaks(tmp_path):
    store = SQLiteStore(str(tmp_path / "state.sqlite3"), max_bytes=10_000, max_entry=4_000)
    store.set("k", 1, ttl=60)
    store.close()
    (tmp_path / "state.sqlite3").unlink()
    tmp_path.chmod(0o500)  # the folder cannot hold a new file
    try:
        broken = SQLiteStore.__new__(SQLiteStore)
        broken.__dict__.update(store.__dict__)
        broken._local.db = None
        assert broken.get("k") is None and broken.add("k", 2, ttl=60) is True
        with pytest.raises(StateUnavailable, match="nothing that computes starts now"):
            broken.admit("client", 1, 60)  # a budget it cannot count admits nothing
        with pytest.raises(StateUnavailable, match="nothing that computes starts now"):
            broken.add("place", 1, ttl=60, strict=True)  # nor a place that bounds work
    finally:
        tmp_path.chmod(0o700)


def test_a_relabelled_recorded_item_is_served_by_its_key_or_suspended_with_the_reason(make_app, tree):
    from .conftest import GPT_RECIPE

    seed_raw = json.loads(BERT_MANIFEST.read_text())  # the original capture: its items have no keys
    seed_raw["experiment"]["cases"][0]["vectors"][0]["label"] = "Renamed"
    tree.add("bert", seed_raw)
    gpt = json.loads((BERT_MANIFEST.parent.parent / "gpt" / "manifest.json").read_text())
    gpt["experiment"]["cases"][0]["vectors"][0]["label"] = "Token IDs, renamed"
    tree.add("gpt", gpt)
    import shutil

    shutil.rmtree(tree.recipes / "gpt")
    shutil.copytree(GPT_RECIPE, tree.recipes / "gpt", ignore=shutil.ignore_patterns("__pycache__"))
    client = tree_app(make_app, tree).test_client()
    [gone] = client.get("/api/models").get_json()["unavailable"]
    assert gone["slug"] == "bert" and "maps none for its label" in gone["reason"]
    assert client.get("/models/bert").status_code == 503
    page = client.get("/models/gpt")
    assert page.status_code == 200 and "Token IDs, renamed" in page.get_data(as_text=True)
