// The interactive architecture graph: layouts precomputed by Graphviz (layout.json), drawn as SVG,
// with pan and zoom, module groups that expand and collapse, node selection and a tour highlight.

import { downloadSvg, svgEl } from "./charts.js";

const MIN_ZOOM = 0.15;
const MAX_ZOOM = 4;
const READABLE_ZOOM = 0.85; // Fit never shrinks the 10 px labels below about 8.5 px: a larger graph scrolls
const COLOURS = {
  node: { fill: "#ffffff", stroke: "#55606e" },
  module: { fill: "#fdf3e6", stroke: "#55606e" },
  cluster: ["#eef4f1", "#e1ece6", "#d5e4dc"],
  edge: "#8a96a3",
};

export class GraphView {
  constructor(stage, layout, manifest, { onSelect = () => {}, onToggle = () => {} } = {}) {
    this.stage = stage;
    this.layout = layout;
    this.layers = new Map(manifest.layers.map((l) => [l.id, l]));
    // The op each node shows, as the layouts name it (an op a capture recorded only as "Python" is named there).
    this.ops = new Map(Object.values(layout.states).flatMap((s) => s.nodes.map((n) => [n.id, n.op])));
    this.modules = layout.modules;
    this.collapsed = new Set();
    this.focusOn(layout.focus ?? null);
    this.view = { x: 0, y: 0, k: 1 };
    this.selected = null;
    this.target = null;
    this.onSelect = onSelect;
    this.onToggle = onToggle;
    this.svg = svgEl("svg", { xmlns: "http://www.w3.org/2000/svg", "aria-hidden": "false" });
    this.viewport = svgEl("g", { class: "viewport" });
    this.svg.append(this.viewport);
    stage.replaceChildren(this.svg);
    this.bindPanZoom();
    this.render();
    this.fitWidth();
  }

  ancestors(id) {
    const chain = [];
    let parent = this.layers.get(id)?.parent;
    while (parent) {
      chain.push(parent);
      parent = this.layers.get(parent)?.parent;
    }
    return chain;
  }

  stateKey() {
    return [...this.collapsed].filter((m) => !this.ancestors(m).some((a) => this.collapsed.has(a))).sort().join(",");
  }

  current() {
    return this.layout.states[this.stateKey()];
  }

  /** The node or open module box that stands for a layer in the current state. */
  visibleFor(id) {
    const hidden = this.ancestors(id).filter((a) => this.collapsed.has(a));
    return hidden.length ? hidden[hidden.length - 1] : id;
  }

