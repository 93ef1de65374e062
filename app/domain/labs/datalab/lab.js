// The DataLab: a sentence is traced on the server through the checkpoint; the answer is shown as stages (tokens,
// embedding, each layer, then the convergence across layers, the MLM head's softmax and the prediction of a
// [MASK], or, for an encoder-only checkpoint, the sentence's pooled embedding; and the similarity to a second
// sentence where one is given) revealed one at a time or all at once. Every table can be downloaded as CSV or JSON.

import { diverging, sig, svgEl } from "../charts.js";
import { COLOUR } from "../palette.js";
import { chartBox, el, reveal, saveFile, scrollBox, setDisabled } from "../dom.js";
import { bars, LabPanel, linkedInts, linkInput, markPreset, postJson, startFromLink, table, weightsWarning } from "./common.js";

const ALIGNED_UNITS = 16; // FFN units shown aligned before/after GELU; all of them are in the downloads
const PREVIEW_DIMENSIONS = 12; // of the traced token's first vector, shown as numbers
const HOT_SPOTS = 5; // the strongest dimensions of a state, called out by name
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

function shownValue(v) {
  return typeof v === "number" && !Number.isInteger(v) ? sig(v) : String(v);
}

/** A table shown with rounded values (`shown(value, column)`), downloadable at full precision. */
function dataTable(name, caption, headers, rows, shown = shownValue) {
  return el("div", { class: "datalab-table" }, table(headers, rows.map((r) => r.map((v, i) => shown(v, i))), caption), downloads(name, headers, rows));
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
  const svg = svgEl("svg", { xmlns: SVG_NS, viewBox: `0 0 ${width} ${base + 30}`, width, height: base + 30, class: "datalab-arcs", role: "img",
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
      stroke: strong ? COLOUR.mint : COLOUR.axis, "stroke-width": Math.max(0.5, (6 * w) / (max || 1)),
      "stroke-opacity": strong ? 1 : 0.45,
    });
    path.append(svgEl("title", {}, `${tokens[j].token}: ${sig(w)}`));
    svg.append(path);
  });
  tokens.forEach((t, i) => {
    svg.append(svgEl("text", { x: x(i), y: base + 18, "text-anchor": "middle", "font-size": 12,
      "font-weight": i === position ? 700 : 400, fill: i === position ? COLOUR.rustDeep : COLOUR.ink }, t.token));
  });
  return svg;
}

/** The first layer from which the prediction stays the most likely word to the end (the last layer's always is). */
function lockIn(layers) {
  let first = layers.length - 1;
  while (first > 0 && layers[first - 1].lens.rank === 1) first--;
  return layers[first];
}

/** The logit lens across the layers: the final prediction's probability at each depth, and where it locks in. */
function convergenceChart(layers, predicted) {
  const w = Math.max(320, 60 + layers.length * 36);
  const h = 170;
  const left = 40;
  const bottom = 26;
  const x = (i) => left + (i * (w - left - 10)) / Math.max(1, layers.length - 1);
  const y = (p) => 8 + (1 - p) * (h - bottom - 8);
  const locked = lockIn(layers);
  const svg = svgEl("svg", { xmlns: SVG_NS, viewBox: `0 0 ${w} ${h}`, width: w, height: h, class: "datalab-chart", role: "img",
    "font-size": 12, "font-family": "system-ui, sans-serif",
    "aria-label": `Probability of “${predicted}” after each layer: ${layers.map((l) => sig(l.lens.probability, 2)).join(", ")}; it stays the most likely word from ${locked.name} on` });
  for (const p of [0, 0.5, 1]) {
    svg.append(svgEl("line", { x1: left, x2: w - 10, y1: y(p), y2: y(p), stroke: COLOUR.grid }));
    svg.append(svgEl("text", { x: left - 6, y: y(p) + 4, "text-anchor": "end", fill: COLOUR.inkSoft }, p));
  }
  const lx = x(locked.index);
  svg.append(svgEl("line", { x1: lx, x2: lx, y1: 8, y2: h - bottom, stroke: COLOUR.rustDeep, "stroke-dasharray": "4 3" }));
  svg.append(svgEl("text", { x: Math.min(lx + 4, w - 70), y: 18, fill: COLOUR.rustDeep }, "locks in"));
  svg.append(svgEl("polyline", { points: layers.map((l, i) => `${x(i)},${y(l.lens.probability)}`).join(" "), fill: "none",
    stroke: COLOUR.mint, "stroke-width": 2 }));
  layers.forEach((l, i) => {
    const dot = svgEl("circle", { cx: x(i), cy: y(l.lens.probability), r: 3, fill: COLOUR.mint });
    dot.append(svgEl("title", {}, `${l.name}: p ${sig(l.lens.probability)}, rank ${l.lens.rank}`));
    svg.append(dot);
    svg.append(svgEl("text", { x: x(i), y: h - 8, "text-anchor": "middle", fill: COLOUR.inkSoft }, i === 0 ? "emb" : i));
  });
  return svg;
}

