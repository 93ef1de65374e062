// The live lab: edit tokens, run the recipe on the server, compare bidirectional with causal attention,
// sample BERT's corruption, and trace one token through every stage.

import { diverging, heatmapSvg, sig, svgEl, valueHeatmap } from "../charts.js";
import { COLOUR } from "../palette.js";
import { chartBox, editQuery, el, keepingFocus, reveal } from "../dom.js";
import { bars, chip, getJson, item, LabPanel, linkedInts, linkInput, markPreset, metric, postJson, startFromLink, table, vector, vectors } from "./common.js";

const MOVED = 1e-6; // a probability moving by more than this counts as changed

function find(caseResult, key) {
  return item(caseResult, key)?.values;
}

function attentionHeads(caseResult) {
  return caseResult.matrices.filter((m) => m.key.startsWith("attention_head_"));
}

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.results = section.querySelector("#lab-results");
    this.traceBox = section.querySelector("#trace");
    this.mask = Number(Object.keys(this.settings.special).find((k) => this.settings.special[k] === "MASK"));
    // The sentence and every choice about it live here, and only here: showControls() draws them, run()
    // sends them. Nothing is read back from the form.
    this.state = null;
    this.previous = {}; // mode -> {ids, rows}: the last run, to show which predictions a change moved
    this.traced = null; // {position, attention} of the trace shown, refreshed after every run
    this.traces = 0;
    // The trace a link shows (?trace=<position>&trace_attention=<mode>), made once the first run is in.
    const params = new URLSearchParams(window.location.search);
    const position = Number(params.get("trace") ?? NaN);
    this.linkedTrace = Number.isInteger(position) && position >= 0 ? { position, attention: params.get("trace_attention") } : null;
    this.bind();
    const start = startFromLink(this.settings.presets, (params) => this.fromLink(params));
    if (start.input) {
      this.state = { compare: start.input.compare };
      this.load(start.input.request);
    } else {
      this.load(start.preset.request, start.preset.id).then(() => start.problem && this.setStatus(`${start.problem} ${this.status.textContent}`));
    }
  }

  /** The sentence a link carries (?tokens=&originals=&segments=&scored=&nsp=&attention=&compare=), or null. */
  fromLink(params) {
    if (!params.has("tokens")) return null;
    const ids = linkedInts(params, "tokens");
    if (!ids.length) throw new Error("tokens holds no token");
    const orig = params.has("originals") ? linkedInts(params, "originals") : ids;
    const seg = params.has("segments") ? linkedInts(params, "segments") : null;
    if (orig.length !== ids.length || (seg && seg.length !== ids.length)) throw new Error("tokens, originals and segments differ in length");
    const { enum: modes, default: otherwise } = this.settings.endpoints.runs.fields.attention;
    const attention = params.get("attention") ?? otherwise;
    if (!modes.includes(attention)) throw new Error(`attention must be ${modes.join(" or ")}`);
    const [nsp] = params.has("nsp") ? linkedInts(params, "nsp") : [0];
    return { compare: params.get("compare") === "1", request: {
      input_ids: ids, original_ids: orig, ...(seg ? { segment_ids: seg } : {}), mlm_positions: linkedInts(params, "scored"),
      nsp_label: nsp, attention } };
  }

  /** The state into the URL: the values of an edited sentence, or the name of the recorded case. */
  link() {
    const s = this.state;
    linkInput({ tokens: s.ids.join(","), originals: s.orig.join(","), segments: s.seg.join(","),
      scored: [...s.sel].sort((a, b) => a - b).join(","), nsp: s.nsp, attention: s.attention, compare: s.compare ? "1" : null }, s.preset);
  }

  /** A token by its name (the server's), with its id beside a name that is not the id itself. */
  name(id) {
    const name = this.settings.names[id];
    return name === String(id) ? name : `${name} (${id})`;
  }

  bind() {
    for (const button of this.section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => {
        const preset = this.settings.presets.find((p) => p.id === button.dataset.preset);
        this.load(preset.request, preset.id);
      });
    }
    for (const input of this.section.querySelectorAll('input[name="nsp"]')) {
      input.addEventListener("change", () => this.update({ nsp: Number(input.value) }));
    }
    for (const input of this.section.querySelectorAll('input[name="attention"]')) {
      input.addEventListener("change", () => this.update({ attention: input.value }));
    }
    const compare = this.section.querySelector("#compare-mode");
    compare.addEventListener("change", () => this.update({ compare: compare.checked }));
    this.section.querySelector("#sample-corruption").addEventListener("click", () => this.sample());
  }

  /** A run request (a recorded case's, or a corruption draw's) becomes the state; then it runs. */
  load(request, presetId = null, actions = []) {
    this.state = {
      // Without segments (a link that names none), the server's default applies and its answer says which.
      ids: [...request.input_ids], orig: [...request.original_ids], seg: request.segment_ids ? [...request.segment_ids] : null,
      sel: new Set(request.mlm_positions), nsp: request.nsp_label, attention: request.attention,
      compare: this.state?.compare ?? false, preset: presetId, edited: null, actions,
    };
    this.showControls();
    return this.run();
  }

  /** The user changed something: a new state, no longer a recorded case; `edited` is the position touched. */
  update(patch, edited = null) {
    this.state = { ...this.state, ...patch, preset: null, edited, actions: [] };
    this.showControls();
    this.run();
  }

  /** Draw every control from the state: the token strip, the radios, compare mode, the pressed preset. */
  showControls() {
    const s = this.state;
    this.section.querySelector(`input[name="nsp"][value="${s.nsp}"]`).checked = true;
    this.section.querySelector(`input[name="attention"][value="${s.attention}"]`).checked = true;
    this.section.querySelector("#compare-mode").checked = s.compare;
    // In compare mode both attentions run: the single choice does not apply, so it is disabled.
    this.section.querySelector("#attention-choice").disabled = s.compare;
    markPreset(this.section, s.preset);
    const strip = this.section.querySelector("#token-strip");
    const legend = strip.querySelector("legend");
    const slots = s.ids.map((id, i) => {
      const select = el("select", { "aria-label": `Token at position ${i}`, "data-position": i });
      for (let v = 0; v < this.settings.sizes.vocab; v++) select.append(el("option", { value: v }, this.name(v)));
      select.value = String(id);
      select.addEventListener("change", () => {
        const token = Number(select.value);
        const ids = s.ids.with(i, token);
        this.update({ ids, orig: s.sel.has(i) ? s.orig : s.orig.with(i, token) }, i);
      });
      const selected = s.sel.has(i);
      const text = selected ? "scored ✓" : "mask";
      const mask = el("button", { type: "button", class: "mask-toggle", "aria-pressed": String(selected), "data-mask": i,
        "aria-label": `${text}: position ${i}` }, text);
      mask.title = selected ? "Stop scoring this position (restores its token)" : "Replace with MASK and score the original token";
      mask.addEventListener("click", () => {
        const sel = new Set(s.sel);
        if (selected) {
          sel.delete(i);
          this.update({ sel, ids: s.ids.with(i, s.orig[i]) }, i);
        } else {
          sel.add(i);
          this.update({ sel, orig: s.orig.with(i, s.ids[i]), ids: s.ids.with(i, this.mask) }, i);
        }
      });
      const name = s.seg ? "AB"[s.seg[i]] : "…";
      const segment = el("button", { type: "button", class: "segment-toggle", "data-segment": i, "aria-label": `seg ${name}: segment of position ${i}, press to switch` }, `seg ${name}`);
      segment.disabled = !s.seg;
      segment.addEventListener("click", () => this.update({ seg: s.seg.with(i, 1 - s.seg[i]) }, i));
      const action = s.actions[i];
      return el("div", { class: `token-slot${selected ? " is-selected" : ""}` },
        el("span", { class: "slot-position" }, `position ${i}`), select, mask,
        selected ? el("span", { class: "fine" }, `scored against ${this.name(s.orig[i])}`) : null,
        segment, action ? el("span", { class: `badge action-${action}` }, action) : null);
    });
    keepingFocus(strip, () => strip.replaceChildren(legend, ...slots));
    this.link();
  }

  request(attention) {
    const s = this.state;
    return { input_ids: s.ids, ...(s.seg ? { segment_ids: s.seg } : {}), mlm_positions: [...s.sel].sort((a, b) => a - b),
      original_ids: s.orig, nsp_label: s.nsp, attention };
  }

  async sample() {
    const seedInput = this.section.querySelector("#corruption-seed");
    const seed = Number(seedInput.value);
    if (!Number.isInteger(seed) || seed < 0) {
      this.setStatus("The seed must be a whole number, 0 or more.", true);
      return;
    }
    try {
      const draw = await postJson(this.urls.corruptions, { input_ids: this.state.orig, seed, ...(this.state.seg ? { segment_ids: this.state.seg } : {}) });
      const ran = this.load(draw.run_request, null, draw.positions.map((p) => p.action));
      const chosen = draw.positions.filter((p) => p.selected).map((p) => `position ${p.position}: ${p.action}${p.action === "random" ? ` → ${this.name(p.token)}` : ""}`);
      const explanation = `Seed ${seed} selected ${chosen.join(", ")}.`;
      this.setStatus(explanation);
      if (await ran) this.setStatus(`${explanation} ${this.status.textContent}`); // keep the draw's explanation
    } catch (error) {
      this.setStatus(`Could not sample: ${error.message}`, true);
    }
  }

  async run() {
    const s = this.state;
    if (!s.sel.size) {
      // Nothing is scored: results of earlier tokens would be read as this sentence's, and so would the answer
      // of a run still under way.
      this.latest.supersede();
      this.results.replaceChildren();
      this.traceBox.replaceChildren();
      this.traced = null;
      editQuery((query) => { query.delete("trace"); query.delete("trace_attention"); });
      this.setStatus("Choose at least one position to score: press “mask” under a token.", true);
      return false;
    }
    if (this.traced) this.markTraceStale();
    const modes = s.compare ? this.settings.endpoints.runs.fields.attention.enum : [s.attention];
    const answers = await this.latest.run((busy) => Promise.all(modes.map((mode, k) => postJson(this.urls.runs,
      { ...this.request(mode), ...(s.preset && k === 0 ? { compare_with: s.preset } : {}) }, busy))));
    if (!answers) return false;
    this.ran("runs", answers[0]); // the first attention mode's run: the one What if? changes
    if (!s.seg) {
      this.state = { ...this.state, seg: answers[0].request.segment_ids };
      this.showControls();
    }
    const seconds = answers.reduce((sum, a) => sum + a.compute_seconds, 0); // both attention modes, where compared
    this.answered({ ...answers[0], compute_seconds: seconds }, { recorded: s.preset ? this.settings.presets.find((p) => p.id === s.preset)?.label : null });
    this.render(modes, answers, s);
    const linked = this.linkedTrace;
    this.linkedTrace = null;
    if (this.traced) this.trace(this.traced.position, s.compare ? this.traced.attention : s.attention);
    else if (linked && linked.position < s.ids.length) this.trace(linked.position, modes.includes(linked.attention) ? linked.attention : modes[0]);
    return true;
  }

  influence(mode, rows, s) {
    const before = this.previous[mode];
    this.previous[mode] = { ids: [...s.ids], rows };
    if (s.edited === null || !before) return null;
    return rows.slice(0, s.edited).map((row, i) => Math.max(...row.map((p, v) => Math.abs(p - before.rows[i][v]))));
  }

  /** The results of one run, for the state `s` it ran. */
  render(modes, answers, s) {
    const columns = answers.map((answer, k) => this.column(modes[k], answer, s));
    const parts = [];
    parts.push(el("div", { class: `lab-columns${answers.length > 1 ? " is-compare" : ""}` }, ...columns));
    if (answers.length > 1) parts.push(this.difference(answers));
    this.results.replaceChildren(...parts);
  }

  column(mode, answer, s) {
    const c = answer.case;
    const rows = find(c, "probabilities");
    const moved = this.influence(mode, rows, s);
    const metrics = el("dl", { class: "metrics" }, ...c.metrics.map((m) => metric(m.label, m.value)));
    const heads = attentionHeads(c).map((m) =>
      el("figure", { class: "chart lab-heatmap" }, el("figcaption", {}, el("span", { class: "chart-title" }, m.label)), chartBox(`${m.label}: heatmap`, valueHeatmap(m.values, m.label, answer.axes[m.key]))));
    const predictions = el("ol", { class: "chips prediction-chips", "aria-label": `Top prediction at each position, ${mode}` },
      ...rows.map((row, i) => {
        const top = row.indexOf(Math.max(...row));
        const delta = moved && i < moved.length ? moved[i] : null;
        const classes = delta === null ? [] : [delta > MOVED ? "is-moved" : "is-still"];
        const children = delta === null ? [] : [el("span", { class: "delta" }, delta > MOVED ? ` Δ${sig(delta, 2)}` : " =")];
        return chip(`${i}: ${this.name(top)}`, delta === null ? `position ${i}` : `changed by ${sig(delta, 2)}`,
          { classes, children, attrs: { "data-position": i } });
      }));
    const influence = moved ? el("p", { class: "fine influence", "data-mode": mode },
      `You changed position ${s.edited}: ${moved.filter((d) => d > MOVED).length} of ${moved.length} earlier positions' predictions moved.`) : null;
    const selected = [...s.sel].sort((a, b) => a - b).map((p) => {
      const probs = find(c, `probabilities_at_${p}`);
      const order = probs.map((v, i) => [v, i]).sort((a, b) => b[0] - a[0]).slice(0, 5);
      return el("figure", { class: "chart" }, el("figcaption", {}, el("span", { class: "chart-title" }, `Position ${p}: top 5 of ${probs.length} (scored against ${this.name(s.orig[p])})`),
        el("button", { type: "button", class: "link-button", "data-trace": p }, `Trace position ${p}`)),
      bars(order.map(([v]) => v), order.map(([, i]) => this.name(i)), 1));
    });
    const nsp = find(c, "nsp_probabilities");
    const column = el("div", { class: "lab-column", "data-mode": mode },
      el("h3", {}, `${c.label}${answer.cached ? " · answer kept from the same request" : ""}`), metrics, el("div", { class: "lab-heads" }, ...heads),
      el("h4", {}, "Top prediction at every position"), predictions, influence, ...selected,
      el("figure", { class: "chart" }, el("figcaption", {}, el("span", { class: "chart-title" }, "Sentence pair · IsNext / NotNext")), bars(nsp, ["IsNext", "NotNext"], 1)));
    for (const button of column.querySelectorAll("[data-trace]")) button.addEventListener("click", () => this.trace(Number(button.dataset.trace), mode));
    return column;
  }

  difference(answers) {
    const [bi, causal] = answers.map((a) => attentionHeads(a.case));
    const axes = answers[0].axes;
    const maps = bi.map((m, h) => {
      const diff = m.values.map((row, i) => row.map((v, j) => v - causal[h].values[i][j]));
      const limit = Math.max(...diff.flat().map(Math.abs));
      const label = `Bidirectional − causal · head ${h}`;
      return el("figure", { class: "chart lab-heatmap" }, el("figcaption", {}, el("span", { class: "chart-title" }, label)),
        chartBox(`${label}: heatmap`, heatmapSvg(diff, { label, axes: axes[m.key], colour: (v) => diverging(v, limit), legend: [[`−${sig(limit)}`, diverging(-limit, limit)], ["0", diverging(0, limit)], [`+${sig(limit)}`, diverging(limit, limit)]] })));
    });
    return el("section", { class: "lab-difference", "aria-label": "Difference between bidirectional and causal attention" },
      el("h3", {}, "Difference: bidirectional − causal"),
      el("p", { class: "fine" }, "Above the diagonal, causal attention is zero: that mass is what bidirectional attention spends on later tokens (mint), taken from earlier ones (rust)."),
      el("div", { class: "lab-heads" }, ...maps));
  }

  async trace(position, attention) {
    const { ids, seg } = this.state;
    const params = { input_ids: ids, segment_ids: seg, position, attention };
    const url = `${this.urls.trace}?${new URLSearchParams({ ...params, input_ids: ids.join(","), segment_ids: seg.join(",") })}`;
    const again = this.traced?.position === position; // a refresh after an edit keeps the reader's place
    this.traced = { position, attention };
    editQuery((query) => { query.set("trace", position); query.set("trace_attention", attention); });
    const request = ++this.traces;
    if (!again) this.traceBox.replaceChildren(el("p", { class: "fine" }, `Tracing position ${position}…`));
    try {
      const data = await getJson(this.urls.trace, params);
      if (request !== this.traces) return; // a newer trace was asked for meanwhile
      this.traceBox.classList.remove("is-stale");
      this.traceBox.replaceChildren(...new TraceView(data, url, (id) => this.name(id)).render());
      const soft = data.stages.find((s) => s.id === "softmax");
      this.setStatus(`${this.status.textContent} Trace of position ${position} ${again ? "updated" : "shown below"}: it predicts ${this.name(soft.predicted)}.`);
      if (!again) reveal(this.traceBox, "start");
    } catch (error) {
      if (request === this.traces) this.traceBox.replaceChildren(el("p", { class: "notice" }, `The trace failed: ${error.message}`));
    }
  }

  /** The tokens changed under an open trace: say so until the trace of the new tokens arrives. */
  markTraceStale() {
    this.traceBox.classList.add("is-stale");
    if (!this.traceBox.querySelector(".stale-note")) {
      this.traceBox.prepend(el("p", { class: "notice stale-note" },
        `The tokens changed: this trace of position ${this.traced.position} is of the earlier tokens; updating it…`));
    }
  }
}

