// The interactive architecture graph, drawn as SVG from the recorded layers and connections: any set of
// modules open at once (graph-scene.js lays out each open module's contents), pan and zoom, node selection,
// a tour highlight, and, for a large graph, only what is near the view in the page.

import { drawnText, shapeText, thumbnail } from "./activations.js";
import { deviationColour, downloadSvg, sig, svgEl } from "./charts.js";
import { GraphScene, NODE_HEIGHT, PICTURE } from "./graph-scene.js";

const MIN_ZOOM = 0.15;
const MAX_ZOOM = 4;
const READABLE_ZOOM = 0.85; // Fit never shrinks the 10 px labels below about 8.5 px: a larger graph scrolls
// On a phone's stage the opening view keeps the 10 px labels at 11 px or more: the graph opens at its top,
// readable, and pans (a desktop shows a graph whole from 8.5 px labels).
const PHONE_STAGE = 600;
const PHONE_READABLE_ZOOM = 1.1;

const DRAW_ALL = 500; // above this many boxes and edges, only those near the view are in the page
const DRAG_SLOP = 4; // px a pointer moves before a press on a node becomes a pan instead of a click

export class GraphView {
  constructor(stage, graph, { open = [], onSelect = () => {}, onToggle = () => {} } = {}) {
    this.stage = stage;
    this.scenery = new GraphScene(graph.layers, graph.connections);
    this.palette = graph.palette; // the server's colours, also the snapshot's (graphlayout.PALETTE)
    this.effects = null; // by node: how much an intervention or training moved it (shade)
    this.activations = null; // by node: what it computed on the lab's input ({shape, input_shape, drawing})
    this.pictured = new Set(); // the nodes drawn with their drawing
    this.tokenNames = null; // the lab's vocabulary: an input's token ids drawn as the tokens they are
    this.shading = { scale: 1, what: "output moved" };
    this.layers = this.scenery.layers;
    this.modules = this.scenery.modules;
    this.open = new Set(open.filter((id) => this.layers.has(id))); // the first view's modules, as the server says
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
    this.firstView();
    // The stage may still be settling its size (fonts, the panel beside it): the first view follows it
    // until the reader (or the tour) moves the graph.
    new ResizeObserver(() => {
      if (!this.moved) this.firstView();
      if (this.target && !this.moved) this.highlight(this.target, { animate: false, open: false });
    }).observe(stage);
  }

  ancestors(id) {
    return this.scenery.ancestors(id);
  }

  isOpen(moduleId) {
    return this.open.has(moduleId);
  }

  /** The node or open module box that stands for a layer now. */
  visibleFor(id) {
    return this.layers.has(id) ? this.scenery.shownAs(id, this.open) : id;
  }

  /** Lay the graph out for the open modules, then draw what is in view. */
  render() {
    this.scene = this.scenery.layout(this.open, this.pictured);
    for (const e of this.scene.edges) {
      const xs = e.points.map((p) => p[0]);
      const ys = e.points.map((p) => p[1]);
      e.box = { x: Math.min(...xs), y: Math.min(...ys), w: Math.max(...xs) - Math.min(...xs), h: Math.max(...ys) - Math.min(...ys) };
    }
    this.boxes = new Map([...this.scene.clusters, ...this.scene.nodes].map((b) => [b.id, b]));
    this.svg.setAttribute("aria-label", `Architecture graph, ${this.scene.nodes.length} nodes`);
    // Reading order for the keyboard: top to bottom, then left to right, as the graph is drawn.
    this.order = [...this.scene.nodes].sort((a, b) => a.y - b.y || a.x - b.x).map((n) => n.id);
    this.roving = this.roving && this.boxes.has(this.visibleFor(this.roving)) ? this.visibleFor(this.roving) : this.order[0];
    this.drawn = null;
    this.draw();
  }

  /** The part of the graph (in its own units) that the stage shows now, and as much again around it. */
  reach() {
    const { width, height } = this.stage.getBoundingClientRect();
    const { x, y, k } = this.view;
    return { x: -x / k - width / k, y: -y / k - height / k, w: 3 * width / k, h: 3 * height / k };
  }

