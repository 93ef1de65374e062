"""The static architecture snapshot (preview.svg), drawn by Graphviz `dot` ahead of time.

The recorder and `scripts/build-layouts` write it beside each manifest: every module open where the graph
is small enough to read so, else the state the interactive graph opens with. Serving reads the stored file
and needs no layout binary; a test rebuilds it and fails when it is stale. The interactive graph is laid out
in the browser (static/js/graph-scene.js), a module's contents as it opens, so nothing per state is stored.
"""

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .plain_names import plain_name

FONT = "DejaVu Sans"
# The graph's colours, here alone: the snapshot draws with them, and graph.json carries them to the page.
PALETTE = {
    "node": {"fill": "#ffffff", "stroke": "#55606e", "text": "#1d2530", "op": "#4a5563"},
    "module": {"fill": "#fdf3e6", "stroke": "#55606e"},  # a closed module
    "cluster": {"fills": ["#eef4f1", "#e1ece6", "#d5e4dc"], "stroke": "#9aa8a0", "text": "#3b4a42"},  # deeper, darker
    "edge": "#8a96a3",
}


def short_label(layer: dict) -> str:
    """`encoder.attention.query` -> `query`, `transformer.h.0` -> `h.0`; traced ops like `add@encoder#0` -> `add`;
    an op the recipe named (catalog.apply_op_names) -> its name."""
    if layer.get("module"):  # one of several calls of a module: `act (2/2)`
        return f"{layer['module'].rsplit('.', 1)[-1]} ({layer.get('call')}/{layer.get('calls')})"
    if layer.get("label") and layer["label"] != layer["id"]:
        return layer["label"]
    if "@" in layer["id"]:
        return layer["id"].split("@", 1)[0]
    parts = layer["id"].split(".")
    return ".".join(parts[-2:]) if parts[-1].isdigit() else parts[-1]  # a list's item: `h.0`, not `0`


def op_label(layer: dict) -> str:
    """The op with its sizes, e.g. `Linear 8→32`, `Embedding 16×8`, `indexing [:, 0]`; a module's class; and
    `· shared` where the module holds a parameter another module holds too (tied weights)."""
    p = layer.get("params") or {}
    op = layer.get("className") or layer["op"] if layer["kind"] == "module" else layer["op"]
    if "in_features" in p and "out_features" in p:
        op = f"{op} {p['in_features']}→{p['out_features']}"
    elif "num_embeddings" in p and "embedding_dim" in p:
        op = f"{op} {p['num_embeddings']}×{p['embedding_dim']}"
    elif "normalized_shape" in p:
        op = f"{op} {p['normalized_shape']}"
    elif "index" in p:
        op = f"{op} {p['index']}"
    elif layer["kind"] == "input" and "shape" in p:
        op = f"{op} {p['shape']}"
    return f"{op} · shared" if layer.get("sharedParams") else op


OP_CALL = re.compile(r"^(?P<short>[^@]+)@(?P<where>.+)#(?P<index>\d+)$")  # the recorder's name of an op: add@encoder#0


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def in_words(layer: dict, model: str) -> str | None:
    """An op's recorded name in plain words (`add@encoder#0`: "the 1st torch.add in encoder's forward"), where
    `model` is the model's class, whose own forward is named by it; None for a node whose name needs no reading."""
    found = OP_CALL.match(layer["id"])
    if not found:
        return None
    where = "the model's own forward" if found["where"] == model else f"{found['where']}'s forward"
    return f"the {ordinal(int(found['index']) + 1)} {layer['op']} in {where}"


def shown(layer: dict, model: str, names: dict[str, str] | None = None) -> dict:
    """What a node says: its label and op, its plain name (plain_names.plain_name: `names` are the recipe's), and,
    for an op, its recorded name in words."""
    words = in_words(layer, model)
    plain = plain_name(layer, names or {})
    return {"label": short_label(layer), "op": op_label(layer)} | ({"plain": plain} if plain else {}) \
        | ({"in_words": words} if words else {})