// ---- The trace: one token, stage by stage

function arcs(tokens, position, head, name) {
  const step = 64;
  const width = step * tokens.length;
  const svg = svgEl("svg", { viewBox: `0 0 ${width} 110`, width, height: 110, role: "img", "font-size": 12, "font-family": "system-ui, sans-serif",
    "aria-label": `Head ${head.head}: position ${position} attends most to ${head.top_context.map((c) => `position ${c.position} (${sig(c.weight, 3)})`).join(" and ")}` });
  const x = (i) => i * step + step / 2;
  head.top_context.forEach((c, k) => {
    const lift = 30 + 25 * Math.abs(c.position - position) / tokens.length + k * 8;
    svg.append(svgEl("path", { d: `M${x(position)},70 Q${(x(position) + x(c.position)) / 2},${70 - lift * 1.6} ${x(c.position)},70`, fill: "none", stroke: COLOUR.mint, "stroke-width": 1 + 10 * c.weight, "stroke-opacity": 0.75 }));
    svg.append(svgEl("text", { x: (x(position) + x(c.position)) / 2, y: 70 - lift * 0.8 - 4, "text-anchor": "middle", fill: COLOUR.mintDeep }, sig(c.weight, 3)));
  });
  tokens.forEach((t, i) => {
    svg.append(svgEl("rect", { x: i * step + 6, y: 74, width: step - 12, height: 24, rx: 5, fill: i === position ? COLOUR.rustSoft : COLOUR.paper, stroke: i === position ? COLOUR.rust : COLOUR.cell }));
    svg.append(svgEl("text", { x: x(i), y: 90, "text-anchor": "middle", fill: COLOUR.ink }, name(t)));
  });
  return svg;
}

