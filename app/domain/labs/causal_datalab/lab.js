// The causal DataLab: a prompt is traced on the server through a decoder-only checkpoint; the answer is drawn as
// the tokens, one head's attention with the tokens on both axes (any block, any head), the residual stream's norm
// by block and token, the logit lens at the last token and the next token's distribution. Generation shows each
// step's distribution; patching draws each head's effect on the answer as a block x head grid.

import { curveSvg, diverging, heatmapSvg, sig } from "../charts.js";
import { chartBox, el, scrollBox } from "../dom.js";
import { bars, LabPanel, linkInput, markPreset, postJson, SamplingPreview, startFromLink, table, weightsWarning } from "./common.js";

const STRONGEST = 5; // heads named as the strongest of a patching grid

/** A token as the page shows it: its text with spaces made visible ("·the"), or its BPE piece where the text is
 * a lone byte of a longer character. */
function shown(token) {
  const text = token.text.includes("\uFFFD") ? token.token : token.text;
  return text.replaceAll(" ", "·").replaceAll("\n", "⏎") || "∅";
}

function axis(tokens) {
  return tokens.map((t) => ({ id: t.id, name: `${t.index}:${shown(t)}` }));
}

/** Attention weights from light (0) to full mint (the largest weight in the map), its axes titled (query, key). */
function attentionMap(weights, tokens, label, titles) {
  const limit = Math.max(...weights.flat());
  return heatmapSvg(weights, { label, axes: { rows: axis(tokens), columns: axis(tokens), titles }, colour: (v) => diverging(v, limit),
    legend: [["0", diverging(0, limit)], [sig(limit, 3), diverging(limit, limit)]],
    describe: (v) => `attention ${sig(v, 3)}` });
}

