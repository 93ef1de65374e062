// The image-classifier lab: draw on a grid of grey levels; every edit re-runs the network on the server
// (feature maps, class probabilities, saliency), and one class's score can be traced back to the drawing.
// Feature maps arrive as matrices keyed `<stage>_c<channel>`, drawn by the stages the recipe declares (its
// lab.groups); what an image shows is named in the recipe's words (lab.words.thing).

import { sig, smallMap, valueHeatmap } from "../charts.js";
import { chartBox, el } from "../dom.js";
import { bars, item, LabPanel, linkedInts, linkInput, markPreset, metric, postJson, recordCheck, startFromLink, table, vector } from "./common.js";

const SETTLE_MS = 120; // edits closer together than this (a drag) share one run
const DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"; // a grey level as one character of a link
const LINKED_CELLS = 1024; // a drawing with more cells than this is too long for a link and stays out of it

/** A drawing as one character per cell, rows separated by dots: "00a0.0g00" (levels up to 35). */
function drawingText(image) {
  return image.map((row) => row.map((v) => DIGITS[v]).join("")).join(".");
}

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    const { rows, cols, levels } = this.settings.sizes;
    Object.assign(this, { rows, cols, levels });
    this.answerBox = section.querySelector("#draw-answer");
    this.results = section.querySelector("#lab-results");
    this.traceBox = section.querySelector("#trace");
    this.grid = section.querySelector("#draw-grid");
    this.ink = section.querySelector("#ink");
    this.label = section.querySelector("#draw-label");
    this.target = section.querySelector("#trace-target");
    this.thing = this.settings.words.thing;
    this.image = this.blank();
    this.labelChosen = false; // the reader picked the class meant (a recorded case's own does not count once edited)
    this.traces = 0;
    this.traceShown = false;
    this.buildGrid();
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.load(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    section.querySelector("#clear-drawing").addEventListener("click", () => {
      this.labelChosen = false;
      this.edit(this.blank());
    });
    this.ink.addEventListener("input", () => { section.querySelector("#ink-value").value = this.ink.value; });
    this.label.addEventListener("change", () => {
      this.labelChosen = this.label.value !== "";
      this.link();
      this.run();
    });
    this.target.addEventListener("change", () => this.traceShown && this.trace());
    section.querySelector("#trace-class").addEventListener("click", () => this.trace());
    this.linkable = rows * cols <= LINKED_CELLS && levels < DIGITS.length;
    const start = startFromLink(this.settings.presets, (params) => this.fromLink(params));
    if (start.input) {
      this.label.value = start.input.label ?? "";
      this.labelChosen = this.label.value !== "";
      this.edit(start.input.image);
    } else if (start.preset) {
      this.load(start.preset, start.problem);
    } else {
      this.run();
    }
  }

  /** The drawing a link carries (?drawing=, one character per cell, rows separated by dots; ?label=), or null. */
  fromLink(params) {
    if (!this.linkable || !params.has("drawing")) return null;
    const rows = params.get("drawing").split(".");
    const image = rows.map((row) => [...row].map((ch) => DIGITS.indexOf(ch)));
    if (image.length !== this.rows || image.some((row) => row.length !== this.cols || row.some((v) => v < 0 || v > this.levels))) {
      throw new Error(`drawing must be ${this.rows} rows of ${this.cols} levels from 0 to ${DIGITS[this.levels]}`);
    }
    const [label] = params.has("label") ? linkedInts(params, "label") : [];
    return { image, label };
  }

  /** The drawing into the URL (where it is small enough), or the name of the recorded case it still is. */
  link() {
    if (!this.linkable) return;
    linkInput({ drawing: drawingText(this.image), label: this.label.value === "" ? null : this.label.value }, this.preset);
  }

  name(k) {
    return this.settings.names[k] ?? String(k);
  }

  blank() {
    return Array.from({ length: this.rows }, () => Array(this.cols).fill(0));
  }

  // ---- the drawing grid

  buildGrid() {
    this.grid.style.setProperty("--cols", String(this.cols));
    this.cells = [];
    for (let r = 0; r < this.rows; r++) {
      const row = el("div", { role: "row", class: "draw-row" });
      this.cells.push([]);
      for (let c = 0; c < this.cols; c++) {
        const cell = el("div", { role: "gridcell", class: "draw-cell", tabindex: r === 0 && c === 0 ? "0" : "-1", "data-row": r, "data-col": c });
        this.cells[r].push(cell);
        row.append(cell);
      }
      this.grid.append(row);
    }
    this.grid.addEventListener("pointerdown", (e) => {
      const cell = e.target.closest(".draw-cell");
      if (!cell || e.button > 0) return;
      e.preventDefault(); // no text selection or scrolling while drawing
      this.grid.setPointerCapture(e.pointerId);
      this.drawing = true;
      this.moveTo(Number(cell.dataset.row), Number(cell.dataset.col));
      this.paint(cell);
    });
    this.grid.addEventListener("pointermove", (e) => {
      if (!this.drawing) return;
      const cell = document.elementFromPoint(e.clientX, e.clientY)?.closest(".draw-cell");
      if (cell && this.grid.contains(cell)) this.paint(cell);
    });
    for (const end of ["pointerup", "pointercancel", "lostpointercapture"]) {
      this.grid.addEventListener(end, () => { this.drawing = false; });
    }
    this.grid.addEventListener("keydown", (e) => this.key(e));
    this.show();
  }

  /** Roving focus: the grid is one tab stop, and the arrow keys move within it. */
  moveTo(r, c, focus = false) {
    const cell = this.cells[r][c];
    for (const row of this.cells) for (const other of row) other.tabIndex = other === cell ? 0 : -1;
    if (focus) cell.focus();
  }

  key(e) {
    const cell = e.target.closest(".draw-cell");
    if (!cell) return;
    const r = Number(cell.dataset.row);
    const c = Number(cell.dataset.col);
    const moves = { ArrowUp: [r - 1, c], ArrowDown: [r + 1, c], ArrowLeft: [r, c - 1], ArrowRight: [r, c + 1], Home: [r, 0], End: [r, this.cols - 1] };
    const level = this.image[r][c];
    const ink = Number(this.ink.value);
    const levels = { " ": level === ink ? 0 : ink, Enter: level === ink ? 0 : ink, "+": level + 1, "=": level + 1, "-": level - 1, Delete: 0, Backspace: 0 };
    if (e.key in moves) {
      const [nr, nc] = moves[e.key];
      if (nr >= 0 && nr < this.rows && nc >= 0 && nc < this.cols) this.moveTo(nr, nc, true);
    } else if (e.key in levels) {
      this.set(r, c, Math.max(0, Math.min(this.levels, levels[e.key])));
    } else {
      return;
    }
    e.preventDefault();
  }

  paint(cell) {
    const erase = this.section.querySelector('input[name="draw-tool"]:checked').value === "erase";
    this.set(Number(cell.dataset.row), Number(cell.dataset.col), erase ? 0 : Number(this.ink.value));
  }

  set(r, c, level) {
    if (this.image[r][c] === level) return;
    this.image = this.image.map((row, i) => (i === r ? row.map((v, j) => (j === c ? level : v)) : row));
    this.edited();
  }

  show() {
    this.cells.forEach((row, r) => row.forEach((cell, c) => {
      const level = this.image[r][c];
      cell.style.setProperty("--level", String(level / this.levels));
      cell.setAttribute("aria-label", `Row ${r + 1}, column ${c + 1}: level ${level}`);
      cell.classList.toggle("is-dark", level / this.levels > 0.5);
    }));
  }

  // ---- runs

  /** A recorded case's drawing; `problem` says why a link's drawing was not used instead. */
  load(preset, problem = null) {
    this.preset = preset.id;
    this.presetLabel = preset.label;
    this.image = preset.request.image.map((row) => [...row]);
    this.label.value = preset.request.label ?? "";
    this.labelChosen = false;
    markPreset(this.section, preset.id);
    this.show();
    this.link();
    this.run(problem);
  }

  edit(image) {
    this.image = image;
    this.edited();
  }

  /** The drawing changed: it is no longer the recorded case (nor its class, unless the reader picked one), and a
   * run follows once the edits settle. */
  edited() {
    if (!this.labelChosen) this.label.value = "";
    this.preset = null;
    markPreset(this.section, null);
    this.show();
    this.link();
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), SETTLE_MS);
  }

  async run(problem = null) {
    const body = { image: this.image };
    if (this.label.value !== "") body.label = Number(this.label.value);
    if (this.preset) body.compare_with = this.preset;
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, body, busy), "Reading the drawing on the server…");
    if (!answer) return;
    this.ran("runs", answer);
    const c = answer.case;
    const read = item(c, "prediction").value;
    const ms = answer.compute_seconds * 1000;
    this.setStatus(`${problem ? `${problem} ` : ""}Read as ${this.name(read)} with probability ${sig(item(c, "confidence").value, 3)} (${ms < 1 ? "under 1" : ms.toFixed(0)} ms on the server).`);
    this.render(answer);
    if (this.traceShown) this.trace();
  }

  render(answer) {
    const c = answer.case;
    const probs = item(c, "probabilities").values;
    const read = item(c, "prediction").value;
    const loss = item(c, "loss");
    const saliency = item(c, "saliency");
    const parts = [];
    if (this.preset && answer.record_check) parts.push(recordCheck(answer.record_check, this.presetLabel));
    parts.push(
      el("p", { class: "draw-prediction", id: "draw-prediction" }, "Read as ", el("strong", {}, this.name(read))),
      el("figure", { class: "chart", id: "draw-probabilities" }, el("figcaption", {}, el("span", { class: "chart-title" }, item(c, "probabilities").label)),
        bars(probs, probs.map((_, k) => `${k === read ? "▶ " : ""}${this.name(k)}`), 1)),
    );
    if (loss) {
      parts.push(el("dl", { class: "metrics" }, metric(loss.label, loss.value, { id: "draw-loss" })));
    }
    parts.push(el("figure", { class: "chart lab-heatmap draw-saliency", id: "draw-saliency" },
      el("figcaption", {}, el("span", { class: "chart-title" }, saliency.label)), chartBox(`${saliency.label}: heatmap`, valueHeatmap(saliency.values, saliency.label)),
      el("p", { class: "fine" }, "Mint: ink here raises the score; rust: it lowers it. Blank paper contributes nothing.")));
    this.answerBox.replaceChildren(...parts);
    this.results.replaceChildren(el("h3", {}, "Inside the network, stage by stage"),
      el("p", { class: "fine" }, "Each stage's small maps share one colour scale (mint positive, rust negative); a map drawn over the drawing lets its strokes show through."),
      ...this.stages(c.matrices));
  }

  /** The declared stages, in order, each with its matrices keyed `<stage>_c<n>` (channels, or what the stage's
   * `each` says they are), drawn over the matrix its `over` names where it declares one. */
  stages(matrices) {
    return this.settings.groups.flatMap(({ key: stage, title, each = "channel", over }) => {
      const maps = matrices.flatMap((m) => {
        const index = m.key.startsWith(`${stage}_c`) ? m.key.slice(stage.length + 2) : "";
        return /^\d+$/.test(index) ? [{ index: Number(index), values: m.values, label: m.label }] : [];
      });
      if (!maps.length) return [];
      const under = over && matrices.find((m) => m.key === over)?.values;
      const limit = Math.max(...maps.flatMap((m) => m.values.flat().map(Math.abs)));
      return el("section", { class: "feature-stage", "data-stage": stage },
        el("h4", {}, `${title} `, el("span", { class: "fine" }, `${maps.length} ${each}s, ${maps[0].values.length}×${maps[0].values[0].length}, largest |value| ${sig(limit, 3)}`)),
        el("div", { class: "feature-maps" }, ...maps.map((m) => this.map(m.values, m.label, `${each} ${m.index}`, limit, under))));
    });
  }

  map(values, label, caption, limit, under = null) {
    return el("figure", { class: "feature-map" }, smallMap(values, { label, limit, under }), el("figcaption", {}, caption));
  }

  // ---- the class trace

  async trace() {
    const generation = ++this.traces;
    this.traceShown = true;
    const body = { image: this.image };
    if (this.target.value !== "") body.target = Number(this.target.value);
    this.traceBox.setAttribute("aria-busy", "true");
    let data;
    try {
      data = await postJson(this.urls.trace, body);
    } catch (error) {
      if (generation === this.traces) this.traceBox.replaceChildren(el("p", { class: "notice" }, `The trace failed: ${error.message}`));
      return;
    } finally {
      if (generation === this.traces) this.traceBox.removeAttribute("aria-busy");
    }
    if (generation !== this.traces) return;
    const [head, ...stages] = data.stages;
    const target = this.name(data.target);
    this.traceBox.replaceChildren(
      el("p", { class: "trace-prediction", id: "trace-summary" }, `${this.thing[0].toUpperCase()}${this.thing.slice(1)} ${target}: logit ${sig(head.logit)}, probability ${sig(head.probability, 3)}`
        + (data.target === data.predicted ? ` (the ${this.thing} read).` : ` (the ${this.thing} read is ${this.name(data.predicted)}).`)),
      table(["stage", "share of the score"], [[head.title, sig(head.logit - head.bias)], ...stages.map((s) => [s.title, sig(s.total)])],
        "How much of the logit (without its bias) each stage accounts for"),
      el("p", { class: "fine" }, `Method: ${data.method}.`),
      el("section", { class: "trace-stage", "data-stage": head.id }, el("h4", {}, head.title),
        el("p", {}, `logit = bias + Σ weight × activation = ${sig(head.bias)} + ${sig(head.check - head.bias)} = ${sig(head.check)}`),
        table(["unit", "weight", "activation", "contribution"], head.strongest.map((u) => [String(u.unit), sig(u.weight), sig(u.activation), sig(u.contribution)]),
          `The ${head.strongest.length} units of the layer before the logit that move it most`)),
      ...stages.map((s) => this.traceStage(s)));
  }

  traceStage(stage) {
    const section = el("section", { class: "trace-stage", "data-stage": stage.id }, el("h4", {}, `${stage.title} `, el("span", { class: "fine" }, `share ${sig(stage.total)}`)));
    if (stage.channel_totals) {
      const limit = Math.max(...stage.attribution.flat(2).map(Math.abs));
      section.append(
        bars(stage.channel_totals, stage.channel_totals.map((_, k) => `channel ${k}`)),
        el("div", { class: "feature-maps" }, ...stage.attribution.map((m, k) => this.map(m, `${stage.title}, channel ${k}: activation × gradient`, `channel ${k}`, limit))));
    } else if (stage.shape.length === 2) {
      const label = `${stage.title}: activation × gradient`;
      section.append(el("figure", { class: "chart lab-heatmap" }, chartBox(`${label}: heatmap`, valueHeatmap(stage.attribution, label))));
    } else {
      section.append(vector(stage.attribution, "activation × gradient"));
    }
    return section;
  }
}
