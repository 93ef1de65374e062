// The sequence-to-sequence lab: type a source; every edit re-runs the encoder-decoder on the server, which
// writes its answer one token at a time (greedy). For a chosen step the page shows what the decoder read,
// what it wrote and with which probability, and each layer's and head's cross-attention over the source;
// the heatmaps show every attention at once.

import { sig, valueHeatmap } from "../charts.js";
import { chartBox, el, keepingFocus } from "../dom.js";
import { bars, checkedTokens, folded, item, postJson, SequenceLab, table } from "./common.js";

// Attention matrices by their key's first word, in the order a reader meets them on the page.
const ATTENTION = [
  ["cross", "Cross-attention: where each step looked in the source"],
  ["decoder", "Decoder self-attention: what each step read of the answer so far"],
  ["encoder", "Encoder self-attention: the source reading itself"],
];

export class Lab extends SequenceLab {
  constructor(section) {
    super(section, "source");
    this.emptySaid = "Type a source to start.";
    const field = this.settings.endpoints.runs.fields.source;
    this.highest = field.items.maximum;
    this.longest = field.maxItems;
    this.typeable = this.names.slice(0, this.highest + 1); // the tokens a source may hold
    this.start();
  }

  checked(tokens) {
    return checkedTokens(tokens, this.longest, this.highest);
  }

  /** Tokens as a reader types them: names of one character run together, longer names apart. */
  written(ids) {
    const names = ids.map((t) => this.name(t));
    return names.join(names.every((n) => n.length === 1) ? "" : " ");
  }

  showTokens() {
    this.text.value = this.written(this.tokens);
  }

  async run(problem = null) {
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, this.request(), busy), "Writing the answer on the server…");
    if (!answer) return;
    this.ran("runs", answer);
    this.answered(answer, { problem, recorded: this.preset ? this.presetLabel : null });
    this.answer = answer;
    this.render();
  }

  attention(kind) {
    return this.answer.case.matrices.filter((m) => m.key.startsWith(`${kind}_attention`));
  }

  render() {
    const { answer } = this;
    const c = answer.case;
    const read = item(c, "decoder_input").values;
    const output = item(c, "output").values;
    const expected = item(c, "expected")?.values;
    const probs = item(c, "probabilities").values;
    const rows = output.map((t, k) => [`${k + 1}`, this.name(read[k]), this.name(t), sig(probs[k][t], 3),
      ...(expected ? [expected[k] === undefined ? "(past the end)" : expected[k] === t ? `${this.name(expected[k])} ✓` : `${this.name(expected[k])} ✗ wrong`] : [])]);
    const parts = [
      ...this.stepHead(output.length),
      el("h3", {}, "Every step at once"),
      table(["step", "read", "wrote", "its probability", ...(expected ? ["true token"] : [])], rows, "What each step read and wrote", { reflow: true }),
      ...ATTENTION.map(([kind, title]) => folded(`attention-${kind}`, `${title}: ${this.attention(kind).length} heatmaps`,
        el("div", { class: "lab-heads" }, ...this.attention(kind).map((m) => el("figure", { class: "chart lab-heatmap", "data-key": m.key },
          el("figcaption", {}, el("span", { class: "chart-title" }, m.label)), chartBox(`${m.label}: heatmap`, valueHeatmap(m.values, m.label, answer.axes[m.key])))))))];
    keepingFocus(this.results, () => this.results.replaceChildren(...parts));
    this.showStep();
  }

  /** The chosen step: what it read and wrote, its likeliest tokens, and every cross-attention row over the source. */
  showStep() {
    const c = this.answer.case;
    const output = item(c, "output").values;
    const k = (this.step ?? output.length) - 1;
    const read = item(c, "decoder_input").values[k];
    const wrote = output[k];
    const expected = item(c, "expected")?.values[k];
    const probs = item(c, "probabilities").values[k];
    const likeliest = probs.map((p, t) => [p, t]).sort((a, b) => b[0] - a[0]).slice(0, 3);
    this.section.querySelector("#seq-step-said").textContent = `${k + 1} of ${output.length}: read “${this.name(read)}”`;
    const said = `Step ${k + 1} read “${this.name(read)}” and wrote “${this.name(wrote)}” with probability ${sig(probs[wrote], 3)}`
      + (expected === undefined ? "." : expected === wrote ? ", which is right." : `; the right token is “${this.name(expected)}”.`);
    const sourceNames = this.tokens.map((t, j) => `${j + 1}: ${this.name(t)}`);
    const view = this.section.querySelector("#seq-step-view");
    view.replaceChildren(el("p", { id: "seq-step-read" }, said),
      el("figure", { class: "seq-state", "data-key": "probabilities" }, el("figcaption", {}, "The three likeliest tokens at this step"),
        bars(likeliest.map(([p]) => p), likeliest.map(([, t]) => this.name(t)), 1)),
      el("div", { class: "seq-states" }, ...this.attention("cross").map((m) => el("figure", { class: "seq-state", "data-key": m.key },
        el("figcaption", {}, m.label), bars(m.values[k], sourceNames, 1)))));
  }
}