  draw() {
    const scene = this.scene;
    const all = scene.nodes.length + scene.clusters.length + scene.edges.length <= DRAW_ALL;
    const area = all ? null : this.reach();
    const near = (b) => !area || (b.x + b.w >= area.x && b.x <= area.x + area.w && b.y + b.h >= area.y && b.y <= area.y + area.h);
    const hadFocus = this.viewport.contains(document.activeElement); // redrawn under the keyboard: keep it there
    if (this.pending) cancelAnimationFrame(this.pending);
    this.pending = null;
    this.drawn = area ?? { all: true };
    this.viewport.replaceChildren(...drawing(this, scene, near));
    this.rove(this.roving);
    this.mark();
    this.apply();
    if (hadFocus) this.elementFor(this.roving)?.focus({ preventScroll: true });
  }

  /** Whether the view has moved out of what was drawn (only when not everything is drawn). */
  outOfReach() {
    const d = this.drawn;
    if (!d || d.all) return false;
    const { width, height } = this.stage.getBoundingClientRect();
    const { x, y, k } = this.view;
    const seen = { x: -x / k, y: -y / k, w: width / k, h: height / k };
    return seen.x < d.x || seen.y < d.y || seen.x + seen.w > d.x + d.w || seen.y + seen.h > d.y + d.h;
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
      this.keepInView(next);
      this.rove(next);
      this.elementFor(next)?.focus({ preventScroll: true });
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
    if (this.outOfReach()) this.draw(); // the node must be in the page before it can take the focus
  }

  mark() {
    for (const el of this.viewport.querySelectorAll(".is-selected, .is-target")) el.classList.remove("is-selected", "is-target");
    if (this.selected) this.elementFor(this.visibleFor(this.selected))?.classList.add("is-selected");
    if (this.target) this.elementFor(this.visibleFor(this.target))?.classList.add("is-target");
  }

  elementFor(id) {
    return this.viewport.querySelector(`[data-id="${CSS.escape(id)}"]`);
  }

  /** Shade every node by how much it moved (`effects`, by node id: |after - before| / |before|), or draw the
   * graph as recorded again (null). A movement of `scale` takes the full colour; `what` names it for speech. */
  shade(effects, { scale = 1, what = "output moved" } = {}) {
    this.effects = effects;
    this.shading = { scale, what };
    this.draw();
  }

  /** Draw in every node what it computed on one input (`nodes`, by node id, as POST .../activations answers),
   * and every edge's tensor shape; null draws the graph as recorded again. The view stays where the reader left
   * it; a first view not moved yet is laid out again around the taller nodes. */
  picture(nodes) {
    this.activations = nodes;
    this.pictured = new Set(Object.entries(nodes ?? {}).filter(([, n]) => n.drawing).map(([id]) => id));
    const moved = this.moved;
    this.render();
    if (!moved) this.firstView();
    if (this.target) this.highlight(this.target, { animate: false, open: false });
    this.moved = moved;
  }

  /** The names an input node's token ids are drawn with (the lab's vocabulary), else null. */
  namesFor(node) {
    return node.kind === "input" ? this.tokenNames : null;
  }

  /** The shape of the tensor along the edge from `source` to `target`, where the picture knows it. */
  edgeShape(source, target) {
    const shape = this.activations?.[source]?.shape ?? this.activations?.[target]?.input_shape;
    return shape ? shapeText(shape) : null;
  }

  /** Open a closed module or close an open one; every other module stays as it is. */
  toggle(moduleId) {
    if (this.open.has(moduleId)) this.open.delete(moduleId);
    else for (const m of [moduleId, ...this.ancestors(moduleId)]) this.open.add(m);
    this.render();
    this.onToggle(moduleId, !this.open.has(moduleId));
  }

  /** Open every module, or close them all. */
  setAll(open) {
    this.open = new Set(open ? this.modules.map((m) => m.id) : []);
    this.render();
    this.onToggle(null, !open);
  }

  /** Whether a module is drawn open, as a box around its contents (the closed-module rule: GraphScene's). */
  isDrawnOpen(moduleId) {
    return this.scenery.isOpenBox(moduleId, this.open);
  }

  select(id) {
    this.selected = id;
    this.mark();
    const layer = this.layers.get(id);
    this.onSelect(layer);
  }

  /** Highlight a tour target (opening the modules around it) and bring it to the middle of the stage. */
  highlight(id, { animate = true, open = true } = {}) {
    const closed = this.layers.has(id) ? this.ancestors(id).filter((m) => !this.open.has(m)) : [];
    if (open && closed.length) { // a tour step opens what it talks about
      for (const m of closed) this.open.add(m);
      this.render();
      this.onToggle(closed[0], false);
    }
    this.target = id;
    this.bringIntoView(this.visibleFor(id), animate);
    if (this.outOfReach()) this.draw();
    this.mark();
  }