class TraceView {
  constructor(data, url, name) {
    Object.assign(this, { data, url, name });
  }

  stage(id, title, ...body) {
    const s = this.data.stages.find((x) => x.id === id);
    return el("section", { class: "trace-stage", "data-stage": id }, el("h4", {}, title), el("p", { class: "fine" }, s.caption), ...body);
  }

  render() {
    const d = this.data;
    const get = (id) => d.stages.find((s) => s.id === id);
    const p = d.position;
    const tokens = get("tokens");
    const emb = get("embeddings");
    const att = get("attention");
    const out = get("attention_output");
    const up = get("ffn_up");
    const down = get("ffn_down");
    const head = get("mlm_head");
    const logits = get("logits");
    const soft = get("softmax");
    const nsp = get("nsp");
    const gelu = up.before_gelu.map((v, i) => [String(i), sig(v, 3), sig(up.after_gelu[i], 3), up.passed.includes(i) ? "passed" : "squeezed"]);
    return [
      el("h3", { id: "trace-title" }, `Trace of position ${p} (${this.name(tokens.token)}), ${d.attention} attention`),
      el("p", { class: "fine" }, "Every number below was captured from the real forward pass by hooks. ", el("a", { href: this.url }, "This trace as JSON")),
      this.stage("tokens", "1 · Token ids", el("ol", { class: "chips", start: 0 },
        ...tokens.values.map((t, i) => chip(this.name(t), `position ${i}`, { classes: i === p ? ["is-traced"] : [] })))),
      this.stage("embeddings", "2 · Word + position + segment embeddings",
        vectors([["word", emb.word], ["position", emb.position_embedding], ["segment", emb.segment], ["sum", emb.values]], "The three embeddings and their sum, dimension by dimension")),
      this.stage("embedding_norm", "3 · Embedding LayerNorm", vector(get("embedding_norm").values, "normalised")),
      this.stage("attention", "4 · Self-attention: scores, weights, arcs", ...att.heads.map((h) => el("div", { class: "trace-head" },
        el("h5", {}, `Head ${h.head}`), chartBox(`Head ${h.head}: attention arcs`, arcs(tokens.values, p, h, this.name)),
        table(["quantity", ...tokens.values.map((t, i) => `${i}: ${this.name(t)}`)], [["score q·k/√d", ...h.scores.map((v) => (v === null ? "masked" : sig(v, 3)))], ["weight", ...h.weights.map((v) => sig(v, 3))]], `Head ${h.head}: position ${p}'s query against every key`)))),
      this.stage("attention_output", "5 · Attention output, residual + LayerNorm",
        vectors([["attention out", out.projected], ["+ residual", out.residual_sum], ["LayerNorm", out.values]], "Attention output, residual sum and LayerNorm")),
      this.stage("ffn_up", `6 · Feed-forward up-projection and GELU (${up.passed.length} of ${up.before_gelu.length} passed, ${up.suppressed.length} squeezed)`,
        vectors([["before GELU", up.before_gelu], ["after GELU", up.after_gelu]], "Each unit before and after GELU, aligned: passed units are marked mint, squeezed ones rust",
          (i) => (up.passed.includes(i) ? "is-passed" : "is-squeezed")),
        el("details", {}, el("summary", {}, `All ${up.before_gelu.length} units`), table(["unit", "before", "after", "GELU"], gelu, "GELU unit by unit"))),
      this.stage("ffn_down", "7 · Down-projection, residual + LayerNorm",
        vectors([["down", down.down], ["+ residual", down.residual_sum], ["encoder output", down.values]], "Down-projection, residual sum and the encoder's output")),
      this.stage("mlm_head", "8 · MLM transform, GELU, LayerNorm",
        vectors([["transform", head.transform], ["GELU", head.gelu], ["LayerNorm", head.values]], "The MLM head's transform, GELU and LayerNorm")),
      this.stage("logits", "9 · Logits: dot product with every word embedding, plus bias",
        table(["rank", "token", "h · E[token]", "bias", "logit"], logits.table.map((r, i) => [String(i + 1), this.name(r.token), sig(r.dot), sig(r.bias), sig(r.logit)]), "Ranked logits")),
      this.stage("softmax", "10 · Softmax: logit → exp → ÷ sum",
        table(["token", "logit z", "exp(z)", "probability"], soft.table.map((r) => [this.name(r.token), sig(r.logit), sig(r.exp), sig(r.probability)]), `Sum of exp(z) = ${sig(soft.sum_exp)}`),
        el("p", { class: "trace-prediction" }, `Predicted token: ${this.name(soft.predicted)} with probability ${sig(soft.confidence)}`)),
      this.stage("nsp", "11 · The CLS path: tanh pooler → IsNext / NotNext",
        vectors([["CLS output", nsp.cls], ["pooler", nsp.pooler], ["tanh", nsp.tanh]], "The CLS output, the pooler and its tanh"),
        bars(nsp.values, ["IsNext", "NotNext"], 1), el("p", { class: "trace-prediction" }, `Sentence pair: ${nsp.predicted}`)),
    ];
  }
}
