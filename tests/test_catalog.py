"""The manifest store: the recording kept as is, bad manifests left out with their reason."""

import hashlib
import json
import logging
import os
import re
import time

import pytest

from app.domain.catalog import LiveCatalog, graph_document, load_catalog
from app.domain.schema import ManifestError, validate_manifest
from app.services.config import PROJECT_ROOT
from app.services.extensions import models

from .conftest import BERT_MANIFEST, bert_manifest, eventually

# sha256 of the seed manifest as it was recorded
RECORDING_SHA256 = "9ff70baab928559081d549dc99dedd09c10ccce658570b3c022bf7cacd245037"


def test_stored_manifest_is_the_recording_byte_for_byte():
    assert hashlib.sha256(BERT_MANIFEST.read_bytes()).hexdigest() == RECORDING_SHA256


def test_the_recording_validates():
    validate_manifest(bert_manifest(), "bert")


@pytest.mark.parametrize("change, message", [
    (lambda m: m.pop("title"), "manifest.title"),
    (lambda m: m.update(slug="other"), "folder name"),
    (lambda m: m["connections"].append({"id": "e", "source": "input", "target": "nowhere", "sourcePort": None,
                                        "targetPort": None}), "connections[48].target"),
    (lambda m: m["layers"][3].update(parent="ghost"), "layers[3].parent"),
    (lambda m: m.update(openingStep="nope"), "openingStep"),
    (lambda m: m["steps"][0].update(target="ghost"), "steps[0].target"),
    (lambda m: m["experiment"]["cases"][0]["matrices"][0]["values"][2].pop(), "has 5 values"),
    (lambda m: m["experiment"]["cases"][0]["metrics"][0].update(value="2.8"), "metrics[0].value"),
    (lambda m: m["experiment"]["cases"].append(dict(m["experiment"]["cases"][0])), "repeats id"),
    (lambda m: m["files"].update({"../x": {"url": "/x", "sha256": "0", "bytes": 1}}), "plain file name"),
    (lambda m: m.update(revision="XYZ"), "revision"),
    (lambda m: m["experiment"]["cases"][0]["vectors"][0].update(first=-1), "vectors[0].first"),
    (lambda m: m["experiment"]["cases"][0]["vectors"][0].update(first=True), "vectors[0].first"),
])
def test_validation_names_the_problem(change, message):
    manifest = bert_manifest()
    change(manifest)
    with pytest.raises(ManifestError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_manifest(manifest, "bert")


def test_bad_manifests_are_listed_with_their_reason_and_the_good_one_still_served(tree, caplog):
    tree.add("bert")
    tree.add("broken-json", manifest=b"{not json")
    tree.add("invalid", manifest=bert_manifest() | {"slug": "invalid", "layers": "no"})
    (tree.manifests / "empty").mkdir()
    with caplog.at_level(logging.ERROR):
        catalog = load_catalog(tree.manifests, tree.recipes)
    assert list(catalog.models) == ["bert"]
    reasons = {slug: u.reason for slug, u in catalog.unavailable.items()}
    assert "not valid JSON" in reasons["broken-json"]
    assert reasons["invalid"] == "manifest.layers: must be a list"
    assert "cannot read manifests/empty/manifest.json" in reasons["empty"]
    assert "broken-json" in caplog.text and "not valid JSON" in caplog.text


@pytest.mark.parametrize("number, reason", [
    ("NaN", "holds NaN, which is not JSON"),
    ("-Infinity", "holds -Infinity, which is not JSON"),
    ("1e400", "holds 1e400, which no float can hold"),
])
def test_a_manifest_holding_a_non_finite_number_is_unavailable_with_the_reason(make_app, tree, number, reason):
    """JSON has no NaN nor infinity: the page, the exports and the API's strict JSON could not carry one."""
    raw = json.dumps(bert_manifest() | {"slug": "odd"})
    value = re.search(r'"value": (-?[0-9.e-]+)', raw)
    tree.add("bert")
    tree.add("odd", manifest=(raw[:value.start(1)] + number + raw[value.end(1):]).encode())
    app = make_app(tree.config(TESTING=True))
    client = app.test_client()
    unavailable = client.get("/api/models").get_json()["unavailable"]
    assert [u["slug"] for u in unavailable] == ["odd"] and reason in unavailable[0]["reason"]
    assert client.get("/api/models/odd").status_code == 503
    assert client.get("/models/odd").status_code == 503 and client.get("/models/bert").status_code == 200


def test_missing_recipe_makes_the_model_unavailable(tree):
    tree.add("bert")
    (tree.recipes / "bert" / "run.py").unlink()
    catalog = load_catalog(tree.manifests, tree.recipes)
    assert "run.py" in catalog.unavailable["bert"].reason


def test_served_files_hash_what_is_on_disk(make_app):
    app = make_app({"TESTING": True})
    with app.app_context():
        model = models.get("bert")
    served = model.files["model.py"]
    disk = (model.recipe_dir / "model.py").read_bytes()
    assert served.sha256 == hashlib.sha256(disk).hexdigest() and served.size == len(disk)


def test_graph_document_carries_the_graph_and_tour():
    document = json.loads(graph_document(bert_manifest()))
    assert document["format"] == "tensorviz-graph"
    assert len(document["layers"]) == 36 and len(document["connections"]) == 48
    assert document["openingStep"] == "bidirectional" and len(document["steps"]) == 4


def test_a_manifest_broken_on_disk_is_reported_then_served_again_once_mended(make_app, tree):
    tree.add("bert")
    tree.add("other")
    app = make_app(tree.config(TESTING=True, CATALOG_RELOAD_SECONDS=0.01))
    client = app.test_client()
    path = tree.manifests / "bert" / "manifest.json"
    good = path.read_bytes()
    assert client.get("/api/models/bert").status_code == 200
    path.write_bytes(good[:100])  # cut short, as by a failed copy
    body = eventually(lambda: client.get("/api/models").get_json(), lambda b: len(b["models"]) == 1)
    assert [m["slug"] for m in body["models"]] == ["other"]
    assert "not valid JSON" in body["unavailable"][0]["reason"]
    response = client.get("/api/models/bert")  # its folder is there: unavailable for now (503), never "no model"
    assert response.status_code == 503 and "unavailable" in response.get_json()["error"]["message"]
    assert int(response.headers["Retry-After"]) > 0
    page = client.get("/models/bert")
    assert page.status_code == 503 and b"unavailable" in page.data
    assert client.get("/api/models/never-was").status_code == 404
    assert client.get("/api/models/other").status_code == 200
    path.write_bytes(good)
    eventually(lambda: client.get("/api/models/bert").status_code, lambda status: status == 200)
    assert client.get("/api/models").get_json()["unavailable"] == []


def test_a_recipe_s_readme_is_its_documentation_not_a_recipe_file(tmp_path):
    """Each model's page is its recipe's README.md; editing it neither changes what is served nor any key."""
    import shutil

    from app.domain.catalog import recipe_files

    from .conftest import CATALOG_SLUGS, GPT_RECIPE

    assert all((PROJECT_ROOT / "recipes" / slug / "README.md").is_file() for slug in CATALOG_SLUGS)
    recipe = tmp_path / "gpt"
    shutil.copytree(GPT_RECIPE, recipe, ignore=shutil.ignore_patterns("__pycache__"))
    before = recipe_files(recipe)
    (recipe / "README.md").write_text("# edited\n")
    assert recipe_files(recipe) == before and "README.md" not in before and "lab.py" in before


@pytest.mark.parametrize("field, value", [("slug", "bert\n"), ("revision", "0c48027dcf5a807d\n")])
def test_a_name_with_a_trailing_newline_is_refused(field, value):
    """Each pattern is matched whole: `$` alone would let a newline after it through."""
    manifest = bert_manifest() | {field: value}
    with pytest.raises(ManifestError, match=f"manifest.{field}"):
        validate_manifest(manifest, manifest["slug"])


def test_an_edit_that_keeps_the_size_and_restores_the_mtime_is_noticed(make_app, tree):
    """The catalog notices changes by a stamp that holds the ctime, which no one can set back."""
    tree.add("bert")
    app = make_app(tree.config(TESTING=True, CATALOG_RELOAD_SECONDS=0.01))
    client = app.test_client()
    path = tree.manifests / "bert" / "manifest.json"
    before = client.get("/api/models/bert")
    raw = path.read_bytes()
    stat = path.stat()
    digit = re.search(rb'"value": -?\d\.(\d)', raw).start(1)
    changed = raw[:digit] + (b"1" if raw[digit:digit + 1] != b"1" else b"2") + raw[digit + 1:]
    time.sleep(0.01)  # a ctime apart from the first write's
    path.write_bytes(changed)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    after = eventually(lambda: client.get("/api/models/bert"), lambda r: r.data != raw)
    assert after.data == changed and after.headers["ETag"] != before.headers["ETag"]


@pytest.mark.parametrize("declaration, reason", [
    ('state = "learned"', "weights.state: must be 'trained', 'pretrained' or 'random', not str 'learned'"),
    ('state = "trained"', "weights.on: trained weights must say, as text, what the recipe trained its model on"),
    ('state = "random"\non = 3', "weights.on: must be text, not int 3"),
])
def test_a_weights_declaration_that_says_nothing_true_makes_the_model_unavailable(tree, declaration, reason):
    tree.add("bert")
    toml = tree.recipes / "bert" / "recipe.toml"
    toml.write_text(toml.read_text().replace('[weights]\nstate = "random"', f"[weights]\n{declaration}"))
    catalog = load_catalog(tree.manifests, tree.recipes)
    assert reason in catalog.unavailable["bert"].reason


def test_a_model_suspended_for_a_while_is_served_again_whatever_is_suspended_meanwhile():
    """A hang suspends its model for a while, a recipe that cannot start until its files change: one suspended
    after the other leaves the first's time as it was."""
    live = LiveCatalog(PROJECT_ROOT / "manifests", PROJECT_ROOT / "recipes", interval=0)
    live.suspend("mlp", "a run of it did not finish in 120 s and was stopped", until=time.time() + 0.5)
    live.suspend("gcn", "warming it ran past 30 s (2 times in a row)")
    assert {"mlp", "gcn"} <= set(live.current().unavailable) and "mlp" not in live.current().models
    assert "suspended until" in live.current().unavailable["mlp"].reason
    time.sleep(0.6)
    assert "mlp" in live.current().models and "mlp" not in live.current().unavailable
    assert "it is tried again when its files change" in live.current().unavailable["gcn"].reason
