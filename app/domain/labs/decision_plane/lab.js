// The decision-plane lab: a network of two inputs over its whole input plane. A point is typed, clicked on the plane
// or moved with the arrow keys, and the server runs the network there: each hidden unit's output and the answer, with
// the answer over the whole plane (shaded: the decision regions), each hidden unit's line (where its weighted sum is
// 0, the side where it is on marked) and the data the network learnt (circles).

import { diverging, sig, svgEl } from "../charts.js";
import { COLOUR } from "../palette.js";
import { el } from "../dom.js";
import { bars, item, LabPanel, linkInput, markPreset, postJson, startFromLink, table } from "./common.js";
import { DRAWING } from "../variants.js";

const SIZE = 400; // the drawing's side in its own units (it scales to its box)
const STEP = 0.05; // how far an arrow key moves the point, and what a click is rounded to
const SETTLE_MS = 120; // typed digits closer together than this share one run
const LABELLED = 8; // data of at most this many points is labelled point by point (XOR's four cases); more, drawn small

/** The ends of the line w1·x1 + w2·x2 + b = 0 inside the square [lo, hi]², or null where it misses it. */
function clipped([w1, w2, b], lo, hi) {
  const ends = [];
  const add = (x1, x2) => {
    if (x1 >= lo - 1e-9 && x1 <= hi + 1e-9 && x2 >= lo - 1e-9 && x2 <= hi + 1e-9
      && !ends.some(([a, c]) => Math.abs(a - x1) < 1e-9 && Math.abs(c - x2) < 1e-9)) ends.push([x1, x2]);
  };
  if (Math.abs(w2) > 1e-12) for (const x1 of [lo, hi]) add(x1, -(w1 * x1 + b) / w2);
  if (Math.abs(w1) > 1e-12) for (const x2 of [lo, hi]) add(-(w2 * x2 + b) / w1, x2);
  return ends.length >= 2 ? ends.slice(0, 2) : null;
}

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.$ = (id) => section.querySelector(`#${id}`);
    const { x1, x2 } = this.settings.endpoints.runs.fields;
    this.lo = Math.max(x1.minimum, x2.minimum);
    this.hi = Math.min(x1.maximum, x2.maximum);
    this.inputs = [this.$("plane-x1"), this.$("plane-x2")];
    this.drawing = this.$("plane-drawing");
    this.results = this.$("lab-results");
    this.point = [1, 0];
    for (const input of this.inputs) {
      input.addEventListener("input", () => {
        const typed = this.inputs.map((box) => Number(box.value));
        if (this.inputs.some((box) => box.value === "") || !typed.every((v) => v >= this.lo && v <= this.hi)) {
          clearTimeout(this.timer);
          this.latest.supersede();
          this.setStatus(`x1 and x2 must be numbers from ${this.lo} to ${this.hi}.`, true);
          return;
        }
        this.edit(typed, { typed: true });
      });
    }
    this.drawing.addEventListener("click", (event) => this.edit(this.at(event)));
    this.drawing.addEventListener("keydown", (event) => this.moved(event));
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.load(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    // A variant training on this page ("Train your own") plays its pictures here: the regions as it learns.
    document.addEventListener(DRAWING, (event) => this.watch(event.detail));
    const start = startFromLink(this.settings.presets, (params) => this.linked(params));
    if (start.input) this.edit(start.input);
    else if (start.preset) this.load(start.preset, start.problem);
    else this.edit(this.point);
  }

  /** The point a link carries (?x1=&x2=), or null; an Error says what is wrong with it. */
  linked(params) {
    if (!params.has("x1") && !params.has("x2")) return null;
    const point = ["x1", "x2"].map((name) => Number(params.get(name)));
    if (!point.every((v) => Number.isFinite(v) && v >= this.lo && v <= this.hi)) throw new Error(`x1 and x2 must be numbers from ${this.lo} to ${this.hi}`);
    return point;
  }

  /** A value rounded to the grid a click or a key moves on (two decimals, no float dust). */
  snap(v) {
    return Math.min(this.hi, Math.max(this.lo, Math.round(v / STEP) * STEP)).toFixed(2) * 1;
  }

  /** The plane's point under a click. */
  at(event) {
    const box = this.drawing.querySelector("svg").getBoundingClientRect();
    const fx = (event.clientX - box.left) / box.width;
    const fy = (event.clientY - box.top) / box.height;
    const span = this.hi - this.lo;
    return [this.snap(this.lo + fx * span), this.snap(this.hi - fy * span)];
  }

  moved(event) {
    const by = { ArrowLeft: [-STEP, 0], ArrowRight: [STEP, 0], ArrowUp: [0, STEP], ArrowDown: [0, -STEP] }[event.key];
    if (!by) return;
    event.preventDefault();
    this.edit([this.snap(this.point[0] + by[0]), this.snap(this.point[1] + by[1])]);
  }

  load(preset, problem = null) {
    this.preset = preset.id;
    this.presetLabel = preset.label;
    markPreset(this.section, preset.id);
    this.point = [preset.request.x1, preset.request.x2];
    this.show();
    linkInput({ x1: null, x2: null }, preset.id);
    this.run(problem);
  }

  edit(point, { typed = false } = {}) {
    this.preset = null;
    markPreset(this.section, null);
    this.point = point;
    if (!typed) this.show();
    linkInput({ x1: point[0], x2: point[1] });
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), typed ? SETTLE_MS : 0);
  }

  /** The point in the two boxes, and on the plane while its answer comes. */
  show() {
    this.inputs.forEach((box, k) => { box.value = String(this.point[k]); });
    this.drawing.querySelector(".plane-point-mark")?.setAttribute("transform", this.place(this.point));
  }

  place([x1, x2]) {
    const span = this.hi - this.lo;
    return `translate(${((x1 - this.lo) / span) * SIZE} ${((this.hi - x2) / span) * SIZE})`;
  }

  async run(problem = null) {
    const body = { x1: this.point[0], x2: this.point[1], ...(this.preset ? { compare_with: this.preset } : {}) };
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, body, busy), "Running the network on the server…");
    if (!answer) return;
    this.ran("runs", answer);
    this.answered(answer, { problem, recorded: this.preset ? this.presetLabel : null });
    this.drawPlane(answer.case);
    this.render(answer);
  }

  /** A picture of a variant as it trains: its regions, lines and data drawn on the plane, said in the status. */
  watch({ drawing, epoch, epochs, unit }) {
    this.latest.supersede();
    this.drawPlane(drawing);
    this.drawing.dataset.epoch = String(epoch);
    this.setStatus(`Your variant as it learns: after ${unit} ${epoch} of ${epochs}. Click the plane to ask this page's model again.`);
  }

  /** The plane: the answer shaded cell by cell, each hidden unit's line, the data, and the point. */
  drawPlane(c) {
    const regions = item(c, "regions").values;
    const rows = regions.length;
    const cols = regions[0].length;
    const span = this.hi - this.lo;
    const x = (v) => ((v - this.lo) / span) * SIZE;
    const y = (v) => ((this.hi - v) / span) * SIZE;
    const svg = svgEl("svg", { viewBox: `0 0 ${SIZE} ${SIZE}`, class: "plane-svg", role: "img",
      "aria-label": "The network's answer over the plane, with each hidden unit's line and the training cases" });
    // Cells centred on the grid's points: the first row is x2 = hi, the first column x1 = lo.
    const step = SIZE / (cols - 1);
    const shade = svgEl("g", { "shape-rendering": "crispEdges" });
    regions.forEach((row, r) => row.forEach((v, k) => shade.append(svgEl("rect", {
      x: k * step - step / 2, y: r * step - step / 2, width: step, height: step, fill: diverging(v - this.settings.threshold, this.settings.threshold) }))));
    svg.append(shade);
    svg.append(svgEl("rect", { x: 0, y: 0, width: SIZE, height: SIZE, fill: "none", stroke: COLOUR.axis }));
    for (const tick of [0, 1]) {
      svg.append(svgEl("line", { x1: x(tick), x2: x(tick), y1: 0, y2: SIZE, stroke: COLOUR.grid, "stroke-dasharray": "2 4" }));
      svg.append(svgEl("line", { y1: y(tick), y2: y(tick), x1: 0, x2: SIZE, stroke: COLOUR.grid, "stroke-dasharray": "2 4" }));
    }
    item(c, "lines").values.forEach((weights, k) => {
      const ends = clipped(weights, this.lo, this.hi);
      if (!ends) return;
      const [[a1, a2], [b1, b2]] = ends;
      const g = svgEl("g", { class: "plane-line", "data-unit": k });
      g.append(svgEl("line", { x1: x(a1), y1: y(a2), x2: x(b1), y2: y(b2), stroke: COLOUR.ink, "stroke-width": 2, "stroke-dasharray": "8 5" }));
      // The side where the unit is on: an arrow from the line's middle along its weights (up the plane is -y).
      const along = 0.22 + 0.56 * k / Math.max(1, item(c, "lines").values.length - 1); // units' arrows apart
      const [mx, my] = [x(a1) + (x(b1) - x(a1)) * along, y(a2) + (y(b2) - y(a2)) * along];
      const norm = Math.hypot(weights[0], weights[1]) || 1;
      const [dx, dy] = [(weights[0] / norm) * 24, (-weights[1] / norm) * 24];
      g.append(svgEl("line", { x1: mx, y1: my, x2: mx + dx, y2: my + dy, stroke: COLOUR.ink, "stroke-width": 2, "marker-end": "url(#plane-arrow)" }));
      g.append(svgEl("text", { x: mx + dx * 1.5, y: my + dy * 1.5 + 4, "text-anchor": "middle", "font-size": 17, "font-weight": 700, fill: COLOUR.ink }, `h${k + 1} on`));
      svg.append(g);
    });
    const defs = svgEl("defs");
    const marker = svgEl("marker", { id: "plane-arrow", viewBox: "0 0 10 10", refX: 8, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" });
    marker.append(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: COLOUR.ink }));
    defs.append(marker);
    svg.prepend(defs);
    const targets = item(c, "targets").values;
    const data = item(c, "data").values;
    const labelled = data.length <= LABELLED;
    data.forEach(([d1, d2], k) => {
      const on = targets[k] > this.settings.threshold;
      svg.append(svgEl("circle", { class: "plane-data", cx: x(d1), cy: y(d2), r: labelled ? 9 : 5, fill: on ? COLOUR.ink : COLOUR.paper, stroke: COLOUR.ink, "stroke-width": 2 }));
      if (!labelled) return;
      const below = d2 < (this.lo + this.hi) / 2;
      svg.append(svgEl("text", { x: x(d1), y: y(d2) + (below ? -16 : 26), "text-anchor": "middle", "font-size": 16, fill: COLOUR.ink }, `${d1} ${d2} → ${targets[k]}`));
    });
    const mark = svgEl("g", { class: "plane-point-mark", transform: this.place(this.point) });
    mark.append(svgEl("circle", { r: 11, fill: "none", stroke: COLOUR.accent, "stroke-width": 3 }));
    mark.append(svgEl("path", { d: "M -16 0 H 16 M 0 -16 V 16", stroke: COLOUR.accent, "stroke-width": 2 }));
    svg.append(mark);
    this.drawing.replaceChildren(svg);
    this.drawing.dataset.cells = String(rows * cols);
  }

  /** Beside the plane: what each hidden unit makes of the point, the answer, and the units' weights. */
  render(answer) {
    const c = answer.case;
    const hidden = item(c, "hidden");
    const lines = item(c, "lines");
    const read = item(c, "answer").value;
    this.results.replaceChildren(
      el("h3", {}, "What each hidden unit outputs here"),
      bars(hidden.values, hidden.names.map((name, k) => `${name} ${hidden.values[k] > this.settings.threshold ? "on" : "off"}`), 1),
      el("h3", {}, "The answer"),
      bars([read], [`${read > this.settings.threshold ? 1 : 0}`], 1),
      table(["unit", ...lines.columns], lines.values.map((row, k) => [lines.rows[k], ...row.map((v) => sig(v, 3))]),
        "Each hidden unit's line: where w1·x1 + w2·x2 + b = 0 (the unit is on where the sum is above 0)", { reflow: true }));
  }
}