def drawing_document(manifest: dict, names: dict[str, str] | None = None) -> bytes:
    """The graph as the interactive graph draws it: the recorded layers, each with the text its node shows
    (`shown`: label and op, by the rule the snapshot uses, and an op's name in plain words) and the modules around
    it (`chain`, outermost first: the parent walk is made here alone), and the connections. Compact: it grows with
    the graph, about 350 bytes a node (docs/recipes.md, "At scale")."""
    model = manifest.get("className", "")
    by_id = {layer["id"]: layer for layer in manifest["layers"]}
    layers = [layer | {"shown": shown(layer, model, names), "chain": ancestors(by_id, layer["id"])[::-1]}
              for layer in manifest["layers"]]
    document = {"layers": layers, "connections": [{"source": c["source"], "target": c["target"]}
                                                  for c in manifest["connections"]], "palette": PALETTE}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def modules(manifest: dict) -> list[dict]:
    return [layer for layer in manifest["layers"] if layer["kind"] == "module"]


def ancestors(layers: dict[str, dict], layer_id: str) -> list[str]:
    """The layer's parents, innermost first. A loaded manifest's parents never loop (schema.py refuses one); the
    walk stops at a layer it has seen all the same, so that no walk over a manifest is unbounded."""
    chain: list[str] = []
    parent = layers[layer_id].get("parent")
    while parent in layers and parent not in chain and parent != layer_id:
        chain.append(parent)
        parent = layers[parent].get("parent")
    return chain


def normalise(manifest: dict, collapsed: set[str]) -> tuple[str, ...]:
    """Drop collapsed modules hidden inside another collapsed module: they change nothing."""
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    return tuple(sorted(m for m in collapsed if not set(ancestors(layers, m)) & collapsed))


@dataclass(frozen=True)
class Shown:
    """What a set of open modules shows: the boxes drawn as nodes (a layer, or a closed module standing in for
    everything inside it), the edges between them, each once, and the modules drawn open, as boxes around their
    contents (an edge that names an open module is left out: the edges of its contents carry that flow)."""

    nodes: list[dict]
    edges: list[tuple[str, str]]
    open_boxes: set[str]


# The page's own graph module decides what a set of open modules shows; the snapshot asks it, in Node, so that the
# closed-module rule has one home (static/js/graph-scene.js's GraphScene).
SCENE = Path(__file__).resolve().parents[2] / "static" / "js" / "graph-scene.js"
ASK_SCENE = """
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const { scene: url, graph, open: ids } = JSON.parse(Buffer.concat(chunks).toString());
const { GraphScene } = await import(url);
const scene = new GraphScene(graph.layers, graph.connections);
const open = new Set(ids);
const all = graph.layers.map((l) => l.id);
process.stdout.write(JSON.stringify({ nodes: all.filter((id) => scene.isNode(id, open)),
  edges: [...scene.visibleEdges(open).values()], open_boxes: all.filter((id) => scene.isOpenBox(id, open)) }));
"""


def visible_graph(manifest: dict, collapsed: tuple[str, ...]) -> Shown:
    """What the graph shows with these modules collapsed and every other open, as the page draws it."""
    opened = [m["id"] for m in modules(manifest) if m["id"] not in collapsed]
    # The page's own graph file, passed on as the text it is: at 10,000 nodes it is megabytes, parsed once, in Node.
    asked = f'{{"scene":{json.dumps(SCENE.as_uri())},"open":{json.dumps(opened)},"graph":'
    try:
        done = subprocess.run(["node", "--input-type=module", "-e", ASK_SCENE],
                              input=asked + drawing_document(manifest).decode() + "}",
                              capture_output=True, text=True, check=True)
    except FileNotFoundError:
        raise RuntimeError("drawing a graph's snapshot asks the page's graph module what shows, in Node: install "
                           "it (apt-get install -y nodejs)") from None
    answer = json.loads(done.stdout)
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    return Shown([layers[i] for i in answer["nodes"]], [tuple(e) for e in answer["edges"]], set(answer["open_boxes"]))