  render() {
    const state = this.current();
    const hadFocus = this.viewport.contains(document.activeElement); // the keyboard is in the graph: keep it there
    this.viewport.replaceChildren();
    const depthOf = (id) => this.ancestors(id).length;
    for (const c of state.clusters) {
      const g = svgEl("g", { class: `g-cluster depth-${Math.min(depthOf(c.id), 2)}`, "data-id": c.id });
      g.append(svgEl("rect", {
        x: c.x, y: c.y, width: c.w, height: c.h, rx: 8, fill: COLOURS.cluster[Math.min(depthOf(c.id), 2)],
        stroke: "#9aa8a0",
      }));
      const label = svgEl("text", { x: c.x + 8, y: c.y + 15, "font-size": 11, "font-weight": 600, fill: "#3b4a42", class: "g-cluster-title" }, `${c.id}  ▾`);
      label.append(svgEl("title", {}, `Collapse ${c.id}`));
      label.addEventListener("click", (e) => {
        e.stopPropagation();
        this.toggle(c.id);
      });
      g.append(label);
      this.viewport.append(g);
    }
    for (const e of state.edges) {
      const p = e.points;
      let d = `M${p[0][0]},${p[0][1]}`;
      for (let i = 1; i + 2 < p.length; i += 3) d += ` C${p[i][0]},${p[i][1]} ${p[i + 1][0]},${p[i + 1][1]} ${p[i + 2][0]},${p[i + 2][1]}`;
      const g = svgEl("g", { "data-source": e.source, "data-target": e.target });
      g.append(svgEl("path", { d, class: "g-edge", fill: "none", stroke: COLOURS.edge }));
      if (e.arrow) g.append(arrowHead(p[p.length - 1], e.arrow));
      this.viewport.append(g);
    }
    for (const n of state.nodes) {
      const layer = this.layers.get(n.id);
      const isModule = n.kind === "module";
      const colours = isModule ? COLOURS.module : COLOURS.node;
      const g = svgEl("g", {
        class: `g-node${isModule ? " is-module" : ""}`, "data-id": n.id, tabindex: -1, role: "button",
        // The name starts with the visible text (label, then op), as speech-input users say what they see.
        "aria-label": `${n.label} ${n.op}${isModule ? ", collapsed module: press Enter for details" : ""} (${n.id})`,
      });
      g.append(svgEl("rect", { x: n.x, y: n.y, width: n.w, height: n.h, rx: 6, fill: colours.fill, stroke: colours.stroke }));
      g.append(svgEl("text", { x: n.x + n.w / 2, y: n.y + n.h / 2 - 2, "text-anchor": "middle", "font-size": 10, fill: "#1d2530" }, isModule ? `${n.label} ▸ ` : `${n.label} `)); // the space parts label and op in the text a name must contain
      g.append(svgEl("text", { x: n.x + n.w / 2, y: n.y + n.h / 2 + 10, "text-anchor": "middle", "font-size": 10, class: "g-op", fill: "#4a5563" }, n.op));
      g.addEventListener("click", () => this.select(n.id));
      g.addEventListener("focus", () => this.rove(n.id));
      g.addEventListener("keydown", (ev) => this.nodeKey(ev, n.id));
      g.dataset.layer = layer ? layer.id : n.id;
      this.viewport.append(g);
    }
    this.svg.setAttribute("aria-label", `Architecture graph, ${state.nodes.length} nodes`);
    // Reading order for the keyboard: top to bottom, then left to right, as the graph is drawn.
    this.order = [...state.nodes].sort((a, b) => a.y - b.y || a.x - b.x).map((n) => n.id);
    this.rove(this.roving && this.order.includes(this.visibleFor(this.roving)) ? this.visibleFor(this.roving) : this.order[0]);
    this.mark();
    this.apply();
    if (hadFocus) this.elementFor(this.roving)?.focus({ preventScroll: true });
  }

  /** The graph is one tab stop: the node that last had the focus (roving tabindex). */
  rove(id) {
    for (const node of this.viewport.querySelectorAll('.g-node[tabindex="0"]')) node.setAttribute("tabindex", "-1");
    this.roving = id;
    this.elementFor(id)?.setAttribute("tabindex", "0");
  }

  /** Arrow keys move between nodes in reading order and the view follows; Enter or Space shows the details;
   * + and − zoom, 0 fits. */
  nodeKey(ev, id) {
    const index = this.order.indexOf(id);
    const moves = { ArrowDown: index + 1, ArrowRight: index + 1, ArrowUp: index - 1, ArrowLeft: index - 1,
      Home: 0, End: this.order.length - 1 };
    if (ev.key === "Enter" || ev.key === " ") {
      ev.preventDefault();
      this.select(id);
    } else if (ev.key in moves) {
      ev.preventDefault();
      const next = this.order[Math.max(0, Math.min(this.order.length - 1, moves[ev.key]))];
      this.rove(next);
      this.elementFor(next).focus({ preventScroll: true });
      this.keepInView(next);
    } else if (ev.key === "+" || ev.key === "=") this.zoomBy(1.25);
    else if (ev.key === "-") this.zoomBy(0.8);
    else if (ev.key === "0") this.fit();
  }

  /** Pan so that a node stays inside the stage, with a margin; nothing moves while it is in view. */
  keepInView(id) {
    const box = this.boxOf(id);
    if (!box) return;
    const { width, height } = this.stage.getBoundingClientRect();
    const { x, y, k } = this.view;
    const margin = 24;
    const left = box.x * k + x;
    const top = box.y * k + y;
    if (left >= margin && top >= margin && left + box.w * k <= width - margin && top + box.h * k <= height - margin) return;
    this.centerOn(id, !window.matchMedia("(prefers-reduced-motion: reduce)").matches);
  }

