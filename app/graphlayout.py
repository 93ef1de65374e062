"""Graph layouts by Graphviz `dot`, computed ahead of time and stored beside each manifest.

`scripts/build-layouts` (and the recorder) write, for each model, `preview.svg` (the static snapshot,
every module open where the graph is small enough to read so) and `layout.json` (node boxes, module
boxes and edge splines for every state of the interactive graph). Serving reads the stored files and
needs no layout binary; a test rebuilds them and fails when they are stale.

The graph keeps one open path of modules at a time (opening a module closes its open siblings, as a
tree view that follows the focus), so a model has one state per module plus the all-closed one: the
stored layouts grow with the number of modules, not with the 2^n combinations of open and closed.
"""

import hashlib
import json
import re
import subprocess
from pathlib import Path

POINTS_PER_INCH = 72
FONT = "DejaVu Sans"
MODULE_FILL = {0: "#f3f6f4", 1: "#e6eee9", 2: "#d9e6df"}  # deeper modules, darker boxes


def short_label(layer: dict) -> str:
    """`encoder.attention.query` -> `query`; traced ops like `add@encoder#0` -> `add`; an op the recipe named
    (catalog.apply_op_names) -> its name."""
    if layer.get("label") and layer["label"] != layer["id"]:
        return layer["label"]
    if "@" in layer["id"]:
        return layer["id"].split("@", 1)[0]
    return layer["id"].rsplit(".", 1)[-1]


def op_label(layer: dict) -> str:
    """The op with its sizes, e.g. `Linear 8→32`, `Embedding 16×8`."""
    p = layer.get("params") or {}
    if "in_features" in p and "out_features" in p:
        return f"{layer['op']} {p['in_features']}→{p['out_features']}"
    if "num_embeddings" in p and "embedding_dim" in p:
        return f"{layer['op']} {p['num_embeddings']}×{p['embedding_dim']}"
    if "normalized_shape" in p:
        return f"{layer['op']} {p['normalized_shape']}"
    return layer["op"]


def graph_digest(manifest: dict) -> str:
    """What the layouts depend on: the layers and connections."""
    graph = {"layers": manifest["layers"], "connections": manifest["connections"]}
    return hashlib.sha256(json.dumps(graph, sort_keys=True).encode()).hexdigest()


def modules(manifest: dict) -> list[dict]:
    return [layer for layer in manifest["layers"] if layer["kind"] == "module"]


def ancestors(layers: dict[str, dict], layer_id: str) -> list[str]:
    chain = []
    parent = layers[layer_id].get("parent")
    while parent:
        chain.append(parent)
        parent = layers[parent].get("parent")
    return chain


def normalise(manifest: dict, collapsed: set[str]) -> tuple[str, ...]:
    """Drop collapsed modules hidden inside another collapsed module: they change nothing."""
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    return tuple(sorted(m for m in collapsed if not set(ancestors(layers, m)) & collapsed))


def state_key(collapsed: tuple[str, ...]) -> str:
    return ",".join(collapsed)


def visible_graph(manifest: dict, collapsed: tuple[str, ...]) -> tuple[list[dict], list[tuple[str, str]]]:
    """Nodes and edges with each collapsed module standing in for everything inside it.

    Open modules are drawn as boxes around their contents, not as nodes, so an edge that names an open
    module is left out: the edges of its contents already carry that flow.
    """
    layers = {layer["id"]: layer for layer in manifest["layers"]}

    def shown_as(layer_id: str) -> str:
        outermost = [a for a in ancestors(layers, layer_id) if a in collapsed]
        return outermost[-1] if outermost else layer_id

    def is_node(layer_id: str) -> bool:
        layer = layers[layer_id]
        return shown_as(layer_id) == layer_id and (layer["kind"] != "module" or layer_id in collapsed)

    nodes = [layer for layer in manifest["layers"] if is_node(layer["id"])]
    edges: list[tuple[str, str]] = []
    for edge in manifest["connections"]:
        source, target = shown_as(edge["source"]), shown_as(edge["target"])
        if source != target and is_node(source) and is_node(target) and (source, target) not in edges:
            edges.append((source, target))
    return nodes, edges