/** A left-to-right flow of boxes (a label over its detail) joined by arrows: how a vector's shape changes. */
function flow(label, boxes) {
  return el("ol", { class: "datalab-flow", "aria-label": label }, ...boxes.map(([name, detail]) =>
    el("li", {}, el("span", { class: "datalab-flow-name" }, name), el("span", { class: "datalab-flow-detail" }, detail))));
}

/** The dimensions of a vector with the largest |value|, strongest first, as "dimension 12 (−3.4)". */
function hotSpots(values, count = HOT_SPOTS) {
  const order = [...values.keys()].sort((a, b) => Math.abs(values[b]) - Math.abs(values[a])).slice(0, count);
  const energy = values.reduce((sum, v) => sum + v * v, 0);
  const share = order.reduce((sum, i) => sum + values[i] * values[i], 0) / (energy || 1);
  return { text: order.map((i) => `dimension ${i} (${sig(values[i], 3)})`).join(", "), share };
}

function percent(p, digits = 3) {
  return `${sig(100 * p, digits)} %`;
}

function tokenChips(answer) {
  return el("ol", { class: "datalab-tokens", start: 0 }, ...answer.tokens.map((t) => el("li", {
    class: `datalab-token${t.index === answer.position ? " is-traced" : ""}${t.special ? " is-special" : ""}`,
    title: `position ${t.index}, id ${t.id}`,
  }, el("span", { class: "datalab-token-text" }, t.token), el("span", { class: "datalab-token-id" }, `${t.index} · ${t.id}`))));
}

/** Whether the answer is the MLM head's (a [MASK] predicted) rather than an encoder's sentence embedding. */
function predicts(answer) {
  return answer.checkpoint.head === "mlm";
}

/** The positions the menu offers: the [MASK]s with the MLM head, every token without it. */
function traceable(answer) {
  return predicts(answer) ? answer.mask_positions : answer.tokens.map((t) => t.index);
}

/** One sentence's tokens with their shares of the similarity, as bars (largest |share| first in the summary). */
function sharesFigure(tokens, shares, label) {
  return el("figure", { class: "chart" }, el("figcaption", {}, el("span", { class: "chart-title" }, label)),
    bars(shares, tokens.map((t) => `${t.index}:${t.token}`)));
}