  mark() {
    for (const el of this.viewport.querySelectorAll(".is-selected, .is-target")) el.classList.remove("is-selected", "is-target");
    if (this.selected) this.elementFor(this.visibleFor(this.selected))?.classList.add("is-selected");
    if (this.target) this.elementFor(this.visibleFor(this.target))?.classList.add("is-target");
  }

  elementFor(id) {
    return this.viewport.querySelector(`[data-id="${CSS.escape(id)}"]`);
  }

  /** Open `moduleId` and its ancestors, close every other module: one open path, as layout.json stores. */
  focusOn(moduleId) {
    const open = new Set(moduleId ? [moduleId, ...this.ancestors(moduleId)] : []);
    this.collapsed = new Set(this.modules.map((m) => m.id).filter((id) => !open.has(id)));
  }

  toggle(moduleId) {
    this.focusOn(this.collapsed.has(moduleId) ? moduleId : this.layers.get(moduleId)?.parent ?? null);
    this.render();
    this.onToggle(moduleId, this.collapsed.has(moduleId));
  }

  isCollapsed(moduleId) {
    return this.ancestors(moduleId).concat(moduleId).some((m) => this.collapsed.has(m));
  }

  select(id) {
    this.selected = id;
    this.mark();
    const layer = this.layers.get(id);
    this.onSelect({ ...layer, op: this.ops.get(id) ?? layer.op });
  }

  /** Highlight a tour target and bring it to the middle of the stage. */
  highlight(id, { animate = true } = {}) {
    this.target = id;
    this.mark();
    this.centerOn(this.visibleFor(id), animate);
  }

  boxOf(id) {
    const state = this.current();
    return state.nodes.find((n) => n.id === id) || state.clusters.find((c) => c.id === id);
  }

  centerOn(id, animate) {
    const box = this.boxOf(id);
    if (!box) return;
    const { width, height } = this.stage.getBoundingClientRect();
    const k = Math.max(this.view.k, Math.min(1, width / (box.w * 3)));
    this.setView({ k, x: width / 2 - (box.x + box.w / 2) * k, y: height / 2 - (box.y + box.h / 2) * k }, animate);
  }

  /** The whole graph in the stage, or, where that would make its labels unreadable, as much as fits at a
   * readable size from the top (drag, or walk the nodes with the arrow keys, for the rest). */
  fit() {
    const state = this.current();
    const { width, height } = this.stage.getBoundingClientRect();
    const k = Math.max(READABLE_ZOOM, Math.min(width / state.width, height / state.height) * 0.96);
    const x = state.width * k <= width ? (width - state.width * k) / 2 : 8;
    const y = state.height * k <= height ? (height - state.height * k) / 2 : 8;
    this.setView({ k, x, y }, true);
  }

  fitWidth() {
    const state = this.current();
    const { width } = this.stage.getBoundingClientRect();
    const k = Math.min(1.2, (width / state.width) * 0.96);
    this.setView({ k, x: (width - state.width * k) / 2, y: 8 }, false);
  }