  /** The tour's overview: every module closed, the opening view, nothing highlighted. */
  overview() {
    this.target = null;
    if (this.open.size) this.setAll(false);
    this.firstView();
    this.mark();
  }

  boxOf(id) {
    return this.boxes.get(id);
  }

  /** Centre a node vertically at the present zoom; sideways only where the graph is wider than the stage,
   * so a view that shows the graph's full width keeps showing it (+ zooms in on it). */
  bringIntoView(id, animate) {
    const box = this.boxOf(id);
    if (!box) return;
    const { width, height } = this.stage.getBoundingClientRect();
    const k = this.view.k;
    const across = this.scene.width * k <= width ? (width - this.scene.width * k) / 2 : width / 2 - (box.x + box.w / 2) * k;
    const moved = this.moved;
    this.setView({ k, x: across, y: height / 2 - (box.y + box.h / 2) * k }, animate);
    this.moved = moved; // the tour's first step is part of the first view
  }

  centerOn(id, animate) {
    const box = this.boxOf(id);
    if (!box) return;
    const { width, height } = this.stage.getBoundingClientRect();
    const k = Math.max(this.view.k, Math.min(1, width / (box.w * 3)));
    this.setView({ k, x: width / 2 - (box.x + box.w / 2) * k, y: height / 2 - (box.y + box.h / 2) * k }, animate);
  }

  /** The whole graph in the stage, centred, however small that makes it. */
  fit() {
    const { width, height } = this.stage.getBoundingClientRect();
    const { width: w, height: h } = this.scene;
    const k = Math.min(1.5, (width - 16) / Math.max(w, 1), (height - 16) / Math.max(h, 1));
    this.setView({ k, x: (width - w * k) / 2, y: (height - h * k) / 2 }, true);
  }

  /** The opening view: the whole graph where it is readable so, else its full width from the top where that is
   * readable, else its top at a readable size, around the first node in reading order. */
  firstView() {
    const { width, height } = this.stage.getBoundingClientRect();
    const { width: w, height: h } = this.scene;
    const readable = width < PHONE_STAGE ? PHONE_READABLE_ZOOM : READABLE_ZOOM;
    const whole = Math.min((width - 16) / Math.max(w, 1), (height - 16) / Math.max(h, 1));
    if (whole >= readable) {
      const k = Math.min(1.2, whole);
      this.setView({ k, x: (width - w * k) / 2, y: (height - h * k) / 2 }, false);
    } else {
      const k = Math.max(Math.min(1.2, (width - 16) / Math.max(w, 1)), width < PHONE_STAGE ? readable : 0);
      const first = this.boxOf(this.order[0]);
      const x = w * k <= width || !first ? (width - w * k) / 2 : Math.min(8, Math.max(width - 8 - w * k, width / 2 - (first.x + first.w / 2) * k));
      this.setView({ k, x, y: 8 }, false);
    }
    this.moved = false;
  }

  zoomBy(factor, cx, cy) {
    const { width, height } = this.stage.getBoundingClientRect();
    cx ??= width / 2;
    cy ??= height / 2;
    const k = Math.min(MAX_ZOOM, Math.max(Math.min(MIN_ZOOM, this.view.k), this.view.k * factor));
    const ratio = k / this.view.k;
    this.setView({ k, x: cx - (cx - this.view.x) * ratio, y: cy - (cy - this.view.y) * ratio }, false);
  }

  setView(view, animate) {
    this.view = view;
    this.moved = true; // the reader chose this view: a resize no longer resets it
    this.viewport.classList.toggle("is-animating", Boolean(animate));
    this.apply();
  }

  apply() {
    const { x, y, k } = this.view;
    this.viewport.setAttribute("transform", `translate(${x.toFixed(2)},${y.toFixed(2)}) scale(${k.toFixed(4)})`);
    if (this.outOfReach() && !this.pending) {
      this.pending = requestAnimationFrame(() => {
        this.pending = null;
        this.draw();
      });
    }
  }

