"""Graph layouts: the stored snapshot and layouts are current, and collapsing means what it says."""

import html
import json
import shutil

import pytest

from app.config import PROJECT_ROOT
from app.graphlayout import all_states, build_layouts, build_preview, graph_digest, normalise, visible_graph

from .conftest import bert_manifest

STORED = PROJECT_ROOT / "manifests" / "bert"


@pytest.fixture(scope="module")
def manifest():
    return bert_manifest()


def test_graphviz_is_installed():
    assert shutil.which("dot"), "Graphviz's dot checks the stored layouts: scripts/install-test-packages"


def test_stored_layouts_are_current(manifest):
    stored = json.loads((STORED / "layout.json").read_text())
    assert stored["graph_sha256"] == graph_digest(manifest)
    assert stored == json.loads(json.dumps(build_layouts(manifest))), "run scripts/build-layouts"


def test_stored_snapshot_is_current(manifest):
    assert (STORED / "preview.svg").read_text() == build_preview(manifest), "run scripts/build-layouts"


def test_snapshot_draws_modules_as_nested_groups():
    svg = html.unescape((STORED / "preview.svg").read_text())
    assert 'id="group-encoder"' in svg and 'id="group-encoder.attention"' in svg
    assert svg.count('class="node"') == 34  # every layer but the two modules, drawn as groups


def test_every_collapse_state_is_stored(manifest):
    assert all_states(manifest) == [(), ("encoder",), ("encoder.attention",)]
    assert normalise(manifest, {"encoder", "encoder.attention"}) == ("encoder",)
    stored = json.loads((STORED / "layout.json").read_text())
    assert set(stored["states"]) == {"", "encoder", "encoder.attention"}


def test_open_modules_are_boxes_not_nodes(manifest):
    nodes, edges = visible_graph(manifest, ())
    ids = {n["id"] for n in nodes}
    assert "encoder" not in ids and "encoder.attention.query" in ids
    assert ("embedding_norm", "encoder.attention.query") in edges
    assert not any("encoder" in (s, t) for s, t in edges)


def test_a_collapsed_module_stands_in_for_its_contents(manifest):
    nodes, edges = visible_graph(manifest, ("encoder",))
    ids = {n["id"] for n in nodes}
    assert "encoder" in ids and not any(i.startswith("encoder.") or "@encoder" in i for i in ids)
    assert ("embedding_norm", "encoder") in edges
    assert ("encoder", "mlm_transform") in edges and ("encoder", "pooler") in edges
    assert len(edges) == len(set(edges)) and all(s != t for s, t in edges)


def test_layout_boxes_cover_every_visible_node(manifest):
    stored = json.loads((STORED / "layout.json").read_text())
    for key, state in stored["states"].items():
        collapsed = tuple(key.split(",")) if key else ()
        nodes, edges = visible_graph(manifest, collapsed)
        assert {n["id"] for n in state["nodes"]} == {n["id"] for n in nodes}
        assert len(state["edges"]) == len(edges)
        for node in state["nodes"]:
            assert 0 <= node["x"] and node["x"] + node["w"] <= state["width"] + 1
            assert 0 <= node["y"] and node["y"] + node["h"] <= state["height"] + 1
