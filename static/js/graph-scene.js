// The graph as drawn for a set of open modules: each open module's contents are laid out on their own
// (graph-layout.js) and placed inside its box, so opening one module lays out only that module and the
// modules around it, whatever else is open. An edge that crosses a module's border runs through a port on
// it: in at the top, out at the bottom, one port per value that crosses.

import { edgeKey, layered } from "./graph-layout.js";

export const NODE_HEIGHT = 32; // a node's two lines of text
const NODE_PAD = 20;
// A node drawn with what it computed on the lab's input: the drawing's box below its two lines of text.
export const PICTURE = Object.freeze({ w: 96, h: 30, pad: 5 });
const PORT = 1;
const PORT_MARK = "\u0002"; // in port ids (`in␂<source>`, `out␂<source>`): a character no recorded id holds
const GROUP_PAD = 12;
const TITLE = 22;
const FONT = "10px system-ui, 'DejaVu Sans', sans-serif";
const TITLE_FONT = "600 11px system-ui, 'DejaVu Sans', sans-serif";

export class GraphScene {
  /** @param {object[]} layers the recorded layers, each with `shown` (its node's text) and `chain` (the modules
   * around it, outermost first, as the server walks its parents); @param {object[]} connections */
  constructor(layers, connections) {
    this.layers = new Map(layers.map((l) => [l.id, l]));
    this.chains = new Map(layers.map((l) => [l.id, l.chain])); // layer -> its ancestors, outermost first
    const parentOf = (l) => l.chain.at(-1) ?? null;
    this.children = new Map([[null, []]]);
    for (const layer of layers) {
      const parent = parentOf(layer);
      if (!this.children.has(parent)) this.children.set(parent, []);
      this.children.get(parent).push(layer.id);
    }
    this.modules = layers.filter((l) => l.kind === "module").map((l) => ({ id: l.id, parent: parentOf(l) }));
    this.connections = connections.filter((c) => this.layers.has(c.source) && this.layers.has(c.target));
    // What each node says, as the server words it (the snapshot's rule): { label, op }.
    this.text = new Map(layers.map((l) => [l.id, l.shown ?? { label: l.id, op: l.op }]));
    this.widths = new Map();
    this.local = new Map(); // module (or null) -> { key, layout }: a module's contents, laid out once per shape
    this.context = null;
  }

  /** The modules around a layer, innermost first. */
  ancestors(id) {
    return [...this.chains.get(id) ?? []].reverse();
  }

  measure(text, font = FONT) {
    const key = `${font}|${text}`;
    if (!this.widths.has(key)) {
      this.context ??= document.createElement("canvas").getContext("2d");
      this.context.font = font;
      this.widths.set(key, this.context.measureText(text).width);
    }
    return this.widths.get(key);
  }

  /** The node that stands for a layer: itself, or the outermost closed module around it. */
  shownAs(id, open) {
    for (const a of this.chains.get(id) ?? []) if (!open.has(a)) return a;
    return id;
  }

  /** Whether a layer is drawn as a box of its own (a node, or a closed module). */
  isNode(id, open) {
    return this.shownAs(id, open) === id && !this.isOpenBox(id, open);
  }

  /** Whether a layer is a module drawn open, as a box around its contents: open, and every module around it open. */
  isOpenBox(id, open) {
    return this.layers.get(id).kind === "module" && open.has(id) && this.shownAs(id, open) === id;
  }

  /** The edges between the boxes drawn with `open` modules open, each once: a connection drawn from and to what
   * stands for its ends. The snapshot asks these in Node too (graphlayout.visible_graph): the rule has this home. */
  visibleEdges(open) {
    const edges = new Map();
    for (const c of this.connections) {
      const s = this.shownAs(c.source, open);
      const t = this.shownAs(c.target, open);
      if (s !== t && this.isNode(s, open) && this.isNode(t, open)) edges.set(edgeKey(s, t), [s, t]);
    }
    return edges;
  }

