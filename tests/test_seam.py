"""One seam for model kinds: recipes as packages, labs declared as data, a core that names no model."""

import re
import shutil
import sys

import pytest
import torch
from safetensors.torch import save_file

from app.compute.capture import trace_graph
from app.compute.messages import RecipeCall, Reply, Warmup
from app.compute.pool import WorkerPool
from app.domain.catalog import graph_document
from app.domain.graphlayout import build_preview, modules
from app.domain.labs import lab_spec
from app.domain.labs.fields import DeclarationError
from app.domain.recipes import load_module, read_metadata
from app.services.config import PROJECT_ROOT

from .conftest import BERT_RECIPE, GPT_RECIPE


def test_two_recipes_load_side_by_side_in_one_process():
    bert, gpt = load_module(BERT_RECIPE, "model"), load_module(GPT_RECIPE, "model")
    assert bert is not gpt and hasattr(bert, "TinyBertPretraining") and hasattr(gpt, "GPT")
    assert load_module(BERT_RECIPE, "run").build_model is bert.build_model  # run.py found its own model.py
    assert "model" not in sys.modules and "run" not in sys.modules


def test_two_recipes_run_in_the_same_worker_process():
    pool = WorkerPool(size=1, timeout=60, torch_threads=1, seed=0)
    try:
        first = pool.run(RecipeCall.replay(BERT_RECIPE))
        [worker] = pool.pids()
        second = pool.run(RecipeCall.replay(GPT_RECIPE))
        third = pool.run(RecipeCall.lab(BERT_RECIPE, "trace", {
            "input_ids": [1, 4, 3, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "position": 2,
            "attention": "bidirectional"}))
        assert pool.pids() == [worker]  # one process served all three
    finally:
        pool.shutdown()
    assert set(first.result["cases"]) == {"mask-a", "mask-b", "both", "not-next"}
    assert set(second.result["cases"]) == {"pi", "repeats", "falling", "in-order", "test-split"}
    assert third.result["position"] == 2


@pytest.fixture
def no_lab_app(make_app, tree):
    tree.add("plain")
    recipe = tree.recipes / "plain"
    meta = (recipe / "recipe.toml").read_text()
    (recipe / "recipe.toml").write_text(meta[: meta.index("[lab]")])
    app = make_app(tree.config(TESTING=True))
    yield app


def test_a_recipe_without_a_lab_has_no_panel_and_its_lab_endpoints_answer_404_json(no_lab_app):
    client = no_lab_app.test_client()
    page = client.get("/models/plain")
    assert page.status_code == 200 and 'id="lab"' not in page.get_data(as_text=True)
    for method, path in (("post", "runs"), ("post", "corruptions"), ("get", "trace")):
        response = getattr(client, method)(f"/api/models/plain/{path}", json={})
        assert response.status_code == 404 and response.is_json
        assert response.get_json()["error"]["message"] == "model 'plain' has no live lab"
    assert client.get("/api/openapi.json").status_code == 200


def test_a_bad_lab_declaration_makes_the_model_unavailable_with_the_reason(make_app, tree):
    tree.add("odd")
    meta = tree.recipes / "odd" / "recipe.toml"
    meta.write_text(meta.read_text().replace('kind = "masked-lm"', 'kind = "telepathy"'))
    app = make_app(tree.config(TESTING=True))
    body = app.test_client().get("/api/models").get_json()
    [gone] = body["unavailable"]
    assert gone["slug"] == "odd" and "lab.kind 'telepathy'" in gone["reason"]


def test_the_core_names_no_model_token_or_head():
    """Outside a lab kind's own files, app/, templates/ and static/js/ never name a model's particulars."""
    words = re.compile(r"\b(BERT|GPT|NSP|MLM|CLS|SEP|segments?|nsp|mlm|[Tt]anh|LeNet|LSTM|brackets?)\b")
    kind_folders = [PROJECT_ROOT / "app" / "domain" / "labs" / kind for kind in ("masked_lm", "causal_lm", "datalab")]
    offenders = []
    for folder, pattern in (("app", "*.py"), ("app", "*.html"), ("app", "*.js"), ("templates", "*.html"),
                            ("static/js", "*.js")):
        for path in sorted((PROJECT_ROOT / folder).rglob(pattern)):
            name = str(path.relative_to(PROJECT_ROOT))
            if any(path.is_relative_to(kind) for kind in kind_folders):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if words.search(line):
                    offenders.append(f"{name}:{number}: {line.strip()}")
    assert offenders == []


def test_the_stored_graph_grows_with_the_model_not_with_its_states(tmp_path):
    """A 12-block GPT stores its graph once (the graph file grows with its nodes) and a snapshot of its
    opening state; no layout per combination of open modules."""
    sizes = {}
    for blocks in (2, 12):
        recipe = tmp_path / f"gpt{blocks}"
        shutil.copytree(GPT_RECIPE, recipe, ignore=shutil.ignore_patterns("__pycache__"))
        model_py = recipe / "model.py"
        model_py.write_text(model_py.read_text().replace("n_layer: int = 2", f"n_layer: int = {blocks}"))
        gpt = load_module(recipe, "model")
        torch.manual_seed(0)  # weights for the deeper model, stored as train.py stores them (the head once)
        state = gpt.GPT(gpt.GPTConfig()).state_dict()
        save_file({k: v for k, v in state.items() if k != "lm_head.weight"}, str(gpt.WEIGHTS))
        graph = trace_graph(recipe, read_metadata(recipe)["recording"]["inputs"])
        manifest = {"layers": graph["layers"], "connections": graph["connections"]}
        assert len(modules(manifest)) == 1 + blocks * 3  # h, and each block with its attention and MLP
        sizes[blocks] = (len(graph_document(manifest)) / len(graph["layers"]), len(build_preview(manifest, "h.0")))
    assert sizes[12][0] == pytest.approx(sizes[2][0], rel=0.1)  # bytes per node
    assert sizes[12][1] < 2 * sizes[2][1]  # the opening state: one block open, the others closed


def test_recipe_toml_is_served_and_changes_the_recipe_hash(tree):
    """A recipe may read its recipe.toml (GPT's vocabulary), so cached results are keyed by it too."""
    from app.domain.catalog import load_catalog

    tree.add("bert")
    before = load_catalog(tree.manifests, tree.recipes).models["bert"]
    assert before.files["recipe.toml"].content_type.startswith("text/plain")
    meta = tree.recipes / "bert" / "recipe.toml"
    meta.write_text(meta.read_text().replace('curator = "TensorViz"', 'curator = "Someone else"'))
    after = load_catalog(tree.manifests, tree.recipes).models["bert"]
    assert after.recipe_sha256 != before.recipe_sha256


def test_every_file_of_the_recipe_folder_is_served_and_keys_the_recipe_hash(tree):
    """Weights and data a recipe reads beside its code change what it computes, so they key cached results."""
    from app.domain.catalog import load_catalog

    tree.add("bert")
    before = load_catalog(tree.manifests, tree.recipes).models["bert"]
    (tree.recipes / "bert" / "weights.safetensors").write_bytes(b"\x00" * 16)
    (tree.recipes / "bert" / ".model.py.swp").write_bytes(b"editor state")
    after = load_catalog(tree.manifests, tree.recipes).models["bert"]
    assert after.files["weights.safetensors"].content_type == "application/octet-stream"
    assert ".model.py.swp" not in after.files and "__pycache__" not in after.files
    assert after.recipe_sha256 != before.recipe_sha256
    (tree.recipes / "bert" / "weights.safetensors").write_bytes(b"\x01" * 16)
    assert load_catalog(tree.manifests, tree.recipes).models["bert"].recipe_sha256 != after.recipe_sha256


GRID = {"type": "grid", "rows": "rows", "cols": 8, "min": 0, "max": 16, "required": True}


IMAGE_LAB = {"kind": "image-classifier", "sizes": {"rows": 8, "cols": 8, "levels": 16, "classes": 10},
             "words": {"thing": "digit"}}
STAGES = ({"key": "stage1_act", "title": "Stage 1"},)  # the recipe's [display] groups: the image lab draws them


def test_a_grid_field_is_declared_with_its_size_and_gives_its_schema():
    spec = lab_spec(IMAGE_LAB | {"endpoints": {name: {"method": "POST", "entry": name, "fields": {"image": GRID}}
                                               for name in ("runs", "trace")}}, {"layers": []}, STAGES)
    schema = spec.endpoints["runs"].fields["image"].json_schema()
    assert schema["minItems"] == schema["maxItems"] == 8
    assert schema["items"]["maxItems"] == 8 and schema["items"]["items"] == {"type": "integer", "minimum": 0,
                                                                              "maximum": 16}


@pytest.mark.parametrize(("change", "message"), [
    ({"method": "GET"}, "a grid field needs a JSON body; declare the endpoint POST"),
    ({"fields": {"image": GRID | {"rows": None}}}, "a grid needs positive rows and cols"),
    ({"fields": {"pixels": GRID}}, "needs an `image` grid field"),
])
def test_a_grid_declaration_the_lab_cannot_serve_is_refused(change, message):
    endpoints = {name: {"method": "POST", "entry": name, "fields": {"image": GRID}} for name in ("runs", "trace")}
    endpoints["trace"] |= change
    with pytest.raises(DeclarationError, match=re.escape(message)):
        lab_spec(IMAGE_LAB | {"endpoints": endpoints}, {"layers": []}, STAGES)


@pytest.mark.parametrize(("change", "groups", "message"), [
    ({"words": {}}, STAGES, "lab.words of a image-classifier lab needs thing"),
    ({"words": {"thing": ""}}, STAGES, "lab.words must map names to non-empty text"),
    ({}, (), "display.groups: an image-classifier lab needs the feature-map stages"),
])
def test_an_image_lab_without_its_words_or_its_stages_is_refused(change, groups, message):
    """The page names what an image shows and draws feature maps only in the recipe's own words and stages."""
    endpoints = {name: {"method": "POST", "entry": name, "fields": {"image": GRID}} for name in ("runs", "trace")}
    with pytest.raises(DeclarationError, match=re.escape(message)):
        lab_spec(IMAGE_LAB | {"endpoints": endpoints} | change, {"layers": []}, groups)


@pytest.mark.parametrize(("groups", "message"), [
    ([{"key": "stage1_act"}], "display.groups[0].title: is required"),
    ([{"key": "stage1_act", "title": "Stage 1", "colour": "mint"}], "display.groups[0].colour: is not a key"),
    ([{"key": "stage1_act", "title": ""}], "display.groups[0].title: must have at least 1 character"),
])
def test_a_group_is_declared_with_its_key_and_title_and_nothing_else(groups, message):
    from app.domain.declaration import checked

    declaration = read_metadata(PROJECT_ROOT / "recipes" / "lenet")
    declaration["display"] = {"groups": groups}
    with pytest.raises(DeclarationError, match=re.escape(message)):
        checked(declaration)


def test_a_case_is_drawn_in_its_declared_groups_and_nothing_else_is_caught_by_their_keys():
    """Maps keyed <group>_c<n> are drawn together where the first stands, with the matrix their group is drawn
    over; a key that only resembles a group's (another prefix, no number after `_c`) stays alone."""
    from app.domain.figures import Display

    groups = ({"key": "stem", "title": "Stem", "over": "image"}, {"key": "block1", "title": "Block 1", "each": "head"})
    keys = ["image", "stem_c0", "block1_c0", "stem_c1", "block1_branch", "block1_cx", "xstem_c0", "block1_c1"]
    sections = Display(groups).sections([{"key": key, "values": [[0]]} for key in keys])
    drawn = [s["matrix"]["key"] if "matrix" in s else (s["group"]["key"], [m["index"] for m in s["maps"]])
             for s in sections]
    assert drawn == ["image", ("stem", [0, 1]), ("block1", [0, 1]), "block1_branch", "block1_cx", "xstem_c0"]
    assert sections[1]["over"]["key"] == "image" and sections[2]["over"] is None


def test_the_parts_of_a_case_have_one_markup():
    """Bars, chips and metrics are written once, in templates/_parts.html; the labs clone them, never rebuild them."""
    parts = ('"bar-row"', '"bar-track"', "chip-token", 'class="metric"', 'class: "metric"', '"bar-fill')
    offenders = []
    for folder, pattern in (("templates", "*.html"), ("static/js", "*.js")):
        for path in sorted((PROJECT_ROOT / folder).rglob(pattern)):
            name = str(path.relative_to(PROJECT_ROOT))
            if name == "templates/_parts.html":
                continue
            offenders += [f"{name}: {p}" for p in parts if p in path.read_text()]
    assert offenders == []


def test_prestarted_workers_run_the_declared_warm_up_and_a_run_waits_for_them(tmp_path):
    """A worker started at prestart imports each lab's recipe and calls its [lab] warm function with the
    server's arguments before it takes a run; a run asked for meanwhile waits for it instead of starting a
    second process."""
    recipe = tmp_path / "warmable"
    recipe.mkdir()
    (recipe / "recipe.toml").write_text('[lab]\nkind = "causal-lm"\nwarm = "ready"\n'
                                        '[lab.endpoints.pid]\nmethod = "GET"\nentry = "pid"\n')
    (recipe / "lab.py").write_text(
        "import os\nfrom pathlib import Path\n\n"
        "def ready(marker):\n    Path(marker).write_text(str(os.getpid()))\n\n"
        "def pid():\n    return os.getpid()\n")
    marker = tmp_path / "warmed-by"
    pool = WorkerPool(size=1, timeout=60, torch_threads=1, seed=0)
    try:
        pool.prestart([Warmup(str(recipe), "ready", {"marker": str(marker)}), Warmup(str(GPT_RECIPE))])
        served_by = pool.run(RecipeCall.lab(recipe, "pid")).result  # asked for while the worker starts
        assert pool.pids() == [served_by]  # the one prestarted process: no second one was started
        assert marker.read_text() == str(served_by)  # it ran the warm-up before the run
    finally:
        pool.shutdown()


def test_a_warm_up_the_recipe_does_not_declare_is_refused(tmp_path):
    recipe = tmp_path / "plain"
    recipe.mkdir()
    (recipe / "recipe.toml").write_text('[lab]\nkind = "causal-lm"\n')
    (recipe / "lab.py").write_text("import os\n\ndef remove(path):\n    os.remove(path)\n")
    victim = tmp_path / "keep-me"
    victim.write_text("data")
    pool = WorkerPool(size=1, timeout=60, torch_threads=1, seed=0)
    try:
        pool.prestart([Warmup(str(recipe), "remove", {"path": str(victim)})])
        assert isinstance(pool.run(RecipeCall.replay(GPT_RECIPE)), Reply)
    finally:
        pool.shutdown()
    assert victim.read_text() == "data"
