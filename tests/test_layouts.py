"""The static snapshot: stored current, drawn from the recording, and collapsing means what it says."""

import html
import shutil

import pytest

from app.domain.graphlayout import build_preview, focus_state, normalise, op_label, visible_graph
from app.services.config import PROJECT_ROOT

from .conftest import bert_manifest

STORED = PROJECT_ROOT / "manifests" / "bert"


@pytest.fixture(scope="module")
def manifest():
    return bert_manifest()


def test_graphviz_is_installed():
    assert shutil.which("dot"), "Graphviz's dot checks the stored layouts: scripts/install-test-packages"


def test_stored_snapshot_is_current(manifest):
    assert (STORED / "preview.svg").read_text() == build_preview(manifest), "run scripts/build-layouts"


def test_snapshot_draws_modules_as_nested_groups():
    svg = html.unescape((STORED / "preview.svg").read_text())
    assert 'id="group-encoder"' in svg and 'id="group-encoder.attention"' in svg
    assert svg.count('class="node"') == 34  # every layer but the two modules, drawn as groups


def test_nothing_is_stored_per_state_of_the_interactive_graph():
    for folder in (PROJECT_ROOT / "manifests").iterdir():
        assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "preview.svg"], folder.name


def test_focus_states(manifest):
    assert focus_state(manifest, "encoder.attention") == ()
    assert focus_state(manifest, None) == ("encoder",)
    assert normalise(manifest, {"encoder", "encoder.attention"}) == ("encoder",)


def test_node_text_names_a_modules_class_indexing_and_an_inputs_shape():
    assert op_label({"kind": "module", "op": "Module", "className": "Block"}) == "Block"
    assert op_label({"kind": "module", "op": "Module"}) == "Module"  # the seed's modules name no class
    assert op_label({"kind": "layer", "op": "indexing", "params": {"index": "[:, 0]"}}) == "indexing [:, 0]"
    assert op_label({"kind": "input", "op": "Input", "params": {"shape": "1,6", "dtype": "torch.int64"}}) == "Input 1,6"


def test_open_modules_are_boxes_not_nodes(manifest):
    shown = visible_graph(manifest, ())
    nodes, edges = shown.nodes, shown.edges
    ids = {n["id"] for n in nodes}
    assert "encoder" not in ids and "encoder.attention.query" in ids
    assert ("embedding_norm", "encoder.attention.query") in edges
    assert not any("encoder" in (s, t) for s, t in edges)


def test_a_collapsed_module_stands_in_for_its_contents(manifest):
    shown = visible_graph(manifest, ("encoder",))
    nodes, edges = shown.nodes, shown.edges
    ids = {n["id"] for n in nodes}
    assert "encoder" in ids and not any(i.startswith("encoder.") or "@encoder" in i for i in ids)
    assert ("embedding_norm", "encoder") in edges
    assert ("encoder", "mlm_transform") in edges and ("encoder", "pooler") in edges
    assert len(edges) == len(set(edges)) and all(s != t for s, t in edges)


def test_the_graph_s_colours_live_in_one_place(manifest):
    """graphlayout.PALETTE colours the snapshot, and graph.json carries it to the page: graph.js, the
    stylesheet's graph rules and the snapshot's code name no colour of their own."""
    import json
    import re

    from app.domain import graphlayout

    hexes = re.compile(r"#[0-9a-fA-F]{6}\b|#[0-9a-fA-F]{3}\b")
    assert json.loads(graphlayout.drawing_document(manifest))["palette"] == graphlayout.PALETTE
    source = (PROJECT_ROOT / "app" / "domain" / "graphlayout.py").read_text()
    palette = source[source.index("PALETTE = {"):source.index("}\n\n", source.index("PALETTE = {"))]
    assert hexes.findall(source) == hexes.findall(palette) != []
    dot = graphlayout.to_dot(manifest, ())
    assert graphlayout.PALETTE["edge"] in dot and graphlayout.PALETTE["cluster"]["fills"][0] in dot
    assert hexes.findall((PROJECT_ROOT / "static" / "js" / "graph.js").read_text()) == []
    graph_rules = [line for line in (PROJECT_ROOT / "static" / "css" / "site.css").read_text().splitlines()
                   if line.startswith(".g-") and ":hover" not in line and "is-" not in line]
    assert graph_rules and [line for line in graph_rules if hexes.search(line) or "fill: var" in line] == []


# The page's layout, run by Node on the page's own module (text measured as 7 px a character: no canvas here): for
# each open set asked, the boxes it draws as nodes, those it draws open around their contents, and its edges.
SCENE = """
import { GraphScene } from "./static/js/graph-scene.js";
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const { graph, opens } = JSON.parse(Buffer.concat(chunks).toString());
const scene = new GraphScene(graph.layers, graph.connections);
scene.measure = (text) => 7 * text.length;
const answers = opens.map((ids) => {
  const drawn = scene.layout(new Set(ids));
  return { nodes: drawn.nodes.map((n) => n.id), open_boxes: drawn.clusters.map((c) => c.id),
           edges: drawn.edges.map((e) => [e.source, e.target]) };
});
process.stdout.write(JSON.stringify(answers));
"""


def page_scene(graph: dict, opens: list[list[str]]) -> list[dict]:
    import json
    import subprocess

    node = shutil.which("node")
    assert node, "Node runs the page's module here (installed with npm: scripts/install-test-packages)"
    done = subprocess.run([node, "--input-type=module", "-e", SCENE], input=json.dumps(
        {"graph": graph, "opens": opens}), capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("slug", ["bert", "gpt", "transformer", "gcn", "vit"])
def test_the_page_lays_out_what_the_closed_module_rule_shows(slug):
    """For no module open, every one open, each one alone and random sets, the page's layout draws the nodes, the
    open boxes and the edges that the closed-module rule gives (GraphScene's, which the snapshot asks too through
    graphlayout.visible_graph): what the page draws and what the snapshot draws are one rule's."""
    import json
    import random

    from app.domain.graphlayout import drawing_document, modules

    manifest = json.loads((PROJECT_ROOT / "manifests" / slug / "manifest.json").read_text())
    every = [m["id"] for m in modules(manifest)]
    draw = random.Random(slug)
    opens = [[], every, *([m] for m in every), *(draw.sample(every, draw.randint(1, len(every))) for _ in range(12))]
    graph = json.loads(drawing_document(manifest))
    for ids, page in zip(opens, page_scene(graph, opens), strict=True):
        shown = visible_graph(manifest, tuple(m for m in every if m not in ids))
        assert sorted(page["nodes"]) == sorted(n["id"] for n in shown.nodes), ids
        assert set(page["open_boxes"]) == shown.open_boxes, ids
        assert sorted(map(tuple, page["edges"])) == sorted(shown.edges), ids


def test_the_page_is_handed_each_layer_s_modules_outermost_first():
    import json

    from app.domain.graphlayout import drawing_document

    layers = {layer["id"]: layer for layer in json.loads(drawing_document(bert_manifest()))["layers"]}
    assert layers["encoder.attention.query"]["chain"] == ["encoder", "encoder.attention"]
    assert layers["encoder"]["chain"] == [] and layers["embedding_norm"]["chain"] == []