def _dot_id(text: str) -> str:
    """A DOT quoted string: only backslash, quote and line breaks need escaping; UTF-8 stays as it is."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")
    return f'"{escaped}"'


def to_dot(manifest: dict, collapsed: tuple[str, ...]) -> str:
    """Graphviz source: top-to-bottom, open modules as nested clusters."""
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    shown = visible_graph(manifest, collapsed)
    plain, cluster = PALETTE["node"], PALETTE["cluster"]
    lines = [
        "digraph G {",
        f'  graph [rankdir=TB, nodesep=0.25, ranksep=0.3, fontname="{FONT}", fontsize=11, '
        'bgcolor="transparent", pad=0.2];',
        f'  node [shape=box, style="rounded,filled", fillcolor="{plain["fill"]}", color="{plain["stroke"]}", '
        f'fontcolor="{plain["text"]}", fontname="{FONT}", fontsize=10, penwidth=1, margin="0.12,0.04", height=0.3];',
        f'  edge [color="{PALETTE["edge"]}", arrowsize=0.6, penwidth=1];',
    ]

    def emit(parent: str | None, depth: int) -> None:
        pad = "  " * (depth + 1)
        for node in shown.nodes:
            if node.get("parent") == parent or (parent is None and node.get("parent") not in layers):
                label = _dot_id(short_label(node))[:-1] + "\\n" + _dot_id(op_label(node))[1:]
                fill = PALETTE["module" if node["kind"] == "module" else "node"]["fill"]
                lines.append(f'{pad}{_dot_id(node["id"])} [label={label}, fillcolor="{fill}", '
                             f'id={_dot_id("node-" + node["id"])}];')
        for module in modules(manifest):
            if module.get("parent") == parent and module["id"] in shown.open_boxes:
                lines.append(f'{pad}subgraph {_dot_id("cluster_" + module["id"])} {{')
                lines.append(f'{pad}  label={_dot_id(module["id"])}; labeljust=l; style="rounded,filled"; '
                             f'fillcolor="{cluster["fills"][min(depth, 2)]}"; color="{cluster["stroke"]}"; '
                             f'fontcolor="{cluster["text"]}"; '
                             f'id={_dot_id("group-" + module["id"])};')
                emit(module["id"], depth + 1)
                lines.append(f"{pad}}}")

    emit(None, 0)
    for source, target in shown.edges:
        lines.append(f"  {_dot_id(source)} -> {_dot_id(target)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def run_dot(source: str, fmt: str) -> str:
    done = subprocess.run(["dot", f"-T{fmt}"], input=source, capture_output=True, text=True, check=True)
    return done.stdout


def open_path(manifest: dict, focus: str | None) -> list[str]:
    """The modules open in the first view: `focus` and its ancestors, every other module closed. The page
    opens with these (data-graph-open) and the snapshot of a large graph draws them."""
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    return [focus, *ancestors(layers, focus)] if focus in layers else []


def focus_state(manifest: dict, focus: str | None) -> tuple[str, ...]:
    """The collapsed modules of the first view (open_path)."""
    return normalise(manifest, {m["id"] for m in modules(manifest)} - set(open_path(manifest, focus)))


def default_focus(manifest: dict) -> str | None:
    """With modules nested in one chain, open them all; with siblings, start with every module closed."""
    groups = modules(manifest)
    deepest = [m for m in groups if not any(g.get("parent") == m["id"] for g in groups)]
    return deepest[0]["id"] if len(deepest) == 1 else None


SNAPSHOT_ALL_OPEN = 120  # graphs up to this many nodes are drawn with every module open in the snapshot


def build_preview(manifest: dict, focus: str | None = None) -> str:
    """The static snapshot: every module open, or, for a graph too large to read that way (hundreds of nodes
    make a drawing thousands of pixels tall), the state the interactive graph opens with."""
    if len(manifest["layers"]) <= SNAPSHOT_ALL_OPEN:
        return run_dot(to_dot(manifest, ()), "svg")
    return run_dot(to_dot(manifest, focus_state(manifest, focus or default_focus(manifest))), "svg")


def write_preview(folder: Path, manifest: dict, focus: str | None = None) -> Path:
    """Rebuild preview.svg beside a manifest (as the catalog reads it)."""
    preview = folder / "preview.svg"
    preview.write_text(build_preview(manifest, focus))
    return preview