  zoomBy(factor, cx, cy) {
    const { width, height } = this.stage.getBoundingClientRect();
    cx ??= width / 2;
    cy ??= height / 2;
    const k = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, this.view.k * factor));
    const ratio = k / this.view.k;
    this.setView({ k, x: cx - (cx - this.view.x) * ratio, y: cy - (cy - this.view.y) * ratio }, false);
  }

  setView(view, animate) {
    this.view = view;
    this.viewport.classList.toggle("is-animating", Boolean(animate));
    this.apply();
  }

  apply() {
    const { x, y, k } = this.view;
    this.viewport.setAttribute("transform", `translate(${x.toFixed(2)},${y.toFixed(2)}) scale(${k.toFixed(4)})`);
  }

  bindPanZoom() {
    const pointers = new Map();
    let last = null;
    let pinch = null;
    this.stage.addEventListener("pointerdown", (e) => {
      // Nodes and group titles take their own clicks: capturing the pointer here would send the click to
      // the stage instead.
      if (e.target.closest(".g-node, .g-cluster-title")) return;
      this.stage.setPointerCapture(e.pointerId);
      pointers.set(e.pointerId, [e.clientX, e.clientY]);
      last = [e.clientX, e.clientY];
      this.stage.classList.add("is-dragging");
    });
    this.stage.addEventListener("pointermove", (e) => {
      if (!pointers.has(e.pointerId)) return;
      pointers.set(e.pointerId, [e.clientX, e.clientY]);
      if (pointers.size === 2) {
        const [a, b] = [...pointers.values()];
        const dist = Math.hypot(a[0] - b[0], a[1] - b[1]);
        const rect = this.stage.getBoundingClientRect();
        if (pinch) this.zoomBy(dist / pinch, (a[0] + b[0]) / 2 - rect.left, (a[1] + b[1]) / 2 - rect.top);
        pinch = dist;
        return;
      }
      this.setView({ ...this.view, x: this.view.x + e.clientX - last[0], y: this.view.y + e.clientY - last[1] }, false);
      last = [e.clientX, e.clientY];
    });
    const end = (e) => {
      pointers.delete(e.pointerId);
      pinch = null;
      const rest = [...pointers.values()][0];
      last = rest || null;
      if (!pointers.size) this.stage.classList.remove("is-dragging");
    };
    this.stage.addEventListener("pointerup", end);
    this.stage.addEventListener("pointercancel", end);
    this.stage.addEventListener("wheel", (e) => {
      if (!e.ctrlKey && !e.metaKey) return; // plain wheel scrolls the page
      e.preventDefault();
      const rect = this.stage.getBoundingClientRect();
      this.zoomBy(Math.exp(-e.deltaY / 300), e.clientX - rect.left, e.clientY - rect.top);
    }, { passive: false });
  }

  /** The whole graph in its current state as a standalone SVG file. */
  download(filename) {
    const state = this.current();
    const svg = svgEl("svg", { viewBox: `0 0 ${state.width} ${state.height}`, width: state.width, height: state.height, "font-family": "system-ui, 'DejaVu Sans', sans-serif" });
    const copy = this.viewport.cloneNode(true);
    copy.removeAttribute("transform");
    copy.removeAttribute("class");
    // A file has no page stylesheet: the tour's target and the selected node keep their marks as attributes,
    // and what only the page uses (focus order, roles, the ▸ ▾ controls' glyphs and their titles) goes.
    const marked = ".is-selected > rect, .is-target > rect";
    const copies = copy.querySelectorAll(marked);
    this.viewport.querySelectorAll(marked).forEach((rect, i) => {
      const style = getComputedStyle(rect); // site.css's highlight, as drawn now
      copies[i].setAttribute("fill", hex(style.fill));
      copies[i].setAttribute("stroke", hex(style.stroke));
      copies[i].setAttribute("stroke-width", parseFloat(style.strokeWidth));
    });
    for (const node of copy.querySelectorAll("[tabindex], [role], [aria-label]")) {
      for (const name of ["tabindex", "role", "aria-label"]) node.removeAttribute(name);
    }
    for (const text of copy.querySelectorAll("text")) {
      if (text.firstChild) text.firstChild.textContent = text.firstChild.textContent.replace(/\s*[▸▾]\s*$/, "");
    }
    for (const title of copy.querySelectorAll(".g-cluster-title title")) title.remove();
    svg.append(copy);
    downloadSvg(svg, filename);
  }
}

/** A computed colour, `rgb(180, 83, 42)`, as an SVG attribute value, `#b4532a`. */
function hex(colour) {
  const channels = colour.match(/\d+/g);
  return channels ? `#${channels.slice(0, 3).map((c) => Number(c).toString(16).padStart(2, "0")).join("")}` : colour;
}

function arrowHead(from, to) {
  const [x1, y1] = from;
  const [x2, y2] = to;
  const angle = Math.atan2(y2 - y1, x2 - x1);
  const size = 6;
  const spread = 0.45;
  const a = [x2 - size * Math.cos(angle - spread), y2 - size * Math.sin(angle - spread)];
  const b = [x2 - size * Math.cos(angle + spread), y2 - size * Math.sin(angle + spread)];
  return svgEl("polygon", { points: `${x2},${y2} ${a[0]},${a[1]} ${b[0]},${b[1]}`, class: "g-arrow", fill: COLOURS.edge });
}