  /** A drag pans, wherever it starts (a press that does not move is a click); two fingers pinch. */
  bindPanZoom() {
    const pointers = new Map();
    let last = null;
    let pinch = null;
    let start = null;
    let dragged = false;
    this.stage.addEventListener("pointerdown", (e) => {
      pointers.set(e.pointerId, [e.clientX, e.clientY]);
      last = [e.clientX, e.clientY];
      start = last;
      dragged = false;
    });
    this.stage.addEventListener("pointermove", (e) => {
      if (!pointers.has(e.pointerId)) return;
      pointers.set(e.pointerId, [e.clientX, e.clientY]);
      if (!dragged) {
        if (pointers.size < 2 && Math.hypot(e.clientX - start[0], e.clientY - start[1]) < DRAG_SLOP) return;
        dragged = true;
        this.stage.setPointerCapture(e.pointerId);
        this.stage.classList.add("is-dragging");
      }
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
    // The click that ends a drag selects nothing.
    this.stage.addEventListener("click", (e) => {
      if (!dragged) return;
      dragged = false;
      e.stopPropagation();
      e.preventDefault();
    }, { capture: true });
    this.stage.addEventListener("wheel", (e) => {
      if (!e.ctrlKey && !e.metaKey) return; // plain wheel scrolls the page
      e.preventDefault();
      const rect = this.stage.getBoundingClientRect();
      this.zoomBy(Math.exp(-e.deltaY / 300), e.clientX - rect.left, e.clientY - rect.top);
    }, { passive: false });
  }

  /** The whole graph in its current state as a standalone SVG file. */
  download(filename) {
    const { width, height } = this.scene;
    const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, width, height, "font-family": "system-ui, 'DejaVu Sans', sans-serif" });
    const copy = svgEl("g");
    copy.append(...drawing(this, this.scene, () => true)); // the whole graph, drawn or not
    // A file has no page stylesheet: the tour's target and the selected node keep their marks as attributes,
    // and what only the page uses (focus order, roles, the ▸ ▾ controls' glyphs and their titles) goes.
    for (const [id, mark] of [[this.selected, "is-selected"], [this.target, "is-target"]]) {
      if (!id) continue;
      const live = this.elementFor(this.visibleFor(id))?.querySelector("rect");
      const rect = copy.querySelector(`[data-id="${CSS.escape(this.visibleFor(id))}"] > rect`);
      if (!live || !rect) continue;
      const style = getComputedStyle(live); // site.css's highlight, as drawn now
      rect.parentNode.classList.add(mark);
      rect.setAttribute("fill", hex(style.fill));
      rect.setAttribute("stroke", hex(style.stroke));
      rect.setAttribute("stroke-width", parseFloat(style.strokeWidth));
    }
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

/** A computed colour, `rgb(180, 83, 42)`, as an SVG attribute value, `#rrggbb`. */
function hex(colour) {
  const channels = colour.match(/\d+/g);
  return channels ? `#${channels.slice(0, 3).map((c) => Number(c).toString(16).padStart(2, "0")).join("")}` : colour;
}

function arrowHead(from, to, colour) {
  const [x1, y1] = from;
  const [x2, y2] = to;
  const angle = Math.atan2(y2 - y1, x2 - x1);
  const size = 6;
  const spread = 0.45;
  const a = [x2 - size * Math.cos(angle - spread), y2 - size * Math.sin(angle - spread)];
  const b = [x2 - size * Math.cos(angle + spread), y2 - size * Math.sin(angle + spread)];
  return svgEl("polygon", { points: `${x2},${y2} ${a[0]},${a[1]} ${b[0]},${b[1]}`, class: "g-arrow", fill: colour });
}

/** The SVG elements of a scene's clusters, edges and nodes for which `near(box)` holds. */
function drawing(view, scene, near) {
  const palette = view.palette;
  const out = [];
  for (const c of scene.clusters) {
    if (!near(c)) continue;
    const depth = Math.min(c.depth, 2);
    const g = svgEl("g", { class: `g-cluster depth-${depth}`, "data-id": c.id });
    const box = svgEl("rect", { x: c.x, y: c.y, width: c.w, height: c.h, rx: 8, fill: palette.cluster.fills[depth], stroke: palette.cluster.stroke });
    box.addEventListener("click", () => view.select(c.id)); // an open module is selected by its box, as a closed one is
    g.append(box);
    const label = svgEl("text", { x: c.x + 8, y: c.y + 15, "font-size": 11, "font-weight": 600, fill: palette.cluster.text, class: "g-cluster-title" }, `${c.id}  ▾`);
    label.append(svgEl("title", {}, `Close ${c.id}`));
    label.addEventListener("click", (e) => {
      e.stopPropagation();
      view.toggle(c.id);
    });
    g.append(label);
    out.push(g);
  }
  for (const e of scene.edges) {
    if (!near(e.box)) continue;
    const g = svgEl("g", { "data-source": e.source, "data-target": e.target });
    g.append(svgEl("path", { d: smooth(e.points), class: "g-edge", fill: "none", stroke: palette.edge }));
    const p = e.points;
    if (p.length > 1) g.append(arrowHead(p[p.length - 2], p[p.length - 1], palette.edge));
    const shape = view.edgeShape(e.source, e.target);
    if (shape) { // beside the edge's middle, where it runs between its two nodes
      const [x, y] = p[Math.floor((p.length - 1) / 2)];
      const [x2, y2] = p[Math.min(p.length - 1, Math.floor((p.length - 1) / 2) + 1)];
      g.append(svgEl("text", { x: (x + x2) / 2 + 4, y: (y + y2) / 2 + 3, class: "g-shape", "font-size": 9, fill: palette.node.op }, shape));
      g.dataset.shape = shape;
    }
    out.push(g);
  }
  for (const n of scene.nodes) {
    if (!near(n)) continue;
    const isModule = n.kind === "module";
    const colours = isModule ? palette.module : palette.node;
    const g = svgEl("g", {
      class: `g-node${isModule ? " is-module" : ""}`, "data-id": n.id, "data-layer": n.id, tabindex: -1, role: "button",
      // The name starts with the visible text (label, then op), as speech-input users say what they see.
      "aria-label": nodeName(view, n, isModule),
    });
    const effect = view.effects?.[n.id];
    if (effect !== undefined) g.dataset.effect = sig(effect, 3);
    g.append(svgEl("rect", { x: n.x, y: n.y, width: n.w, height: n.h, rx: 6, fill: effect > 0 ? deviationColour(effect / view.shading.scale) : colours.fill, stroke: colours.stroke }));
    const middle = n.y + NODE_HEIGHT / 2; // the two lines of text, at the top of a node that holds a drawing
    g.append(svgEl("text", { x: n.x + n.w / 2, y: middle - 2, "text-anchor": "middle", "font-size": 10, fill: palette.node.text }, isModule ? `${n.label} ▸ ` : `${n.label} `)); // the space parts label and op in the text a name must contain
    // Beside the path, the node's plain name (its op and class are in its details), else its op
    g.append(svgEl("text", { x: n.x + n.w / 2, y: middle + 10, "text-anchor": "middle", "font-size": 10, class: "g-op", fill: palette.node.op }, n.plain ?? n.op));
    const computed = view.activations?.[n.id];
    if (computed?.drawing && view.pictured.has(n.id)) {
      g.append(...thumbnail(computed.drawing, { x: n.x + PICTURE.pad, y: n.y + NODE_HEIGHT, w: n.w - 2 * PICTURE.pad, h: PICTURE.h }, view.namesFor(n)));
      g.dataset.drawn = computed.drawing.kind;
    }
    g.addEventListener("click", () => view.select(n.id));
    g.addEventListener("focus", () => view.rove(n.id));
    g.addEventListener("keydown", (ev) => view.nodeKey(ev, n.id));
    out.push(g);
  }
  return out;
}

/** A node's accessible name: its visible text first, in the order it is drawn (label, plain name or op, what its
 * drawing writes), as speech-input users say what they see; then the rest. */
function nodeName(view, n, isModule) {
  const computed = view.activations?.[n.id];
  const written = drawnText(computed?.drawing, view.namesFor(n));
  const seen = `${n.label} ${n.plain ?? n.op}${written ? ` ${written}` : ""}`;
  const op = n.plain ? `, ${n.op}` : "";
  const closed = isModule ? ", closed module: press Enter for details" : "";
  const shape = computed ? `, computes ${shapeText(computed.shape)}` : "";
  const effect = view.effects?.[n.id] !== undefined ? `, ${view.shading.what} ${sig(100 * view.effects[n.id], 3)}%` : "";
  return `${seen}${op}${closed} (${n.id})${shape}${effect}`;
}

/** A path through the points, its corners rounded (quadratic curves between the midpoints). */
function smooth(points) {
  const f = (p) => `${p[0].toFixed(1)},${p[1].toFixed(1)}`;
  if (points.length < 3) return `M${points.map(f).join(" L")}`;
  let d = `M${f(points[0])}`;
  for (let i = 1; i < points.length - 1; i++) {
    const mid = [(points[i][0] + points[i + 1][0]) / 2, (points[i][1] + points[i + 1][1]) / 2];
    d += ` Q${f(points[i])} ${f(i === points.length - 2 ? points[i + 1] : mid)}`;
  }
  return d;
}