function strongestShares(tokens, shares, count = 3) {
  return [...shares.keys()].sort((a, b) => shares[b] - shares[a]).slice(0, count)
    .map((i) => `“${tokens[i].token}” (${sig(shares[i], 3)})`).join(", ");
}

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.form = section.querySelector("#datalab-form");
    this.text = section.querySelector("#datalab-text");
    this.other = section.querySelector("#datalab-other");
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
      this.ownInput();
      if (!this.answer) return;
      this.setStatus("The sentence changed: press Trace to trace it.");
      this.markStale(this.text.value === this.tracedText ? null : "press Trace to trace the sentence above.");
    });
    this.other.addEventListener("input", () => this.ownInput());
    this.position.addEventListener("change", () => this.trace(true));
    section.querySelector("#datalab-next").addEventListener("click", () => this.reveal(this.shown + 1, true));
    section.querySelector("#datalab-all").addEventListener("click", () => this.reveal(this.stages.children.length, false));
    section.querySelector("#datalab-restart").addEventListener("click", () => this.reveal(1, true));
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.usePreset(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    const submit = this.form.querySelector("[type=submit]");
    submit.disabled = submit.dataset.checkpoint === "missing";
    const start = startFromLink(this.settings.presets, (params) => {
      if (!params.has("text")) return null;
      const [topK] = params.has("top_k") ? linkedInts(params, "top_k") : [];
      return { text: params.get("text"), top_k: topK, other: params.get("other") ?? "" };
    });
    if (start.input) {
      this.text.value = start.input.text;
      this.other.value = start.input.other;
      if (start.input.top_k) this.topK.value = start.input.top_k;
      if (!submit.disabled) this.trace(false); // a shared trace is shown, not just its sentence
    } else if (start.preset) {
      this.usePreset(start.preset, !submit.disabled); // the recorded sentence answered as the page opens
      if (start.problem) this.setStatus(start.problem);
    }
  }

  /** The sentences are the reader's own now, not a recorded case's: a link names them, not the case. */
  ownInput() {
    markPreset(this.section, null);
    this.presetId = null;
  }

  usePreset(preset, run = true) {
    this.text.value = preset.request.text;
    this.other.value = preset.request.other ?? "";
    if (preset.request.top_k) this.topK.value = preset.request.top_k;
    markPreset(this.section, preset.id);
    this.presetId = preset.id;
    if (run) this.trace(false);
  }

  request(keepPosition) {
    const body = { text: this.text.value, top_k: Number(this.topK.value) || 10 };
    if (this.other.value.trim()) body.other = this.other.value;
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
    this.ran("datalab", answer);
    this.tracedText = body.text;
    // the sentences traced, for a reload or a link
    linkInput({ text: body.text, top_k: body.top_k, ...(body.other ? { other: body.other } : {}) }, this.presetId);
    this.markStale(null);
    this.choosePositions(answer);
    this.render(answer);
    const layers = answer.layers.length - 1;
    const p = answer.prediction;
    const read = predicts(answer) ? `[MASK] at position ${answer.position} resolved to “${p.token}” (p ${sig(p.probability, 3)}) in ${layers} layers`
      : `“${answer.tokens[answer.position].token}” traced through ${layers} layers to the sentence's embedding (${answer.sentence.embedding.length} values)`;
    const compared = answer.similarity ? `; similarity to the second sentence ${sig(answer.similarity.cosine, 3)}` : "";
    this.answered(answer, { fallback: `${read}${compared}.${weightsWarning(answer)}`, recorded: this.presetId ? this.settings.presets.find((p) => p.id === this.presetId)?.label : null });
  }

  /** The stages on screen are of another sentence than the one in the box: say so, dim them, and hide the
   * [MASK] menu that names their positions (`why` null: they match the box again). */
  markStale(why) {
    this.staleNote ??= this.stages.parentNode.insertBefore(el("p", { class: "notice stale-note", id: "datalab-stale", role: "status" }), this.stages);
    this.staleNote.hidden = !why;
    this.staleNote.textContent = why ? `These stages are of “${this.tracedText}”, not of the sentence in the box: ${why}` : "";
    this.stages.classList.toggle("is-stale", Boolean(why));
    this.section.querySelector("#datalab-position-label").hidden = Boolean(why) || traceable(this.answer).length < 2;
  }

  choosePositions(answer) {
    const label = this.section.querySelector("#datalab-position-label");
    label.hidden = traceable(answer).length < 2;
    const name = (i) => (predicts(answer) ? `the [MASK] at position ${i}` : `“${answer.tokens[i].token}” at position ${i}`);
    this.position.replaceChildren(...traceable(answer).map((i) => el("option", { value: i }, name(i))));
    this.position.value = String(answer.position);
  }

  stage(id, title, summary, ...body) {
    return el("li", { class: "datalab-stage", "data-stage": id, hidden: "" },
      el("h3", {}, title), el("p", { class: "datalab-summary" }, summary), ...body);
  }

  render(answer) {
    const name = (part) => `datalab-${part}`;
    const traced = answer.tokens[answer.position];
    const size = answer.checkpoint; // the checkpoint in use: hidden, intermediate, heads, layers, vocab
    const e = answer.embedding;
    const embeddingRows = e.word.map((_, i) => [i, e.word[i], e.position_vector[i], e.segment_vector[i], e.sum[i], e.norm[i]]);
    const readOut = predicts(answer) ? [this.convergenceStage(answer), this.headStage(answer), this.softmaxStage(answer)] : [this.sentenceStage(answer)];
    const stages = [
      this.stage("tokens", "1. WordPiece tokens", `${answer.tokens.length} tokens with [CLS] and [SEP]; the traced ${predicts(answer) ? "[MASK]" : "token"} is at position ${answer.position} (id ${traced.id}).`,
        tokenChips(answer),
        flow("From text to vectors", [
          [`${answer.tokens.length} tokens`, `“${traced.token}” at position ${answer.position}`],
          [`${answer.tokens.length} token ids`, `“${traced.token}” → ${traced.id}`],
          [`${answer.tokens.length} × ${size.hidden} vectors`, `“${traced.token}”: shape [1, ${size.hidden}]`]]),
        el("p", { class: "fine" }, `Each id picks one row of a ${size.vocab} × ${size.hidden} embedding table: from here on every token is a vector of ${size.hidden} numbers.`),
        el("details", {}, el("summary", {}, "As a table"),
          dataTable(name("tokens"), "Tokens", ["position", "token", "id", "special"], answer.tokens.map((t) => [t.index, t.token, t.id, t.special])))),
      this.stage("embedding", "2. Embedding", `Word ${e.token_id}, position ${e.position} and segment ${e.segment} vectors (${e.word.length} values each) are added, then LayerNorm normalises the sum.`,
        el("p", {}, `The vector of “${traced.token}” (id ${traced.id}), shape [1, ${size.hidden}], holds no context yet: it is the same in any sentence that has this token at position ${e.position}. Its first ${Math.min(PREVIEW_DIMENSIONS, e.norm.length)} of ${size.hidden} dimensions after LayerNorm: `,
          el("code", {}, e.norm.slice(0, PREVIEW_DIMENSIONS).map((v) => sig(v, 3)).join(", ")), "."),
        strip(e.word, "Word embedding"), strip(e.position_vector, "Position embedding"), strip(e.segment_vector, "Segment embedding"),
        strip(e.sum, "Their sum"), strip(e.norm, "After LayerNorm"),
        dataTable(name("embedding"), "The embedding stage, dimension by dimension", ["dimension", "word", "position", "segment", "sum", "layernorm"],
          embeddingRows.slice(0, 8)),
        downloads(name("embedding-all"), ["dimension", "word", "position", "segment", "sum", "layernorm"], embeddingRows)),
      ...answer.layers.slice(1).map((layer) => this.layerStage(answer, layer)),
      ...readOut,
      ...(answer.similarity ? [this.similarityStage(answer, readOut.length)] : []),
    ];
    this.stages.replaceChildren(...stages);
    this.steps.hidden = false;
    this.shown = 0;
    this.reveal(1, false);
  }

  layerStage(answer, layer) {
    const size = answer.checkpoint;
    const heads = layer.attention.heads;
    const select = el("select", { "aria-label": `Head of ${layer.name}` }, ...heads.map((_, h) => el("option", { value: h }, `head ${h + 1}`)));
    const figure = el("div", { class: "datalab-arcs-wrap" });
    const rows = heads.map((row, h) => [h + 1, ...row]);
    const draw = () => {
      const h = Number(select.value);
      const label = `${layer.name}, head ${h + 1}`;
      figure.replaceChildren(chartBox(`${label}: attention arcs`, arcs(answer.tokens, answer.position, heads[h], layer.attention.arcs[h], label)));
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
    const hot = hotSpots(layer.post_attention);
    const lensText = lens ? ` Logit lens: “${answer.prediction.token}” ranks ${lens.rank} here (p ${sig(lens.probability, 3)}); cosine to the final state ${sig(lens.cosine, 3)}.` : "";
    return this.stage(`layer-${layer.index}`, `${layer.index + 2}. ${layer.name[0].toUpperCase()}${layer.name.slice(1)}`,
      `Attention, then the feed-forward network: ${ffn.passed} of ${ffn.before.length} units passed GELU, ${ffn.squeezed} were squeezed.${lensText}`,
      el("p", { class: "fine" }, `Each of the ${size.heads} heads scores “${answer.tokens[answer.position].token}” against every token, and the weights it gives them (summing to 1) mix their vectors into the traced one. The arcs show one head's weights; the two strongest are drawn bold.`),
      el("div", { class: "lab-options" }, el("label", {}, "Attention of ", select)), figure,
      dataTable(`datalab-layer${layer.index}-attention`, `${layer.name}: every head's attention from the traced token`, ["head", ...answer.tokens.map((t) => `${t.index}:${t.token}`)], rows),
      strip(layer.post_attention, "State after attention, residual and LayerNorm"),
      el("p", { class: "datalab-hot-spots" }, `Hot spots after attention: ${hot.text}. These ${HOT_SPOTS} of ${size.hidden} dimensions hold ${percent(hot.share)} of the vector's squared length.`),
      this.ffnExplained(answer, ffn),
      aligned,
      el("p", { class: "fine" }, `Strongest after GELU: ${units.map((u) => `unit ${u.unit} (${sig(u.after, 3)})`).join(", ")}. All ${ffn.before.length} units:`),
      downloads(`datalab-layer${layer.index}-ffn`, ["unit", "before GELU", "after GELU"], ffn.before.map((v, i) => [i, v, ffn.after[i]])),
      strip(layer.state, "Output state of the layer"));
  }

  /** The FFN's widening and narrowing with this checkpoint's sizes, and GELU as a gate, worked on two of this
   * layer's units: Φ(x) is read off as GELU(x) / x, what the gate let through. */
  ffnExplained(answer, ffn) {
    const { hidden, intermediate } = answer.checkpoint;
    const units = [...ffn.before.keys()];
    const passed = units.reduce((best, u) => (ffn.before[u] > ffn.before[best] ? u : best), 0);
    const squeezed = units.reduce((best, u) => (ffn.before[u] < ffn.before[best] ? u : best), 0);
    const gate = (u) => `unit ${u}: x = ${sig(ffn.before[u], 3)}, GELU(x) = ${sig(ffn.after[u], 3)}, so Φ(x) = ${percent(ffn.after[u] / ffn.before[u])}`;
    return el("div", { class: "datalab-ffn-explained" },
      flow("The feed-forward network", [[`${hidden}`, "the state"], [`Linear ${hidden} → ${intermediate}`, "widen"], ["GELU", "x · Φ(x)"], [`Linear ${intermediate} → ${hidden}`, "narrow"], [`${hidden}`, "+ residual, LayerNorm"]]),
      el("p", {}, "GELU is a gate: GELU(x) = x · Φ(x), where Φ(x) is the chance that a standard normal value is below x. A large positive input passes almost whole, a negative one is squeezed towards zero. In this layer: ",
        `${gate(passed)} passed; ${gate(squeezed)} let through.`));
  }

  convergenceStage(answer) {
    const p = answer.prediction;
    const rows = answer.layers.map((l) => [l.name, l.lens.rank, l.lens.probability, l.lens.cosine, l.lens.top.map((t) => `${t.token} (${sig(t.probability, 3)})`).join(", ")]);
    const first = answer.layers.find((l) => l.lens.rank === 1); // the last layer's is the prediction itself
    const locked = lockIn(answer.layers);
    const lockText = locked.index === 0 ? "it is the most likely word at every depth, from the embeddings on"
      : locked === first ? "it locks in there: the most likely word at every later depth"
      : `it then loses first place and locks in at ${locked.name}, staying the most likely word to the end`;
    return this.stage("convergence", `${answer.layers.length + 2}. Convergence across the layers`,
      `The MLM head applied to each layer's state (a logit lens): “${p.token}” ${first.index === 0 ? "is already the most likely word after the embeddings" : `first becomes the most likely word at ${first.name}`}; ${lockText} (p ${sig(locked.lens.probability, 3)} at ${locked.name}, ${sig(p.probability, 3)} at the end). The chart shows its probability at each depth.`,
      chartBox(`Probability of “${p.token}” after each layer`, convergenceChart(answer.layers, p.token)),
      dataTable("datalab-convergence", "Logit lens by layer", ["layer", "rank of the prediction", "probability", "cosine to final", "top 3"], rows));
  }

  headStage(answer) {
    const { hidden, vocab } = answer.checkpoint;
    const top = answer.top[0];
    const rows = answer.top.map((t) => [t.token, t.id, t.dot, t.bias, t.logit]);
    return this.stage("head", `${answer.layers.length + 3}. The MLM head: a dot product with every word`,
      `The last layer's state of the [MASK] is transformed (dense, GELU, LayerNorm) into h, ${hidden} numbers, and compared with all ${vocab} rows of the ${vocab} × ${hidden} word-embedding matrix, the same matrix that embedded the tokens: h · E[word] is large when h points the way the word's embedding points.`,
      el("p", { class: "datalab-logit" }, el("strong", {}, "What is a logit? "),
        `The raw score the head gives a word before softmax: logit = h · E[word] + bias. For “${top.token}”: ${sig(top.dot)} + ${sig(top.bias)} = ${sig(top.logit)}. Logits are unbounded; only their differences matter to softmax.`),
      strip(answer.head_state, "h: the MLM head's transformed state"),
      el("figure", { class: "chart" }, el("figcaption", {}, el("span", { class: "chart-title" }, `Alignment h · E[word] of the ${answer.top.length} words with the largest logits`)),
        bars(answer.top.map((t) => t.dot), answer.top.map((t) => t.token))),
      dataTable("datalab-logits", `The ${answer.top.length} largest logits of ${vocab}`, ["token", "id", "h · E[token]", "bias", "logit"], rows));
  }

  softmaxStage(answer) {
    const s = answer.softmax;
    const p = answer.prediction;
    const top = answer.top[0];
    const shown = answer.top.reduce((sum, t) => sum + t.probability, 0);
    const rows = answer.top.map((t) => [t.token, t.id, t.dot, t.bias, t.logit, t.exp, t.probability]);
    const last = rows[0].length - 1;
    return this.stage("softmax", `${answer.layers.length + 4}. Softmax: logits to probabilities`,
      `P(word) = e^z / Σ e^z over all ${s.vocabulary} words, computed as e^(z − shift) / Σ e^(z − shift) with shift = the largest logit (${sig(s.shift)}), which gives the same ratios without overflow. Denominator Σ e^(z − shift) = ${sig(s.denominator)}.`,
      el("p", { class: "datalab-softmax-worked" }, `For “${top.token}”: e^(${sig(top.logit)} − ${sig(s.shift)}) = ${sig(top.exp)}; ${sig(top.exp)} ÷ ${sig(s.denominator)} = ${sig(top.probability)}, a confidence of ${percent(top.probability)}. `,
        `The ${answer.top.length} words below hold ${percent(shown)} together; the other ${s.vocabulary - answer.top.length} share ${percent(Math.max(0, 1 - shown))}.`),
      dataTable("datalab-softmax", `The ${answer.top.length} most likely words; probability as a confidence`,
        ["token", "id", "h · E[token]", "bias", "logit", "exp(logit − shift)", "probability"], rows,
        (v, column) => (column === last ? percent(v) : shownValue(v))),
      el("p", { class: "datalab-prediction" }, "[MASK] → ", el("strong", {}, p.token)),
      el("p", {}, `Prediction: “${p.token}” (id ${p.id}) with probability ${sig(p.probability, 4)} (${percent(p.probability)}), after ${answer.layers.length - 1} layers of width ${answer.checkpoint.hidden}.`));
  }

  /** An encoder-only checkpoint's reading: why it predicts no [MASK], and the sentence's pooled embedding. */
  sentenceStage(answer) {
    const s = answer.sentence;
    const { hidden } = answer.checkpoint;
    const rows = s.embedding.map((v, i) => [i, s.mean[i], v]);
    return this.stage("sentence", `${answer.layers.length + 2}. The sentence's embedding`,
      `The mean of all ${s.tokens} tokens' final states ([CLS] and [SEP] included), scaled to length one: ${hidden} numbers that stand for the whole sentence.`,
      el("p", { class: "notice", id: "datalab-no-mlm" }, el("strong", {}, "This checkpoint cannot predict a [MASK]. "),
        "Its weights hold the encoder alone, without the MLM head (the dense layer, LayerNorm and word-embedding decoder that score every word of the vocabulary for a masked position): it was trained, as sentence-transformers models are, to place sentences of similar meaning near each other, not to fill in words. What it gives is below: one vector per sentence."),
      flow("From token states to a sentence", [[`${s.tokens} × ${hidden}`, "final states"], ["mean over tokens", `length ${sig(s.length, 3)}`], [`÷ ${sig(s.length, 3)}`, "scale to length one"], [`${hidden}`, "the embedding"]]),
      strip(s.mean, "Mean of the final states"), strip(s.embedding, "The sentence's embedding (length one)"),
      dataTable("datalab-sentence", "The sentence's embedding, dimension by dimension", ["dimension", "mean", "embedding"], rows.slice(0, 8)),
      downloads("datalab-sentence-all", ["dimension", "mean", "embedding"], rows),
      el("p", { class: "fine" }, "Give a second sentence above (Compare with) to see how near the checkpoint places the two."));
  }

  /** The two sentences' cosine similarity, and each token's exact share of it (the shares of a sentence sum to it). */
  similarityStage(answer, readStages) {
    const sim = answer.similarity;
    const number = answer.layers.length + 2 + readStages;
    const pooled = predicts(answer) ? "the mean of its final states, scaled to length one (this checkpoint's MLM head plays no part)" : "its embedding";
    return this.stage("similarity", `${number}. Similarity to the second sentence`,
      `Cosine similarity ${sig(sim.cosine, 3)}: 1 is the same direction, 0 unrelated. Each sentence is read as ${pooled}; the cosine is the two vectors' dot product.`,
      el("p", {}, `Which tokens make it: a token's share is its final state's dot product with the other sentence's unit vector, divided by the number of tokens and the length of the mean, so the shares of either sentence add up to the cosine exactly. Most in the first sentence: ${strongestShares(answer.tokens, sim.text_shares)}; in the second: ${strongestShares(sim.other_tokens, sim.other_shares)}.`),
      el("div", { class: "lab-columns" },
        sharesFigure(answer.tokens, sim.text_shares, "First sentence: each token's share"),
        sharesFigure(sim.other_tokens, sim.other_shares, "Second sentence: each token's share")),
      dataTable("datalab-similarity", "Each token's share of the cosine similarity", ["sentence", "position", "token", "share"],
        [...answer.tokens.map((t, i) => ["first", t.index, t.token, sim.text_shares[i]]), ...sim.other_tokens.map((t, i) => ["second", t.index, t.token, sim.other_shares[i]])]));
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

/**
 * What if? on a trace: the prediction before and after the changes, the logit lens layer by layer (what the
 * MLM head makes of the traced token's state at each layer, with and without them), and the top words side by
 * side. `before` and `after` are the DataLab's answers for the same sentence.
 */
export function beforeAfter(before, after) {
  if (!predicts(before)) return sentenceBeforeAfter(before, after);
  const name = (p) => p.token ?? `id ${p.id}`; // an id past the checkpoint's vocab.txt has no token
  const word = (p) => `${name(p)} (${sig(p.probability, 3)})`;
  const prediction = el("p", { class: "whatif-prediction" }, "Prediction: ", el("strong", {}, word(before.prediction)), " → ",
    el("strong", {}, word(after.prediction)), before.prediction.id === after.prediction.id ? " (unchanged)" : " (changed)");
  const lens = table(["layer", "top before", "top after", "rank before → after"],
    before.layers.map((layer, i) => {
      const changed = after.layers[i];
      return [layer.name, word(layer.lens.top[0]), word(changed.lens.top[0]), `${layer.lens.rank} → ${changed.lens.rank}`];
    }), "Logit lens: the MLM head on each layer's state of the traced token, before and after the changes (rank: where each run's own prediction stands)", { reflow: true });
  const max = Math.max(...before.top.map((t) => t.probability), ...after.top.map((t) => t.probability));
  const tops = el("div", { class: "lab-columns is-compare" }, ...[["before", before], ["after", after]].map(([when, answer]) =>
    el("figure", { class: "chart" }, el("figcaption", {}, `Top words ${when} the changes`),
      bars(answer.top.map((t) => t.probability), answer.top.map(name), max))));
  return [prediction, lens, tops];
}

/** What if? on an encoder-only checkpoint: how far the sentence's embedding moved, and the similarity to the second
 * sentence before and after the changes. */
function sentenceBeforeAfter(before, after) {
  const a = before.sentence.embedding;
  const b = after.sentence.embedding;
  const cosine = a.reduce((sum, v, i) => sum + v * b[i], 0); // both have length one
  const parts = [el("p", { class: "whatif-prediction" }, "The sentence's embedding after the changes: cosine ", el("strong", {}, sig(cosine, 4)),
    " to the one before", cosine > 0.999999 ? " (unchanged)" : "")];
  if (before.similarity && after.similarity) {
    parts.push(el("p", {}, "Similarity to the second sentence: ", el("strong", {}, sig(before.similarity.cosine, 3)), " → ",
      el("strong", {}, sig(after.similarity.cosine, 3)), "."));
  }
  parts.push(el("div", { class: "lab-columns is-compare" }, strip(a, "Embedding before the changes"), strip(b, "Embedding after the changes")));
  return parts;
}