  /** Lay the graph out with `open` modules open (an open module inside a closed one stays hidden); a node in
   * `pictured` is drawn taller, with what it computed below its name. */
  layout(open, pictured = new Set()) {
    const nodes = [];
    const edges = this.visibleEdges(open);
    // Each edge is cut into pieces, one per level it passes: out of each open module around its source,
    // across the level both share, into each open module around its target.
    const levels = new Map(); // module (or null) -> { ports: Map, edges: Map }
    const level = (m) => {
      if (!levels.has(m)) levels.set(m, { ports: new Map(), edges: new Map() });
      return levels.get(m);
    };
    const pieces = [];
    for (const [s, t] of edges.values()) {
      const up = this.chains.get(s);
      const down = this.chains.get(t);
      let common = 0;
      while (common < up.length && common < down.length && up[common] === down[common]) common++;
      const shared = common ? up[common - 1] : null;
      const steps = [];
      let from = s;
      for (let i = up.length - 1; i >= common; i--) {
        const port = `out${PORT_MARK}${s}`;
        level(up[i]).ports.set(port, "max");
        level(up[i]).edges.set(edgeKey(from, port), [from, port]);
        steps.push([up[i], from, port]);
        from = up[i];
      }
      const into = common < down.length ? down[common] : t;
      level(shared).edges.set(edgeKey(from, into), [from, into]);
      steps.push([shared, from, into]);
      for (let i = common; i < down.length; i++) {
        const port = `in${PORT_MARK}${s}`;
        const next = i + 1 < down.length ? down[i + 1] : t;
        level(down[i]).ports.set(port, "min");
        level(down[i]).edges.set(edgeKey(port, next), [port, next]);
        steps.push([down[i], port, next]);
      }
      pieces.push({ source: s, target: t, steps });
    }
    // Sizes from the inside out: a module's box holds its laid-out contents.
    const size = new Map();
    const boxOf = (id) => {
      if (size.has(id)) return size.get(id);
      let box;
      if (this.isOpenBox(id, open)) {
        const inner = this.arrange(id, level(id), boxOf);
        const title = this.measure(`${id}  ▾`, TITLE_FONT) + 2 * GROUP_PAD;
        box = { w: Math.max(inner.width + 2 * GROUP_PAD, title), h: inner.height + TITLE + GROUP_PAD, inner };
      } else {
        const { label, op, plain } = this.text.get(id);
        const extra = this.layers.get(id).kind === "module" ? 14 : 0; // the ▸ after a closed module's name
        const w = Math.max(this.measure(label) + extra, this.measure(plain ?? op)) + NODE_PAD;
        box = pictured.has(id) ? { w: Math.max(w, PICTURE.w + 2 * PICTURE.pad), h: NODE_HEIGHT + PICTURE.h + PICTURE.pad }
          : { w, h: NODE_HEIGHT };
      }
      size.set(id, box);
      return box;
    };
    const root = this.arrange(null, level(null), boxOf);
    // Places from the outside in.
    const origin = new Map([[null, [0, 0]]]);
    const clusters = [];
    const place = (inner, [ox, oy]) => {
      for (const [id, b] of inner.boxes) {
        if (id.includes(PORT_MARK)) continue;
        const box = { id, x: ox + b.x, y: oy + b.y, w: b.w, h: b.h };
        const own = size.get(id);
        if (own?.inner) {
          clusters.push({ ...box, depth: this.chains.get(id).length });
          const at = [box.x + (box.w - own.inner.width) / 2, box.y + TITLE];
          origin.set(id, at);
          place(own.inner, at);
        } else {
          const { label, op, plain } = this.text.get(id);
          nodes.push({ ...box, label, op, plain, kind: this.layers.get(id).kind });
        }
      }
    };
    place(root, [0, 0]);
    const drawn = pieces.map(({ source, target, steps }) => {
      const points = [];
      for (const [m, a, b] of steps) {
        const [ox, oy] = origin.get(m);
        const route = (m === null ? root : size.get(m).inner).routes.get(edgeKey(a, b));
        for (const [x, y] of route) points.push([ox + x, oy + y]);
      }
      return { source, target, points };
    });
    return { width: root.width, height: root.height, nodes, clusters, edges: drawn };
  }

  /** One level's contents laid out, kept while its shape (members, sizes, edges, ports) is the same. */
  arrange(m, { ports, edges }, boxOf) {
    const members = this.children.get(m) ?? [];
    const nodes = members.map((id) => ({ id, ...boxOf(id) }));
    for (const [port, rank] of ports) nodes.push({ id: port, w: PORT, h: PORT, rank });
    const list = [...edges.values()];
    const key = nodes.map((n) => `${n.id}:${n.w.toFixed(1)}x${n.h.toFixed(1)}`).join("|") + "#" + [...edges.keys()].join("|");
    const kept = this.local.get(m);
    if (kept?.key === key) return kept.layout;
    const layout = layered(nodes, list);
    this.local.set(m, { key, layout });
    return layout;
  }
}
