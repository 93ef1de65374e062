// The image-classifier lab: draw on a grid of grey levels; every edit re-runs the network on the server
// (feature maps, class probabilities, saliency), and one class's score can be traced back to the drawing.
// Feature maps arrive as the case's matrices with the groups the server found them in (the stages the recipe
// declares in its display.groups); what an image shows is named in the recipe's words (lab.words.thing).

import { sig, smallMap, valueHeatmap } from "../charts.js";
import { chartBox, el } from "../dom.js";
import { bars, folded, item, LabPanel, linkedInts, linkInput, markPreset, metric, postJson, startFromLink, table, vector } from "./common.js";
import { DrawingPad } from "./drawing.js";

const SETTLE_MS = 120; // edits closer together than this (a drag) share one run

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.answerBox = section.querySelector("#draw-answer");
    this.results = section.querySelector("#lab-results");
    this.traceBox = section.querySelector("#trace");
    this.label = section.querySelector("#draw-label");
    this.target = section.querySelector("#trace-target");
    this.thing = this.settings.words.thing;
    this.pad = new DrawingPad(section, this.settings.sizes, () => this.edited());
    this.labelChosen = false; // the reader picked the class meant (a recorded case's own does not count once edited)
    this.traces = 0;
    this.traceShown = false;
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.load(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    section.querySelector("#clear-drawing").addEventListener("click", () => {
      this.labelChosen = false;
      this.pad.replace(this.pad.blank(), true);
    });
    this.label.addEventListener("change", () => {
      this.labelChosen = this.label.value !== "";
      this.link();
      this.run();
    });
    this.target.addEventListener("change", () => this.traceShown && this.trace());
    section.querySelector("#trace-class").addEventListener("click", () => this.trace());
    const start = startFromLink(this.settings.presets, (params) => this.fromLink(params));
    if (start.input) {
      this.label.value = start.input.label ?? "";
      this.labelChosen = this.label.value !== "";
      this.pad.replace(start.input.image, true);
    } else if (start.preset) {
      this.load(start.preset, start.problem);
    } else {
      this.run();
    }
  }

  /** The drawing a link carries (?drawing=, one character per cell, rows separated by dots; ?label=), or null. */
  fromLink(params) {
    if (!this.pad.linkable || !params.has("drawing")) return null;
    const image = this.pad.parse(params.get("drawing"));
    const [label] = params.has("label") ? linkedInts(params, "label") : [];
    return { image, label };
  }

  /** The drawing into the URL (where it is small enough), or the name of the recorded case it still is. */
  link() {
    if (!this.pad.linkable) return;
    linkInput({ drawing: this.pad.text(), label: this.label.value === "" ? null : this.label.value }, this.preset);
  }

  name(k) {
    return this.settings.names[k] ?? String(k);
  }

  // ---- runs

  /** A recorded case's drawing; `problem` says why a link's drawing was not used instead. */
  load(preset, problem = null) {
    this.preset = preset.id;
    this.presetLabel = preset.label;
    this.pad.replace(preset.request.image, false);
    this.label.value = preset.request.label ?? "";
    this.labelChosen = false;
    markPreset(this.section, preset.id);
    this.link();
    this.run(problem);
  }

  /** The drawing changed: it is no longer the recorded case (nor its class, unless the reader picked one), and a
   * run follows once the edits settle. */
  edited() {
    if (!this.labelChosen) this.label.value = "";
    this.preset = null;
    markPreset(this.section, null);
    this.link();
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), SETTLE_MS);
  }

  async run(problem = null) {
    const body = { image: this.pad.image };
    if (this.label.value !== "") body.label = Number(this.label.value);
    if (this.preset) body.compare_with = this.preset;
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, body, busy), "Reading the drawing on the server…");
    if (!answer) return;
    this.ran("runs", answer);
    this.answered(answer, { problem, recorded: this.preset ? this.presetLabel : null });
    this.render(answer);
    if (this.traceShown) this.trace();
  }

  /** A drawing unlike every image the model learned from (blank, or a scribble), and what its answer is worth. */
  unlike(read, confidence) {
    const { thing } = this.settings.words;
    const blank = this.pad.image.every((row) => row.every((v) => v === 0));
    const what = blank ? "A blank page is unlike any " + thing + " the model learned from" : `This drawing lies farther from every held-out ${thing} than any of them lies from its nearest neighbour: unlike anything the model learned from`;
    return el("p", { class: "notice draw-unusual", id: "draw-unusual" }, `${what}. A classifier has no answer for “none of these”: it must pick one of its ${this.settings.sizes.classes} classes, so it reads ${this.name(read)} with probability ${sig(confidence, 3)} all the same. That number says how it splits its vote, not that it sees a ${this.name(read)}.`);
  }

  render(answer) {
    const c = answer.case;
    const probs = item(c, "probabilities").values;
    const read = item(c, "prediction").value;
    const loss = item(c, "loss");
    const saliency = item(c, "saliency");
    const parts = [];
    parts.push(
      el("p", { class: "draw-prediction", id: "draw-prediction" }, "Read as ", el("strong", {}, this.name(read))),
      el("figure", { class: "chart", id: "draw-probabilities" }, el("figcaption", {}, el("span", { class: "chart-title" }, item(c, "probabilities").label)),
        bars(probs, probs.map((_, k) => `${k === read ? "▶ " : ""}${this.name(k)}`), 1)),
    );
    const unusual = item(c, "unusual"); // where the recipe measures it: how unlike its training images the drawing is
    if (unusual && unusual.value >= 1) parts.splice(parts.length - 1, 0, this.unlike(read, item(c, "confidence").value));
    if (loss || unusual) {
      parts.push(el("dl", { class: "metrics" }, ...(loss ? [metric(loss.label, loss.value, { id: "draw-loss" })] : []),
        ...(unusual ? [metric(unusual.label, unusual.value, { id: "draw-unusual-share" })] : [])));
    }
    parts.push(el("figure", { class: "chart lab-heatmap draw-saliency", id: "draw-saliency" },
      el("figcaption", {}, el("span", { class: "chart-title" }, saliency.label)), chartBox(`${saliency.label}: heatmap`, valueHeatmap(saliency.values, saliency.label)),
      el("p", { class: "fine" }, "Mint: ink here raises the score; rust: it lowers it. Blank paper contributes nothing.")));
    this.answerBox.replaceChildren(...parts);
    this.results.replaceChildren(folded("stages", `Inside the network, stage by stage: ${answer.groups.map((g) => g.title).join(" · ")}`,
      el("p", { class: "fine" }, "Each stage's small maps share one colour scale (mint positive, rust negative); a map drawn over the drawing lets its strokes show through."),
      ...this.stages(answer.groups, c.matrices)));
  }

  /** The stages the server grouped the case's matrices in (the recipe's display.groups), in order, each drawn over the
   * matrix its `over` names where it declares one. */
  stages(groups, matrices) {
    const byKey = new Map(matrices.map((m) => [m.key, m]));
    return groups.map(({ key: stage, title, each = "channel", over, maps: members }) => {
      const maps = members.map(({ key, index }) => ({ index, ...byKey.get(key) }));
      const under = over && byKey.get(over)?.values;
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
    const body = { image: this.pad.image };
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