function tokenChips(tokens) {
  return el("ol", { class: "datalab-tokens", start: 0 }, ...tokens.map((t) => el("li", { class: "datalab-token", title: `position ${t.index}, id ${t.id}, BPE piece ${t.token}` },
    el("span", { class: "datalab-token-text" }, shown(t)), el("span", { class: "datalab-token-id" }, `${t.index} · ${t.id}`))));
}

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.$ = (id) => section.querySelector(`#${id}`);
    this.prompt = this.$("causal-prompt");
    this.results = this.$("causal-results");
    this.$("causal-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.trace();
    });
    this.prompt.addEventListener("input", () => {
      markPreset(this.section, null);
      this.presetId = null;
    });
    this.$("generate").addEventListener("click", () => this.generate());
    this.preview = new SamplingPreview(section, (fields) => postJson(this.urls.generations, { prompt: this.prompt.value, steps: 1, seed: 0, ...fields }),
      (answer) => answer.steps[0].top.map((t) => [shown(t), t.probability]));
    this.$("causal-patch").addEventListener("click", () => this.patch());
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.usePreset(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    const found = this.$("generate").dataset.checkpoint !== "missing";
    for (const button of section.querySelectorAll("[data-checkpoint]")) button.disabled = !found;
    const start = startFromLink(this.settings.presets, (params) => (params.has("prompt") ? { prompt: params.get("prompt"), corrupted: params.get("corrupted") } : null));
    if (start.input) {
      this.prompt.value = start.input.prompt;
      if (start.input.corrupted) this.$("causal-corrupted").value = start.input.corrupted;
      if (found) this.trace(); // a shared trace is shown, not just its prompt
    } else if (start.preset) {
      this.usePreset(start.preset, found); // the recorded prompt answered as the page opens
      if (start.problem) this.setStatus(start.problem);
    }
  }

  usePreset(preset, run = true) {
    this.prompt.value = preset.request.prompt;
    markPreset(this.section, preset.id);
    this.presetId = preset.id;
    if (run) this.trace();
  }

  /** The run in the link: the recorded case it replays, or, where it asked more than the case holds (a patching's
   * corrupted prompt), the prompt and that as typed, so that the link gives the same run again. */
  link(extra = {}) {
    linkInput({ prompt: this.prompt.value, ...extra }, Object.keys(extra).length ? null : this.presetId);
  }

  async trace() {
    const body = { prompt: this.prompt.value, top_k: 10 };
    const answer = await this.latest.run((busy) => postJson(this.urls.trace, body, busy),
      "Tracing on the server (the first trace loads the checkpoint)…");
    if (!answer) return;
    this.answer = answer;
    this.ran("trace", answer);
    this.link();
    this.render(answer);
    this.preview.draw();
    const p = answer.prediction;
    const first = answer.lens.find((l) => l.rank === 1);
    this.answered(answer, { fallback: `Next token “${shown(p)}” (p ${sig(p.probability, 3)}) after ${answer.lens.length - 1} blocks; the likeliest from ${first.name} on.${weightsWarning(answer)}` });
  }

  render(answer) {
    const size = answer.checkpoint;
    const tokens = answer.tokens;
    const block = el("select", { "aria-label": "Block" }, ...answer.attention.map((_, b) => el("option", { value: b }, `block ${b + 1}`)));
    const head = el("select", { "aria-label": "Head" }, ...Array.from({ length: size.heads }, (_, h) => el("option", { value: h }, `head ${h + 1}`)));
    const map = el("div", { class: "causal-attention" });
    const draw = () => {
      const b = Number(block.value);
      const h = Number(head.value);
      const label = `Block ${b + 1}, head ${h + 1}: attention from each token (rows) to the tokens up to it (columns)`;
      map.replaceChildren(chartBox(label, attentionMap(answer.attention[b][h], tokens, label, this.settings.attention_titles)));
    };
    block.addEventListener("change", draw);
    head.addEventListener("change", draw);
    block.value = String(answer.attention.length - 1);
    draw();
    const names = answer.residual.map((r) => r.name);
    const norms = answer.residual.map((r) => r.norms);
    const normLimit = Math.max(...norms.flat());
    const lensRows = answer.lens.map((l) => [l.name, l.rank, sig(l.probability, 3), l.top.map((t) => `${shown(t)} (${sig(t.probability, 3)})`).join(", ")]);
    const p = answer.prediction;
    this.results.replaceChildren(
      el("h3", {}, "Tokens"),
      el("p", { class: "fine" }, `${tokens.length} byte-level BPE tokens (a leading space is part of a token, shown as ·); each id selects a row of the ${size.vocab} × ${size.width} token embedding, and a learned position vector is added.`),
      tokenChips(tokens),
      el("h3", {}, "Attention, with the tokens on both axes"),
      el("p", { class: "fine" }, `Each of the ${size.heads} heads of each of the ${size.layers} blocks: a row is a token reading the tokens up to it (never after: the mask is causal), its weights summing to 1.`),
      el("div", { class: "lab-options" }, el("label", {}, "Block ", block), el("label", {}, "Head ", head)),
      map,
      el("h3", {}, "The residual stream"),
      el("p", { class: "fine" }, `The stream each block reads and adds to, its length (norm) at every token after every block. The last token's stream after the last block is what the next token is read from (${size.width} numbers; in the downloads of the API answer).`),
      chartBox("Norm of the residual stream by block and token", heatmapSvg(norms, {
        label: "Norm of the residual stream by block (rows) and token (columns)",
        axes: { rows: names.map((name) => ({ name })), columns: axis(tokens) }, colour: (v) => diverging(v, normLimit),
        legend: [["0", diverging(0, normLimit)], [sig(normLimit, 3), diverging(normLimit, normLimit)]] })),
      el("h3", {}, "Logit lens: when the next token takes shape"),
      el("p", { class: "fine" }, `The final LayerNorm and the unembedding (the token embedding, tied) applied to the last token's stream after each block: the probability and rank the eventual answer “${shown(p)}” has at each depth.`),
      chartBox(`Probability of “${shown(p)}” after each block`, curveSvg(answer.lens.map((l) => l.probability), { label: `Probability of “${shown(p)}” after each block (0: the embeddings)`, x: "block", y: "probability" })),
      scrollBox("Logit lens by block", table(["after", "rank of the answer", "its probability", "top 3"], lensRows, "Logit lens at the last token", { reflow: true })),
      el("h3", {}, "The next token"),
      el("p", {}, "Next: ", el("strong", { class: "causal-prediction" }, shown(p)), ` with probability ${sig(p.probability, 4)}.`),
      el("figure", { class: "chart" }, el("figcaption", {}, el("span", { class: "chart-title" }, `The ${answer.top.length} likeliest next tokens of ${size.vocab}`)),
        bars(answer.top.map((t) => t.probability), answer.top.map((t) => shown(t)))));
  }

  async generate() {
    const field = (id) => this.$(id).value;
    const body = { prompt: this.prompt.value, steps: Number(field("gen-steps")), temperature: Number(field("gen-temperature")),
      seed: Number(field("gen-seed")), strategy: this.section.querySelector("[name=strategy]:checked").value };
    if (field("gen-top-k")) body.top_k = Number(field("gen-top-k"));
    const answer = await this.latest.run((busy) => postJson(this.urls.generations, body, busy), "Generating on the server…");
    if (!answer) return;
    const rows = answer.steps.map((s, i) => [i + 1, shown(s), sig(s.probability, 3), s.top.slice(0, 5).map((t) => `${shown(t)} (${sig(t.probability, 3)})`).join(", ")]);
    this.$("causal-generation").replaceChildren(
      el("p", { class: "causal-generated" }, answer.text),
      scrollBox("Each generated token", table(["step", "token", "its probability", "the five likeliest"], rows,
        `${answer.strategy === "greedy" ? "Greedy: the likeliest token at each step" : `Sampled with seed ${answer.seed}`} (temperature ${answer.temperature})`, { reflow: true })));
    this.answered(answer, { fallback: `Generated ${answer.steps.length} tokens.` });
  }

  async patch() {
    const corrupted = this.$("causal-corrupted").value;
    const answer = await this.latest.run((busy) => postJson(this.urls.patching, { prompt: this.prompt.value, corrupted }, busy),
      "Patching every head on the server…");
    if (!answer) return;
    this.link({ corrupted });
    const grid = answer.effect;
    const limit = Math.max(1e-9, ...grid.flat().map(Math.abs));
    const heads = grid.flatMap((row, b) => row.map((e, h) => ({ e, b, h }))).sort((x, y) => y.e - x.e).slice(0, STRONGEST);
    const label = `Effect of patching each head from the corrupted prompt on logit(“${shown(answer.answer)}”) − logit(“${shown(answer.foil)}”): block rows, head columns`;
    this.$("causal-patching").replaceChildren(
      el("p", {}, `The prompt predicts “${shown(answer.answer)}”, the corrupted prompt “${shown(answer.foil)}”. Measured as the logit difference between the two at the last token: ${sig(answer.clean, 3)} on the prompt, ${sig(answer.corrupted, 3)} on the corrupted one. Effect 1: patching that head alone moves the whole way to the corrupted prompt's; 0: no effect; negative: the other way.`),
      chartBox(label, heatmapSvg(grid, { label, axes: { rows: grid.map((_, b) => ({ name: `block ${b + 1}` })), columns: grid[0].map((_, h) => ({ name: `head ${h + 1}` })) },
        colour: (v) => diverging(v, limit), legend: [[`−${sig(limit, 2)}`, diverging(-limit, limit)], ["0", diverging(0, limit)], [`+${sig(limit, 2)}`, diverging(limit, limit)]],
        describe: (v, b, h) => `effect ${sig(v, 3)} (logit difference ${sig(answer.patched[b][h], 4)})` })),
      el("p", { class: "causal-strongest" }, `Strongest: ${heads.map(({ e, b, h }) => `block ${b + 1} head ${h + 1} (${sig(e, 3)})`).join(", ")}.`),
      streamGrid(answer));
    this.answered(answer, { fallback: `Patched ${grid.length * grid[0].length} heads.` });
  }
}

