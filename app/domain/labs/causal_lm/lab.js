// The causal-LM lab: edit a prompt, see attention and the next-token distribution at every position,
// generate one token at a time, and trace one position through every block.

import { sig, valueHeatmap } from "../charts.js";
import { chartBox, editQuery, el, keepingFocus, reveal, setDisabled } from "../dom.js";
import { bars, getJson, item, LabPanel, linkedInts, linkInput, markPreset, metric, postJson, SamplingPreview, startFromLink, table, vector, vectors } from "./common.js";

const TOP = 5;
// The generation's settings and the traced position in the link (?gen_steps=…&trace=2), so that a link or a
// reload shows them again; a new prompt drops them (they were the old prompt's).
const GENERATION = { gen_steps: "#gen-steps", gen_seed: "#gen-seed", gen_temperature: "#gen-temperature", gen_top_k: "#gen-top-k" };
const LINKED = [...Object.keys(GENERATION), "gen_strategy", "trace"];
const unlinked = Object.fromEntries(LINKED.map((name) => [name, null]));

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    // The steps the reader asked for: a longer prompt lowers what fits, a shorter one gives it back.
    this.wantedSteps = Number(section.querySelector("#gen-steps").value);
    this.results = section.querySelector("#lab-results");
    this.generation = section.querySelector("#generation");
    this.preview = new SamplingPreview(section, (fields) => postJson(this.urls.generations, { input_ids: this.ids, steps: 1, seed: 0, ...fields }),
      (answer) => answer.steps[0].drawn_top.map((t) => [t.word, t.probability]));
    this.traceBox = section.querySelector("#trace");
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.load(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    section.querySelector("#add-token").addEventListener("click", () => {
      if (this.ids.length < this.settings.sizes.context) this.edit([...this.ids, this.ids[this.ids.length - 1]]);
    });
    section.querySelector("#remove-token").addEventListener("click", () => {
      if (this.ids.length > 2) this.edit(this.ids.slice(0, -1));
    });
    section.querySelector("#generate").addEventListener("click", () => this.generate());
    const steps = section.querySelector("#gen-steps");
    steps.addEventListener("input", () => { if (steps.value !== "") this.wantedSteps = Number(steps.value); });
    const params = new URLSearchParams(window.location.search);
    this.restore = LINKED.some((name) => params.has(name)) ? Object.fromEntries(LINKED.map((name) => [name, params.get(name)])) : null;
    const start = startFromLink(this.settings.presets, (params) => {
      if (!params.has("prompt")) return null;
      const ids = linkedInts(params, "prompt");
      if (!ids.length) throw new Error("the prompt holds no token");
      return ids;
    });
    if (start.input) this.edit(start.input);
    else this.load(start.preset, start.problem);
  }

  name(id) {
    return this.settings.names[id] ?? String(id);
  }

  /** A recorded case's prompt; `problem` says why a link's prompt was not used instead. */
  load(preset, problem = null) {
    this.preset = preset?.id ?? null;
    markPreset(this.section, this.preset);
    this.presetLabel = preset?.label;
    this.ids = [...preset.request.input_ids];
    linkInput({ prompt: null, ...unlinked }, this.preset);
    this.renderStrip();
    this.run(problem);
  }

  edit(ids) {
    this.preset = null;
    markPreset(this.section, null);
    this.ids = ids;
    linkInput({ prompt: ids.join(","), ...unlinked });
    this.renderStrip();
    this.run();
  }

  renderStrip() {
    const strip = this.section.querySelector("#token-strip");
    const legend = strip.querySelector("legend");
    keepingFocus(strip, () => strip.replaceChildren(legend, ...this.ids.map((id, i) => {
      const select = el("select", { "aria-label": `Token at position ${i}`, "data-position": i });
      for (let v = 0; v < this.settings.sizes.vocab; v++) select.append(el("option", { value: v }, this.name(v)));
      select.value = String(id);
      select.addEventListener("change", () => this.edit(this.ids.map((t, j) => (j === i ? Number(select.value) : t))));
      return el("div", { class: "token-slot" }, el("span", { class: "slot-position" }, `position ${i}`), select);
    })));
    const add = this.section.querySelector("#add-token");
    const remove = this.section.querySelector("#remove-token");
    setDisabled(add, this.ids.length >= this.settings.sizes.context, remove);
    setDisabled(remove, this.ids.length <= 2, add);
    const room = this.room();
    const steps = this.section.querySelector("#gen-steps");
    steps.max = String(room);
    steps.value = String(Math.max(1, Math.min(this.wantedSteps ?? Number(steps.value), room)));
  }

  /** How many tokens generation may add: as many as the context can read, and one more (the last is never read). */
  room() {
    return this.settings.sizes.context - this.ids.length + 1;
  }

  async run(problem = null) {
    const body = { input_ids: this.ids, ...(this.preset ? { compare_with: this.preset } : {}) };
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, body, busy));
    if (!answer) return;
    this.ran("runs", answer);
    this.answered(answer, { problem, recorded: this.preset ? this.presetLabel : null });
    this.render(answer);
    this.preview.draw();
    this.restoreLinked();
  }

  /** After the first run, the generation and the trace the link carries, made again. */
  restoreLinked() {
    const linked = this.restore;
    this.restore = null;
    if (!linked) return;
    if (linked.gen_steps !== null) {
      for (const [name, selector] of Object.entries(GENERATION)) {
        if (linked[name] !== null) this.section.querySelector(selector).value = linked[name];
      }
      const strategy = this.section.querySelector(`input[name="strategy"][value="${CSS.escape(linked.gen_strategy ?? "")}"]`);
      if (strategy) strategy.checked = true;
      this.generate();
    }
    if (linked.trace !== null && Number.isInteger(Number(linked.trace))) this.trace(Number(linked.trace));
  }

  render(answer) {
    const c = answer.case;
    const probs = item(c, "next_token_probs").values;
    const loss = item(c, "loss");
    const positionLoss = item(c, "position_loss")?.values || [];
    const heads = c.matrices.filter((m) => m.key.startsWith("attention_b")).map((m) =>
      el("figure", { class: "chart lab-heatmap", "data-key": m.key }, el("figcaption", {}, el("span", { class: "chart-title" }, m.label)), chartBox(`${m.label}: heatmap`, valueHeatmap(m.values, m.label, answer.axes[m.key]))));
    const rows = probs.map((row, i) => {
      const order = row.map((p, v) => [p, v]).sort((a, b) => b[0] - a[0]).slice(0, 3);
      const actual = this.ids[i + 1];
      return [`${i}: ${this.name(this.ids[i])}`, order.map(([p, v]) => `${this.name(v)} ${sig(p, 3)}`).join(" · "),
        actual === undefined ? "—" : `${this.name(actual)} (p ${sig(row[actual], 3)})`, positionLoss[i] === undefined ? "—" : sig(positionLoss[i], 4)];
    });
    const last = probs[probs.length - 1];
    const order = last.map((p, v) => [p, v]).sort((a, b) => b[0] - a[0]).slice(0, TOP);
    const parts = [];
    // The outcome is the status line (the server's sentence); here every number the run measured, in the recipe's
    // order, each labelled with what it counts.
    parts.push(el("dl", { class: "metrics" }, ...c.metrics.map((m) => metric(m.label, m.value, m.key === loss.key ? { id: "live-loss" } : { "data-key": m.key }))),
      el("h3", {}, "Attention of every block and head"),
      el("p", { class: "fine" }, "Rows are queries, columns keys. Above the diagonal every weight is zero: a position never reads a later one."),
      el("div", { class: "lab-heads" }, ...heads),
      el("h3", {}, "Next-token distribution at every position"),
      table(["position", "top 3 next tokens", "actual next token", "loss"], rows, "What each position predicts for the token after it", { reflow: true }),
      el("figure", { class: "chart" }, el("figcaption", {}, el("span", { class: "chart-title" }, `After “${this.name(this.ids[this.ids.length - 1])}” (the last position): top ${TOP} of ${last.length}`)),
        bars(order.map(([p]) => p), order.map(([, v]) => this.name(v)), 1)),
      el("div", { class: "lab-options" }, ...this.ids.map((_, i) => {
        const button = el("button", { type: "button", "data-trace": i }, `Trace position ${i}`);
        button.addEventListener("click", () => this.trace(i));
        return button;
      })),
    );
    this.results.replaceChildren(...parts);
  }

  async generate() {
    const value = (id) => this.section.querySelector(id).value;
    const room = this.room();
    if (Number(value("#gen-steps")) > room) { // the limit follows the prompt: say it here, not as a 400
      this.generation.replaceChildren(el("p", { class: "notice" },
        `Steps: at most ${room} with this ${this.ids.length}-token prompt (the context holds ${this.settings.sizes.context}).`));
      return;
    }
    const body = {
      input_ids: this.ids, steps: Number(value("#gen-steps")), seed: Number(value("#gen-seed")),
      strategy: this.section.querySelector('input[name="strategy"]:checked').value, temperature: Number(value("#gen-temperature")),
    };
    if (value("#gen-top-k") !== "") body.top_k = Number(value("#gen-top-k"));
    this.generation.replaceChildren(el("p", { class: "fine" }, "Generating…"));
    let answer;
    try {
      answer = await postJson(this.urls.generations, body);
    } catch (error) {
      this.generation.replaceChildren(el("p", { class: "notice" }, `Generation failed: ${error.message}`));
      return;
    }
    const steps = answer.steps.map((step, k) => el("figure", { class: "chart generation-step", "data-step": k },
      el("figcaption", {}, el("span", { class: "chart-title" }, `Step ${k + 1}: after “${step.context.map((t) => this.name(t)).join(" ")}” → picked “${step.word}” (model p ${sig(step.pick_probability, 3)})`)),
      bars(step.drawn_top.map((t) => t.probability), step.drawn_top.map((t) => `${t.token === step.pick ? "▶ " : ""}${t.word}`), 1)));
    editQuery((params) => {
      for (const name of Object.keys(GENERATION)) params.set(name, body[name.slice(4)] ?? "");
      params.set("gen_strategy", body.strategy);
      if (body.top_k === undefined) params.delete("gen_top_k");
    });
    const use = el("button", { type: "button", id: "use-generation" }, "Use this text as the prompt");
    use.addEventListener("click", () => this.edit(answer.output_ids.slice(0, this.settings.sizes.context)));
    this.generation.replaceChildren(
      el("p", { class: "generation-text", id: "generation-text" }, answer.text),
      el("p", { class: "fine" }, answer.strategy === "greedy" ? "Greedy: each step takes the most likely token (bars: the distribution after temperature and top-k)."
      : `Sampled with seed ${answer.seed}, temperature ${answer.temperature}${answer.top_k ? `, top-${answer.top_k}` : ""}: the bars show the distribution drawn from; ▶ marks the pick.`),
      ...steps, use);
  }

  async trace(position) {
    this.traceBox.replaceChildren(el("p", { class: "fine" }, `Tracing position ${position}…`));
    let data;
    try {
      data = await getJson(this.urls.trace, { input_ids: this.ids, position });
    } catch (error) {
      this.traceBox.replaceChildren(el("p", { class: "notice" }, `The trace failed: ${error.message}`));
      return;
    }
    editQuery((params) => params.set("trace", position));
    const get = (id) => data.stages.find((s) => s.id === id);
    const tokens = get("tokens");
    const emb = get("embeddings");
    const logits = get("logits");
    const prediction = get("prediction");
    const blocks = data.stages.filter((s) => s.id.startsWith("block")).map((b) => el("section", { class: "trace-stage", "data-stage": b.id },
      el("h4", {}, `Block ${b.block}`),
      vectors([["stream in", b.input], ["ln_1", b.ln_1]], `Block ${b.block}: the stream in and ln_1`),
      ...b.heads.map((h) => table(["quantity", ...tokens.words.map((w, i) => `${i}: ${w}`)],
        [["score q·k/√d", ...h.scores.map((v) => (v === null ? "masked" : sig(v, 3)))], ["weight", ...h.weights.map((v) => sig(v, 3))]],
        `Head ${h.head}: position ${data.position}'s query against every key (later keys masked); reads most from ${h.top_context.map((c) => `${c.position}: ${tokens.words[c.position]}`).join(" and ") || "itself"}`)),
      vectors([["attention out", b.attention_output], ["+ stream", b.after_attention], ["ln_2", b.ln_2]], `Block ${b.block}: attention output, stream and ln_2`),
      vectors([["before GELU", b.before_gelu], ["after GELU", b.after_gelu]],
        `Block ${b.block}: the MLP's units before and after GELU, aligned (${b.passed.length} passed, marked mint; ${b.squeezed.length} squeezed, rust)`,
        (i) => (b.passed.includes(i) ? "is-passed" : "is-squeezed")),
      vectors([["MLP out", b.mlp_output], ["+ stream", b.values]], `Block ${b.block}: MLP output and the stream`)));
    this.traceBox.replaceChildren(
      el("h3", { id: "trace-title" }, `Trace of position ${data.position} (“${tokens.words[data.position]}”)`),
      el("section", { class: "trace-stage", "data-stage": "embeddings" }, el("h4", {}, "Token + position embedding"),
        vectors([["token", emb.token_embedding], ["position", emb.position_embedding], ["sum", emb.values]], "Token and position embeddings and their sum")),
      ...blocks,
      el("section", { class: "trace-stage", "data-stage": "final_norm" }, el("h4", {}, "Final LayerNorm"), vector(get("final_norm").values, "ln_f")),
      el("section", { class: "trace-stage", "data-stage": "logits" }, el("h4", {}, "Logits and softmax"),
        table(["rank", "token", "h · E[token]", "logit", "exp(logit − max)", "probability"],
          logits.table.map((r, i) => [String(i + 1), r.word, sig(r.dot), sig(r.logit), sig(r.exp), sig(r.probability)]),
          `Max shift ${sig(logits.max_shift)}; sum of exp = ${sig(logits.sum_exp)}`),
        el("p", { class: "trace-prediction" }, `Predicted next token: ${prediction.word} with probability ${sig(prediction.probability)}${prediction.actual_next === null ? "" : ` (the prompt continues with ${this.name(prediction.actual_next)})`}`)));
    reveal(this.traceBox, "start");
  }
}
