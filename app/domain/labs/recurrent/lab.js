// The recurrent lab: type a sequence of tokens; every edit re-runs the network on the server, which reads it
// one token at a time. For a chosen step the page shows what the network reads there and every state it
// keeps (one row of each matrix with a row per step), and the heatmaps show all steps at once.

import { sig, valueHeatmap } from "../charts.js";
import { chartBox, el, keepingFocus } from "../dom.js";
import { bars, EditedSequenceLab, folded, item, postJson, table } from "./common.js";

export class Lab extends EditedSequenceLab {
  constructor(section) {
    super(section, "tokens");
    this.emptySaid = "Add a token to start.";
    this.start();
  }

  async run(problem = null) {
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, this.request(), busy), "Reading the sequence on the server…");
    if (!answer) return;
    this.ran("runs", answer);
    this.answered(answer, { problem, recorded: this.preset ? this.presetLabel : null });
    this.answer = answer;
    this.render();
  }

  /** The matrices with a row per step: the states the network keeps (the class probabilities aside). */
  states() {
    const steps = this.tokens.length;
    return this.answer.case.matrices.filter((m) => m.key !== "probabilities" && m.values.length === steps);
  }

  render() {
    const { answer } = this;
    const c = answer.case;
    const predicted = item(c, "predicted");
    const expected = item(c, "expected");
    const probs = item(c, "probabilities").values;
    const rows = this.tokens.map((t, k) => [`${k + 1}`, this.name(t), String(predicted.values[k]), sig(probs[k][predicted.values[k]], 3),
      ...(expected ? [expected.values[k] === predicted.values[k] ? `${expected.values[k]} ✓` : `${expected.values[k]} ✗ wrong`] : [])]);
    const parts = [
      ...this.stepHead(this.tokens.length),
      el("h3", {}, "Every step at once"),
      table(["step", "token", `${predicted.label.toLowerCase()}`, "its probability", ...(expected ? [expected.label.toLowerCase()] : [])], rows,
        "What is read after each token", { reflow: true }),
      folded("every-state", `Every state at every step: ${this.states().length} heatmaps`,
        el("p", { class: "fine" }, "Rows are steps, named by their tokens; columns are units. Hover a cell for its value."),
        el("div", { class: "lab-heads" }, ...this.states().map((m) => el("figure", { class: "chart lab-heatmap", "data-key": m.key },
          el("figcaption", {}, el("span", { class: "chart-title" }, m.label)), chartBox(`${m.label}: heatmap`, valueHeatmap(m.values, m.label, answer.axes[m.key]))))))];
    keepingFocus(this.results, () => this.results.replaceChildren(...parts));
    this.showStep();
  }

  /** The chosen step: its token, what is read there, and every state's row as bars on that state's own scale. */
  showStep() {
    const c = this.answer.case;
    const k = (this.step ?? this.tokens.length) - 1;
    const read = item(c, "predicted").values[k];
    const expected = item(c, "expected")?.values[k];
    const probs = item(c, "probabilities").values[k];
    this.section.querySelector("#seq-step-said").textContent = `${k + 1} of ${this.tokens.length}: “${this.name(this.tokens[k])}”`;
    const said = `After token ${k + 1} (“${this.name(this.tokens[k])}”) the network reads ${read} with probability ${sig(probs[read], 3)}`
      + (expected === undefined ? "." : expected === read ? ", which is right." : `; the right answer is ${expected}.`);
    const view = this.section.querySelector("#seq-step-view");
    view.replaceChildren(el("p", { id: "seq-step-read" }, said), el("div", { class: "seq-states" }, ...this.states().map((m) => {
      const max = Math.max(...m.values.flat().map(Math.abs));
      return el("figure", { class: "seq-state", "data-key": m.key }, el("figcaption", {}, m.label),
        bars(m.values[k], m.values[k].map((_, j) => `unit ${j}`), max));
    })));
  }
}