/** Causal tracing: the residual stream entering each block taken from the corrupted prompt at one token at a time
 * (block rows, token columns): where, and from which depth, the information that decides the answer sits. */
function streamGrid(answer) {
  const grid = answer.stream_effect;
  const limit = Math.max(1e-9, ...grid.flat().map(Math.abs));
  const label = "Effect of patching the residual stream entering each block (rows) at one token (columns) from the corrupted prompt";
  return el("div", { class: "causal-stream" },
    el("p", {}, "The same measure, patching instead the whole residual stream entering a block at one token: a token where the two prompts differ carries the answer up to the block where the grid fades, and a later token takes it from there."),
    chartBox(label, heatmapSvg(grid, { label, axes: { rows: grid.map((_, b) => ({ name: `block ${b + 1}` })), columns: axis(answer.tokens) },
      colour: (v) => diverging(v, limit), legend: [[`−${sig(limit, 2)}`, diverging(-limit, limit)], ["0", diverging(0, limit)], [`+${sig(limit, 2)}`, diverging(limit, limit)]],
      describe: (v, b, t) => `effect ${sig(v, 3)} (logit difference ${sig(answer.stream_patched[b][t], 4)})` })));
}

/** What if? on a trace: the next token and the logit lens before and after the changes. */
export function beforeAfter(before, after) {
  const word = (p) => `${shown(p)} (${sig(p.probability, 3)})`;
  const same = before.prediction.id === after.prediction.id;
  return [
    el("p", { class: "whatif-prediction" }, "Next token: ", el("strong", {}, word(before.prediction)), " → ", el("strong", {}, word(after.prediction)), same ? " (unchanged)" : " (changed)"),
    table(["after", "top before", "top after", "rank before → after"], before.lens.map((l, i) => [l.name, word(l.top[0]), word(after.lens[i].top[0]), `${l.rank} → ${after.lens[i].rank}`]),
      "Logit lens at the last token, before and after the changes (rank: where each run's own answer stands)", { reflow: true }),
  ];
}