def _dot_id(text: str) -> str:
    """A DOT quoted string: only backslash, quote and line breaks need escaping; UTF-8 stays as it is."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")
    return f'"{escaped}"'


def to_dot(manifest: dict, collapsed: tuple[str, ...]) -> str:
    """Graphviz source: top-to-bottom, open modules as nested clusters."""
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    nodes, edges = visible_graph(manifest, collapsed)
    lines = [
        "digraph G {",
        f'  graph [rankdir=TB, nodesep=0.25, ranksep=0.3, fontname="{FONT}", fontsize=11, '
        'bgcolor="transparent", pad=0.2];',
        f'  node [shape=box, style="rounded,filled", fillcolor="#ffffff", color="#55606e", '
        f'fontname="{FONT}", fontsize=10, penwidth=1, margin="0.12,0.04", height=0.3];',
        '  edge [color="#7b8794", arrowsize=0.6, penwidth=1];',
    ]

    def emit(parent: str | None, depth: int) -> None:
        pad = "  " * (depth + 1)
        for node in nodes:
            if node.get("parent") == parent or (parent is None and node.get("parent") not in layers):
                label = _dot_id(short_label(node))[:-1] + "\\n" + _dot_id(op_label(node))[1:]
                fill = "#fdf3e6" if node["kind"] == "module" else "#ffffff"
                lines.append(f'{pad}{_dot_id(node["id"])} [label={label}, fillcolor="{fill}", '
                             f'id={_dot_id("node-" + node["id"])}];')
        for module in modules(manifest):
            if module.get("parent") == parent and module["id"] not in collapsed and not any(
                a in collapsed for a in ancestors(layers, module["id"])
            ):
                lines.append(f'{pad}subgraph {_dot_id("cluster_" + module["id"])} {{')
                lines.append(f'{pad}  label={_dot_id(module["id"])}; labeljust=l; style="rounded,filled"; '
                             f'fillcolor="{MODULE_FILL[min(depth, 2)]}"; color="#9aa8a0"; '
                             f'id={_dot_id("group-" + module["id"])};')
                emit(module["id"], depth + 1)
                lines.append(f"{pad}}}")

    emit(None, 0)
    for source, target in edges:
        lines.append(f"  {_dot_id(source)} -> {_dot_id(target)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def run_dot(source: str, fmt: str) -> str:
    done = subprocess.run(["dot", f"-T{fmt}"], input=source, capture_output=True, text=True, check=True)
    return done.stdout


def dot_version() -> str:
    done = subprocess.run(["dot", "-V"], capture_output=True, text=True, check=True)
    return done.stderr.strip()


def _points(text: str) -> list[list[float]]:
    return [[round(float(x), 2), round(float(y), 2)] for x, y in (p.split(",") for p in text.split())]


def parse_layout(dot_json: dict) -> dict:
    """Node boxes, module boxes and edges from `dot -Tjson`, with y flipped to grow downwards."""
    _, _, width, height = (float(v) for v in dot_json["bb"].split(","))

    def flip(point: list[float]) -> list[float]:
        return [point[0], round(height - point[1], 2)]

    nodes, clusters, by_gvid = [], [], {}
    for obj in dot_json.get("objects", []):
        if "nodes" in obj or obj.get("name", "").startswith("cluster_"):
            x0, y0, x1, y1 = (float(v) for v in obj["bb"].split(","))
            clusters.append({"id": obj["name"].removeprefix("cluster_"), "x": x0, "y": round(height - y1, 2),
                             "w": round(x1 - x0, 2), "h": round(y1 - y0, 2)})
            continue
        x, y = (float(v) for v in obj["pos"].split(","))
        w, h = float(obj["width"]) * POINTS_PER_INCH, float(obj["height"]) * POINTS_PER_INCH
        by_gvid[obj["_gvid"]] = obj["name"]
        nodes.append({"id": obj["name"], "x": round(x - w / 2, 2), "y": round(height - y - h / 2, 2),
                      "w": round(w, 2), "h": round(h, 2)})
    edges = []
    for edge in dot_json.get("edges", []):
        pos = edge["pos"]
        end = None
        match = re.match(r"e,([\d.]+),([\d.]+) (.*)", pos)
        if match:
            end = flip([round(float(match[1]), 2), round(float(match[2]), 2)])
            pos = match[3]
        edges.append({"source": by_gvid[edge["tail"]], "target": by_gvid[edge["head"]],
                      "points": [flip(p) for p in _points(pos)], "arrow": end})
    return {"width": round(width, 2), "height": round(height, 2), "nodes": nodes, "clusters": clusters,
            "edges": edges}


def focus_state(manifest: dict, focus: str | None) -> tuple[str, ...]:
    """The collapsed modules when `focus` and its ancestors are open and every other module is closed."""
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    open_path = set(ancestors(layers, focus)) | {focus} if focus else set()
    return normalise(manifest, {m["id"] for m in modules(manifest)} - open_path)


def all_states(manifest: dict) -> list[tuple[str, ...]]:
    """Every state the explorer can show: each module in focus, and none."""
    states = {focus_state(manifest, focus) for focus in [None, *(m["id"] for m in modules(manifest))]}
    return sorted(states, key=lambda s: (len(s), s))


def default_focus(manifest: dict) -> str | None:
    """With modules nested in one chain, open them all; with siblings, start with every module closed."""
    groups = modules(manifest)
    deepest = [m for m in groups if not any(g.get("parent") == m["id"] for g in groups)]
    return deepest[0]["id"] if len(deepest) == 1 else None


def build_layouts(manifest: dict, focus: str | None = None) -> dict:
    """The layout.json document for a manifest; `focus` is the module open when the page loads."""
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    if focus is not None and layers.get(focus, {}).get("kind") != "module":
        raise ValueError(f"graph.focus names no module: {focus!r}")
    states = {}
    for collapsed in all_states(manifest):
        layout = parse_layout(json.loads(run_dot(to_dot(manifest, collapsed), "json")))
        for node in layout["nodes"]:
            node |= {"label": short_label(layers[node["id"]]), "op": op_label(layers[node["id"]]),
                     "kind": layers[node["id"]]["kind"]}
        states[state_key(collapsed)] = layout
    return {
        "generator": dot_version(),
        "graph_sha256": graph_digest(manifest),
        "modules": [{"id": m["id"], "parent": m.get("parent")} for m in modules(manifest)],
        "focus": focus if focus is not None else default_focus(manifest),
        "states": states,
    }


SNAPSHOT_ALL_OPEN = 120  # graphs up to this many nodes are drawn with every module open in the snapshot


def build_preview(manifest: dict, focus: str | None = None) -> str:
    """The static snapshot: every module open, or, for a graph too large to read that way (hundreds of nodes
    make a drawing thousands of pixels tall), the state the interactive graph opens with."""
    if len(manifest["layers"]) <= SNAPSHOT_ALL_OPEN:
        return run_dot(to_dot(manifest, ()), "svg")
    return run_dot(to_dot(manifest, focus_state(manifest, focus or default_focus(manifest))), "svg")


def layout_bytes(manifest: dict, focus: str | None = None) -> bytes:
    """layout.json as stored: compact, since a deep model has many states."""
    return (json.dumps(build_layouts(manifest, focus), separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def write_model_layouts(folder: Path, manifest: dict, focus: str | None = None) -> list[Path]:
    """Rebuild preview.svg and layout.json beside a manifest (as the catalog reads it); returns the files
    written."""
    layout = folder / "layout.json"
    preview = folder / "preview.svg"
    layout.write_bytes(layout_bytes(manifest, focus))
    preview.write_text(build_preview(manifest, focus))
    return [layout, preview]
