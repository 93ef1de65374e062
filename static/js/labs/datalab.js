// The DataLab: a sentence with [MASK] is traced on the server through the checkpoint; the answer is shown as
// stages (tokens, embedding, each layer, the convergence across layers, the MLM head's softmax, the
// prediction) revealed one at a time or all at once. Every table can be downloaded as CSV or JSON.

import { diverging, sig, svgEl } from "../charts.js";
import { el, reveal, saveFile, scrollBox, setDisabled } from "../dom.js";
import { LabPanel, markPreset, postJson, startingPreset, table } from "./common.js";

const ALIGNED_UNITS = 16; // FFN units shown aligned before/after GELU; all of them are in the downloads
const SVG_NS = "http://www.w3.org/2000/svg";

function csvCell(value) {
  const text = typeof value === "number" ? String(value) : String(value ?? "");
  return /[",\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** CSV and JSON buttons for one table: the rows as they are, every value at full precision. */
function downloads(name, headers, rows) {
  const csv = () => saveFile(`${name}.csv`, [headers, ...rows].map((r) => r.map(csvCell).join(",")).join("\n") + "\n", "text/csv");
  const json = () => saveFile(`${name}.json`, JSON.stringify(rows.map((r) => Object.fromEntries(headers.map((h, i) => [h, r[i]]))), null, 1), "application/json");
  const button = (text, action, label) => {
    const b = el("button", { type: "button", class: "link-button", "aria-label": label }, text);
    b.addEventListener("click", action);
    return b;
  };
  return el("p", { class: "downloads" }, "Download: ", button("CSV", csv, `Download ${name} as CSV`), " ",
    button("JSON", json, `Download ${name} as JSON`));
}

/** A table shown with rounded values, downloadable at full precision. */
function dataTable(name, caption, headers, rows, shown = (v) => (typeof v === "number" && !Number.isInteger(v) ? sig(v) : String(v))) {
  return el("div", { class: "datalab-table" }, table(headers, rows.map((r) => r.map(shown)), caption), downloads(name, headers, rows));
}

/** A vector as one strip of coloured cells (mint positive, rust negative), scaled to its largest |value|. */
function strip(values, label) {
  const limit = Math.max(...values.map(Math.abs));
  const svg = svgEl("svg", { xmlns: SVG_NS, viewBox: `0 0 ${values.length} 10`, preserveAspectRatio: "none", class: "datalab-strip",
    role: "img", "aria-label": `${label}: ${values.length} values from ${sig(Math.min(...values))} to ${sig(Math.max(...values))}` });
  values.forEach((v, i) => svg.append(svgEl("rect", { x: i, y: 0, width: 1, height: 10, fill: diverging(v, limit) })));
  return el("figure", { class: "datalab-figure" }, svg, el("figcaption", { class: "fine" }, `${label} (${values.length} values; |max| ${sig(limit)})`));
}

/** Arcs from the traced token to every token for one head; the two strongest drawn bold. */
function arcs(tokens, position, weights, strongest, label) {
  const step = 64;
  const width = tokens.length * step;
  const base = 120;
  const svg = svgEl("svg", { xmlns: SVG_NS, viewBox: `0 0 ${width} ${base + 30}`, class: "datalab-arcs", role: "img",
    "aria-label": `${label}: strongest to ${strongest.map((a) => `${tokens[a.to].token} (${sig(a.weight, 3)})`).join(" and ")}` });
  const x = (i) => i * step + step / 2;
  const max = Math.max(...weights);
  weights.forEach((w, j) => {
    if (j === position) return;
    const strong = strongest.some((a) => a.to === j);
    const height = Math.min(base - 10, Math.abs(x(j) - x(position)) * 0.6 + 10);
    const mid = (x(j) + x(position)) / 2;
    const path = svgEl("path", {
      d: `M ${x(position)} ${base} Q ${mid} ${base - 2 * height} ${x(j)} ${base}`, fill: "none",
      stroke: strong ? "rgb(31, 138, 107)" : "#8b96a3", "stroke-width": Math.max(0.5, (6 * w) / (max || 1)),
      "stroke-opacity": strong ? 1 : 0.45,
    });
    path.append(svgEl("title", {}, `${tokens[j].token}: ${sig(w)}`));
    svg.append(path);
  });
  tokens.forEach((t, i) => {
    svg.append(svgEl("text", { x: x(i), y: base + 18, "text-anchor": "middle", "font-size": 12,
      "font-weight": i === position ? 700 : 400, fill: i === position ? "#8a2d0b" : "#1d2530" }, t.token));
  });
  return svg;
}

/** The logit lens across the layers: the final prediction's probability at each depth. */
function convergenceChart(layers, predicted) {
  const w = 420;
  const h = 160;
  const left = 36;
  const bottom = 24;
  const x = (i) => left + (i * (w - left - 10)) / Math.max(1, layers.length - 1);
  const y = (p) => 8 + (1 - p) * (h - bottom - 8);
  const svg = svgEl("svg", { xmlns: SVG_NS, viewBox: `0 0 ${w} ${h}`, class: "datalab-chart", role: "img",
    "aria-label": `Probability of “${predicted}” after each layer: ${layers.map((l) => sig(l.lens.probability, 2)).join(", ")}` });
  for (const p of [0, 0.5, 1]) {
    svg.append(svgEl("line", { x1: left, x2: w - 10, y1: y(p), y2: y(p), stroke: "#dde2e7" }));
    svg.append(svgEl("text", { x: left - 6, y: y(p) + 4, "text-anchor": "end", "font-size": 10, fill: "#4a5563" }, p));
  }
  svg.append(svgEl("polyline", { points: layers.map((l, i) => `${x(i)},${y(l.lens.probability)}`).join(" "), fill: "none",
    stroke: "rgb(31, 138, 107)", "stroke-width": 2 }));
  layers.forEach((l, i) => {
    const dot = svgEl("circle", { cx: x(i), cy: y(l.lens.probability), r: 3, fill: "rgb(31, 138, 107)" });
    dot.append(svgEl("title", {}, `${l.name}: p ${sig(l.lens.probability)}, rank ${l.lens.rank}`));
    svg.append(dot);
    svg.append(svgEl("text", { x: x(i), y: h - 8, "text-anchor": "middle", "font-size": 10, fill: "#4a5563" }, i === 0 ? "emb" : i));
  });
  return svg;
}

function tokenChips(answer) {
  return el("ol", { class: "datalab-tokens", start: 0 }, ...answer.tokens.map((t) => el("li", {
    class: `datalab-token${t.index === answer.position ? " is-traced" : ""}${t.special ? " is-special" : ""}`,
    title: `position ${t.index}, id ${t.id}`,
  }, el("span", { class: "datalab-token-text" }, t.token), el("span", { class: "datalab-token-id" }, `${t.index} · ${t.id}`))));
}

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.form = section.querySelector("#datalab-form");
    this.text = section.querySelector("#datalab-text");
    this.topK = section.querySelector("#datalab-top-k");
    this.position = section.querySelector("#datalab-position");
    this.steps = section.querySelector("#datalab-steps");
    this.stages = section.querySelector("#datalab-stages");
    this.progress = section.querySelector("#datalab-progress");
    this.shown = 0;
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.trace(false);
    });
    this.text.addEventListener("input", () => {
      markPreset(this.section, null);
      if (!this.answer) return;
      this.setStatus("The sentence changed: press Trace to trace it.");
      this.markStale(this.text.value === this.tracedText ? null : "press Trace to trace the sentence above.");
    });
    this.position.addEventListener("change", () => this.trace(true));
    section.querySelector("#datalab-next").addEventListener("click", () => this.reveal(this.shown + 1, true));
    section.querySelector("#datalab-all").addEventListener("click", () => this.reveal(this.stages.children.length, false));
    section.querySelector("#datalab-restart").addEventListener("click", () => this.reveal(1, true));
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.usePreset(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    const preset = startingPreset(this.settings.presets);
    if (preset) this.usePreset(preset, false);
    const submit = this.form.querySelector("[type=submit]");
    submit.disabled = submit.dataset.checkpoint === "missing";
  }

  usePreset(preset, run = true) {
    this.text.value = preset.request.text;
    if (preset.request.top_k) this.topK.value = preset.request.top_k;
    markPreset(this.section, preset.id);
    if (run) this.trace(false);
  }

  request(keepPosition) {
    const body = { text: this.text.value, top_k: Number(this.topK.value) || 10 };
    if (keepPosition && this.position.value !== "") body.position = Number(this.position.value);
    return body;
  }

  async trace(keepPosition) {
    const body = this.request(keepPosition);
    const answer = await this.latest.run((busy) => postJson(this.urls.datalab, body, busy),
      "Tracing on the server (the first trace loads the checkpoint)…");
    if (!answer) {
      if (this.answer && body.text !== this.tracedText) this.markStale("the trace of the sentence above did not succeed (see above).");
      return;
    }
    this.answer = answer;
    this.tracedText = body.text;
    this.markStale(null);
    this.choosePositions(answer);
    this.render(answer);
    const p = answer.prediction;
    this.setStatus(`[MASK] at position ${answer.position} resolved to “${p.token}” (p ${sig(p.probability, 3)}) in ${answer.layers.length - 1} layers; ${Math.round(answer.compute_seconds * 1000)} ms on the server.`);
  }

  /** The stages on screen are of another sentence than the one in the box: say so, dim them, and hide the
   * [MASK] menu that names their positions (`why` null: they match the box again). */
  markStale(why) {
    this.staleNote ??= this.stages.parentNode.insertBefore(el("p", { class: "notice stale-note", id: "datalab-stale", role: "status" }), this.stages);
    this.staleNote.hidden = !why;
    this.staleNote.textContent = why ? `These stages are of “${this.tracedText}”, not of the sentence in the box: ${why}` : "";
    this.stages.classList.toggle("is-stale", Boolean(why));
    this.section.querySelector("#datalab-position-label").hidden = Boolean(why) || this.answer.mask_positions.length < 2;
  }

  choosePositions(answer) {
    const label = this.section.querySelector("#datalab-position-label");
    label.hidden = answer.mask_positions.length < 2;
    this.position.replaceChildren(...answer.mask_positions.map((i) => el("option", { value: i }, `position ${i}`)));
    this.position.value = String(answer.position);
  }

  stage(id, title, summary, ...body) {
    return el("li", { class: "datalab-stage", "data-stage": id, hidden: "" },
      el("h3", {}, title), el("p", { class: "datalab-summary" }, summary), ...body);
  }

  render(answer) {
    const name = (part) => `datalab-${part}`;
    const traced = answer.tokens[answer.position];
    const e = answer.embedding;
    const stages = [
      this.stage("tokens", "1. WordPiece tokens", `${answer.tokens.length} tokens with [CLS] and [SEP]; the traced [MASK] is at position ${answer.position} (id ${traced.id}).`,
        tokenChips(answer),
        el("details", {}, el("summary", {}, "As a table"),
          dataTable(name("tokens"), "Tokens", ["position", "token", "id", "special"], answer.tokens.map((t) => [t.index, t.token, t.id, t.special])))),
      this.stage("embedding", "2. Embedding", `Word ${e.token_id}, position ${e.position} and segment ${e.segment} vectors (${e.word.length} values each) are added, then LayerNorm normalises the sum.`,
        strip(e.word, "Word embedding"), strip(e.position_vector, "Position embedding"), strip(e.segment_vector, "Segment embedding"),
        strip(e.sum, "Their sum"), strip(e.norm, "After LayerNorm"),
        dataTable(name("embedding"), "The embedding stage, dimension by dimension", ["dimension", "word", "position", "segment", "sum", "layernorm"],
          e.word.map((_, i) => [i, e.word[i], e.position_vector[i], e.segment_vector[i], e.sum[i], e.norm[i]]).slice(0, 8)),
        downloads(name("embedding-all"), ["dimension", "word", "position", "segment", "sum", "layernorm"],
          e.word.map((_, i) => [i, e.word[i], e.position_vector[i], e.segment_vector[i], e.sum[i], e.norm[i]]))),
      ...answer.layers.slice(1).map((layer) => this.layerStage(answer, layer)),
      this.convergenceStage(answer),
      this.headStage(answer),
    ];
    this.stages.replaceChildren(...stages);
    this.steps.hidden = false;
    this.shown = 0;
    this.reveal(1, false);
  }

  layerStage(answer, layer) {
    const heads = layer.attention.heads;
    const select = el("select", { "aria-label": `Head of ${layer.name}` }, ...heads.map((_, h) => el("option", { value: h }, `head ${h + 1}`)));
    const figure = el("div", { class: "datalab-arcs-wrap" });
    const rows = heads.map((row, h) => [h + 1, ...row]);
    const draw = () => {
      const h = Number(select.value);
      figure.replaceChildren(arcs(answer.tokens, answer.position, heads[h], layer.attention.arcs[h], `${layer.name}, head ${h + 1}`));
    };
    select.addEventListener("change", draw);
    draw();
    const ffn = layer.ffn;
    const units = ffn.strongest;
    const order = [...ffn.before.keys()].sort((a, b) => Math.abs(ffn.before[b]) - Math.abs(ffn.before[a])).slice(0, ALIGNED_UNITS).sort((a, b) => a - b);
    const caption = `FFN units with the largest inputs, aligned: the same column is the same unit (${ffn.before.length} units in the download)`;
    const aligned = scrollBox(caption, el("table", { class: "datalab-ffn" },
      el("caption", {}, caption),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "unit"), ...order.map((u) => el("th", { scope: "col" }, u)))),
      el("tbody", {},
        el("tr", {}, el("th", { scope: "row" }, "before GELU"), ...order.map((u) => el("td", { class: ffn.before[u] > 0 ? "is-passed" : "is-squeezed" }, sig(ffn.before[u], 3)))),
        el("tr", {}, el("th", { scope: "row" }, "after GELU"), ...order.map((u) => el("td", { class: ffn.before[u] > 0 ? "is-passed" : "is-squeezed" }, sig(ffn.after[u], 3)))))));
    const lens = layer.lens;
    return this.stage(`layer-${layer.index}`, `${layer.index + 2}. ${layer.name[0].toUpperCase()}${layer.name.slice(1)}`,
      `Attention, then the feed-forward network: ${ffn.passed} of ${ffn.before.length} units passed GELU, ${ffn.squeezed} were squeezed. Logit lens: “${answer.prediction.token}” ranks ${lens.rank} here (p ${sig(lens.probability, 3)}); cosine to the final state ${sig(lens.cosine, 3)}.`,
      el("div", { class: "lab-options" }, el("label", {}, "Attention of ", select)), figure,
      dataTable(`datalab-layer${layer.index}-attention`, `${layer.name}: every head's attention from the traced token`, ["head", ...answer.tokens.map((t) => `${t.index}:${t.token}`)], rows),
      strip(layer.post_attention, "State after attention, residual and LayerNorm"),
      aligned,
      el("p", { class: "fine" }, `Strongest after GELU: ${units.map((u) => `unit ${u.unit} (${sig(u.after, 3)})`).join(", ")}. All ${ffn.before.length} units:`),
      downloads(`datalab-layer${layer.index}-ffn`, ["unit", "before GELU", "after GELU"], ffn.before.map((v, i) => [i, v, ffn.after[i]])),
      strip(layer.state, "Output state of the layer"));
  }

  convergenceStage(answer) {
    const p = answer.prediction;
    const rows = answer.layers.map((l) => [l.name, l.lens.rank, l.lens.probability, l.lens.cosine, l.lens.top.map((t) => `${t.token} (${sig(t.probability, 3)})`).join(", ")]);
    const first = answer.layers.find((l) => l.lens.rank === 1); // the last layer's is the prediction itself
    return this.stage("convergence", `${answer.layers.length + 2}. Convergence across the layers`,
      `The MLM head applied to each layer's state (a logit lens): “${p.token}” ${first.index === 0 ? "is already the most likely word after the embeddings" : `first becomes the most likely word at ${first.name}`}; the chart shows its probability at each depth.`,
      convergenceChart(answer.layers, p.token),
      dataTable("datalab-convergence", "Logit lens by layer", ["layer", "rank of the prediction", "probability", "cosine to final", "top 3"], rows));
  }

  headStage(answer) {
    const s = answer.softmax;
    const p = answer.prediction;
    const rows = answer.top.map((t) => [t.token, t.id, t.dot, t.bias, t.logit, t.exp, t.probability]);
    return this.stage("head", `${answer.layers.length + 3}. The MLM head's softmax and the prediction`,
      `Each logit is h · E[word] + bias over all ${s.vocabulary} words; shift = the largest logit (${sig(s.shift)}); denominator = Σ exp(logit − shift) = ${sig(s.denominator)}. Prediction: “${p.token}” (id ${p.id}) with probability ${sig(p.probability, 4)}.`,
      strip(answer.head_state, "h: the MLM head's transformed state"),
      dataTable("datalab-softmax", `The ${answer.top.length} most likely words`, ["token", "id", "h · E[token]", "bias", "logit", "exp(logit − shift)", "probability"], rows),
      el("p", { class: "datalab-prediction" }, "[MASK] → ", el("strong", {}, p.token), ` (p ${sig(p.probability, 4)})`));
  }

  /** Show the first `count` stages. Stepping scrolls the newest into view and names it in the progress line
   * (a live region), while focus stays on the button pressed, so that pressing it again steps on. */
  reveal(count, step) {
    const all = [...this.stages.children];
    this.shown = Math.max(1, Math.min(count, all.length));
    all.forEach((stage, i) => { stage.hidden = i >= this.shown; });
    const newest = all[this.shown - 1];
    this.progress.textContent = `Stage ${this.shown} of ${all.length}: ${newest.querySelector("h3").textContent.replace(/^\d+\. /, "")}`;
    const next = this.section.querySelector("#datalab-next");
    setDisabled(next, this.shown >= all.length, this.section.querySelector("#datalab-restart"));
    if (step) reveal(newest);
  }
}
