"""The recorder: held to the seed recording, deterministic, --check, --force, and source spans that move."""

import json
import shutil
from pathlib import Path

import pytest

from app.domain.catalog import apply_keys
from app.domain.compare import compare_case, tolerance_for
from app.domain.recipes import read_metadata
from app.services.config import PROJECT_ROOT

from .conftest import BERT_MANIFEST, BERT_RECIPE, GPT_RECIPE, bert_manifest


@pytest.fixture(scope="module")
def recorder(module_app):
    return module_app.test_cli_runner()


@pytest.fixture(scope="module")
def bert_recording(recorder, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("bert")
    result = recorder.invoke(args=["record", "bert", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads((out / "manifest.json").read_text()), out


def leaf_modules(manifest: dict) -> dict:
    return {layer["id"]: layer for layer in manifest["layers"] if layer["kind"] == "layer" and "@" not in layer["id"]}


def flow(manifest: dict, immediate: bool) -> set[tuple[str, str]]:
    """Module-to-module data flow: (a, b) when b is reachable from a (immediate: through ops only)."""
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    leaves = set(leaf_modules(manifest))
    edges: dict[str, list[str]] = {}
    for e in manifest["connections"]:
        if "module" not in (layers[e["source"]]["kind"], layers[e["target"]]["kind"]):
            edges.setdefault(e["source"], []).append(e["target"])
    pairs = set()
    for start in leaves:
        stack, seen = list(edges.get(start, [])), set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            if node in leaves:
                pairs.add((start, node))
                if immediate:
                    continue
            stack += edges.get(node, [])
    return pairs


def test_recording_bert_gives_the_seeds_modules_exactly(bert_recording):
    recorded, _ = bert_recording
    seed = json.loads(BERT_MANIFEST.read_text())
    modules = lambda m: {layer["id"]: (layer["op"], layer["params"], layer["parent"], layer["kind"])  # noqa: E731
                         for layer in m["layers"] if "@" not in layer["id"] and layer["kind"] in ("layer", "module")}
    assert modules(recorded) == modules(seed)
    seed_sources = {layer["id"]: layer.get("source") for layer in seed["layers"]}
    for layer_id, layer in leaf_modules(recorded).items():
        assert layer["source"] == seed_sources[layer_id], layer_id  # declared where the seed says


def test_recording_bert_has_a_node_for_each_of_the_seeds_function_nodes(bert_recording):
    recorded, _ = bert_recording
    seed = json.loads(BERT_MANIFEST.read_text())
    ops = [layer for layer in recorded["layers"] if "@" in layer["id"]]
    for node in (layer for layer in seed["layers"] if "@" in layer["id"]):
        span = node["source"]
        candidates = [op for op in ops if op["parent"] == node["parent"]
                      and span["line"] <= op["source"]["line"] <= span["endLine"]]
        assert candidates, node["id"]
        if node["op"] != "Python":  # the seed's own name for a chain of tensor methods
            assert node["id"] in {op["id"] for op in candidates}, node["id"]
        else:  # the recipe's [graph.ops] names the ops the recorder finds on those lines
            named = read_metadata(BERT_RECIPE)["graph"]["ops"][node["id"]].split(" (")[0].split(" · ")
            assert set(named) <= {op["id"].split("@")[0] for op in candidates}, (node["id"], named)


def test_recording_bert_has_the_seeds_module_to_module_data_flow(bert_recording):
    recorded, _ = bert_recording
    seed = json.loads(BERT_MANIFEST.read_text())
    assert flow(recorded, immediate=False) == flow(seed, immediate=False)
    # The seed also wires embedding_norm straight into the attention's reshapes; the tracer follows the
    # tensors, so its direct module-to-module steps are a subset of the seed's.
    assert flow(recorded, immediate=True) <= flow(seed, immediate=True)


def test_recording_bert_reproduces_the_seeds_values(bert_recording):
    recorded, _ = bert_recording
    seed = bert_manifest()
    tol = tolerance_for(seed)
    fresh = {c["id"]: c for c in recorded["experiment"]["cases"]}
    for case in seed["experiment"]["cases"]:
        result = compare_case(case, fresh[case["id"]], tol)
        assert result["status"] == "passed", [v for v in result["values"] if v["status"] != "passed"]
        assert {k: case[k] for k in ("label", "note", "target")} == {k: fresh[case["id"]][k]
                                                                   for k in ("label", "note", "target")}


def test_two_recordings_are_identical_but_for_the_capture_time(recorder, bert_recording, tmp_path):
    first, first_dir = bert_recording
    assert recorder.invoke(args=["record", "bert", "--out", str(tmp_path)]).exit_code == 0
    second = json.loads((tmp_path / "manifest.json").read_text())
    assert first["provenance"].pop("capturedAt") != second["provenance"].pop("capturedAt")
    assert first == second
    assert (first_dir / "preview.svg").read_bytes() == (tmp_path / "preview.svg").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "preview.svg"]


def test_the_recorder_refuses_to_overwrite_the_seed_recording(recorder):
    before = BERT_MANIFEST.read_bytes()
    result = recorder.invoke(args=["record", "bert"])
    assert result.exit_code != 0 and "not made by this recorder" in result.output and "--force" in result.output
    assert BERT_MANIFEST.read_bytes() == before


def test_check_on_the_original_capture_says_what_checks_it_instead_of_a_stale_list(recorder, tmp_path):
    """bert's manifest is an original capture: --check has no recording of its own to hold it to (what it would list
    are layout differences, never numbers), so it says so and names the replay that checks its numbers; a recording
    of its own, its recorder's name removed, is still compared."""
    result = recorder.invoke(args=["record", "bert", "--check"])
    assert result.exit_code == 0 and "is an original capture" in result.output, result.output
    assert "flask --app wsgi verify bert" in result.output and "stale" not in result.output
    assert recorder.invoke(args=["record", "gpt", "--out", str(tmp_path)]).exit_code == 0
    path = tmp_path / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["provenance"]["recorder"] = 0  # another recorder's: compared, and stale
    path.write_text(json.dumps(manifest))
    stale = recorder.invoke(args=["record", "gpt", "--check", "--out", str(tmp_path)])
    assert stale.exit_code == 1 and "stale: provenance.recorder" in stale.output, stale.output


def test_force_overwrites_a_recording_the_recorder_did_not_make(make_app, tree):
    tree.add("bert")
    app = make_app(tree.config() | {"TESTING": True, "RECIPE_TIMEOUT": 60})
    result = app.test_cli_runner().invoke(args=["record", "bert", "--force"])
    assert result.exit_code == 0, result.output
    assert json.loads((tree.manifests / "bert" / "manifest.json").read_text())["provenance"]["recorder"] == 1
    again = app.test_cli_runner().invoke(args=["record", "bert"])  # its own recording: no --force needed
    assert again.exit_code == 0, again.output


RECORDED = [f.name for f in sorted((PROJECT_ROOT / "manifests").iterdir())
            if json.loads((f / "manifest.json").read_text())["provenance"].get("recorder")]


def test_the_recorder_made_the_recordings_of_the_catalog():
    assert "gpt" in RECORDED and "ddpm" in RECORDED


@pytest.mark.parametrize("slug", RECORDED)  # one test each: the sampler's check alone is a quarter of them all
def test_every_recording_the_project_made_is_current(recorder, slug):
    result = recorder.invoke(args=["record", slug, "--check"])
    assert result.exit_code == 0, result.output


def test_check_names_what_is_stale(recorder, tmp_path):
    assert recorder.invoke(args=["record", "gpt", "--out", str(tmp_path)]).exit_code == 0
    path = tmp_path / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["experiment"]["cases"][1]["metrics"][0]["value"] += 1e-3
    manifest["layers"][3]["source"]["line"] += 1
    path.write_text(json.dumps(manifest))
    result = recorder.invoke(args=["record", "gpt", "--check", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "experiment.cases[1].metrics[0].value" in result.output
    assert "manifest.layers[3].source.line" in result.output


def test_numbers_within_the_tolerance_are_current_though_the_revision_moves(recorder, tmp_path):
    """Another machine's last bits: its recording, numbers, revision and graph file alike, stays current."""
    from app.build.recorder import _sha256, content_revision
    from app.domain.catalog import GRAPH_FILE, graph_document

    assert recorder.invoke(args=["record", "gpt", "--out", str(tmp_path)]).exit_code == 0
    path = tmp_path / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["experiment"]["cases"][1]["metrics"][0]["value"] *= 1 + 1e-7
    manifest["revision"] = content_revision(manifest)
    manifest["files"][GRAPH_FILE]["sha256"] = _sha256(graph_document(manifest))
    path.write_text(json.dumps(manifest))
    result = recorder.invoke(args=["record", "gpt", "--check", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    manifest["files"][GRAPH_FILE]["sha256"] = _sha256(b"another graph")
    path.write_text(json.dumps(manifest))
    result = recorder.invoke(args=["record", "gpt", "--check", "--out", str(tmp_path)])
    assert result.exit_code == 1 and f"files.{GRAPH_FILE}" in result.output


def test_source_spans_move_with_the_code(make_app, tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(GPT_RECIPE, recipes / "gpt", ignore=shutil.ignore_patterns("__pycache__"))
    model_py = recipes / "gpt" / "model.py"
    source = model_py.read_text()
    note = '"""A note above the classes,\nfour lines long,\nthat moves\nevery span."""\n\n'
    model_py.write_text(source.replace("@dataclass", note + "@dataclass", 1))
    app = make_app({"MANIFESTS_DIR": str(tmp_path / "manifests"), "RECIPES_DIR": str(recipes), "TESTING": True})
    out = tmp_path / "out"
    result = app.test_cli_runner().invoke(args=["record", "gpt", "--out", str(out)])
    assert result.exit_code == 0, result.output
    moved = {layer["id"]: layer for layer in json.loads((out / "manifest.json").read_text())["layers"]}
    stored = {layer["id"]: layer for layer in json.loads(
        (PROJECT_ROOT / "manifests" / "gpt" / "manifest.json").read_text())["layers"]}
    lines = model_py.read_text().splitlines()
    for layer_id, layer in stored.items():
        for span in ("source", "callSource"):
            if span in layer:
                assert moved[layer_id][span]["line"] == layer[span]["line"] + 5, (layer_id, span)
    for layer_id in ("wte", "h.0.attn.c_attn", "lm_head"):
        attribute = layer_id.rsplit(".", 1)[-1]
        assert lines[moved[layer_id]["source"]["line"] - 1].strip().startswith(f"self.{attribute} = ")


def test_seed_items_get_their_keys_from_the_recipes_one_mapping():
    manifest = json.loads(BERT_MANIFEST.read_text())
    assert not any("key" in item for c in manifest["experiment"]["cases"] for item in c["vectors"])
    apply_keys(manifest, read_metadata(BERT_RECIPE)["recording"]["keys"])
    keys = [item["key"] for item in manifest["experiment"]["cases"][0]["vectors"]]
    assert keys == ["original_ids", "input_ids", "mlm_positions", "first_mask_probabilities", "nsp_probabilities"]


def test_a_lab_answer_lacking_what_its_page_reads_stops_the_recording(make_app, tmp_path):
    """The kind declares what its page reads from each endpoint (LabKind.reads); the recorder runs every
    endpoint once and names what a recipe's answer lacks, before anything is written."""
    recipes = tmp_path / "recipes"
    shutil.copytree(GPT_RECIPE, recipes / "gpt", ignore=shutil.ignore_patterns("__pycache__"))
    lab_py = recipes / "gpt" / "lab.py"
    source = lab_py.read_text()
    drifted = '    stages = [s for s in stages if s["id"] != "final_norm"]  # a recipe renamed a stage\n'
    answer = '    return {"input_ids": list(input_ids), "position": position, "stages": stages}'
    assert answer in source
    lab_py.write_text(source.replace(answer, drifted + '    return {"input_ids": list(input_ids), "stages": stages}'))
    app = make_app({"MANIFESTS_DIR": str(tmp_path / "manifests"), "RECIPES_DIR": str(recipes), "TESTING": True})
    out = tmp_path / "out"
    result = app.test_cli_runner().invoke(args=["record", "gpt", "--out", str(out)])
    assert result.exit_code == 1
    assert ("lab.endpoints.trace: trace() answers without key 'position', stage 'final_norm', "
            "which the causal-lm lab reads") in result.output
    assert not out.exists()
