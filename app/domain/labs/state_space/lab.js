// The state-space lab: type a sequence; every edit runs the model on the server. The answers at the positions the
// recipe asks for (a baseline's beside them where the recipe has one), then the scan token by token: at the chosen
// token, in every layer, the step size Δ the model chose for it, B and C, and the row of the mixing matrix, which
// earlier tokens this output is made of; and every token at once as heatmaps.

import { sig, valueHeatmap } from "../charts.js";
import { chartBox, el, keepingFocus } from "../dom.js";
import { bars, EditedSequenceLab, folded, item, postJson, table } from "./common.js";

export class Lab extends EditedSequenceLab {
  constructor(section) {
    super(section, "tokens");
    this.emptySaid = "Add a token to start.";
    this.layers = Array.from({ length: this.settings.sizes.layers }, (_, k) => k + 1);
    this.start();
  }

  async run(problem = null) {
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, this.request(), busy), "Running the scan on the server…");
    if (!answer) return;
    this.ran("runs", answer);
    this.answered(answer, { problem, recorded: this.preset ? this.presetLabel : null });
    this.answer = answer;
    this.render();
  }

  /** The case's matrix for a layer (`delta_2`), with its rows and columns as the server names them. */
  layerMatrix(key, layer) {
    return item(this.answer.case, `${key}_${layer}`);
  }

  heatmap(m) {
    return el("figure", { class: "chart lab-heatmap", "data-key": m.key }, el("figcaption", {}, el("span", { class: "chart-title" }, m.label)),
      chartBox(`${m.label}: heatmap`, valueHeatmap(m.values, m.label, this.answer.axes[m.key])));
  }

  render() {
    const c = this.answer.case;
    const at = item(c, "answered_at").values;
    const predicted = item(c, "predicted");
    const baseline = item(c, "baseline_predicted");
    const expected = item(c, "expected");
    const probs = item(c, "probabilities").values;
    const rows = at.map((position, k) => [`${position + 1}`, this.name(predicted.values[k]), sig(probs[k][predicted.values[k]], 3),
      ...(baseline ? [this.name(baseline.values[k])] : []),
      ...(expected ? [expected.values[k] === predicted.values[k] ? `${this.name(expected.values[k])} ✓` : `${this.name(expected.values[k])} ✗ wrong`] : [])]);
    const parts = [
      ...this.stepHead(this.tokens.length),
      el("h3", {}, "The answers"),
      table(["at token", predicted.label, "its probability", ...(baseline ? [baseline.label] : []), ...(expected ? [expected.label] : [])], rows,
        "The answer at each position the recipe asks for one", { reflow: true }),
      folded("every-token", `Every token at once: the mixing, step sizes, B and C of ${this.layers.length} layers as heatmaps`,
        el("p", { class: "fine" }, "Rows are tokens, in order; in a mixing matrix the columns are the earlier tokens each output draws on. Hover a cell for its value."),
        ...this.layers.map((layer) => el("div", { class: "lab-heads", "data-layer": layer },
          ...["mixing", "delta", "B", "C"].map((key) => this.heatmap(this.layerMatrix(key, layer))))))];
    keepingFocus(this.results, () => this.results.replaceChildren(...parts));
    this.showStep();
  }

  /** The chosen token in every layer: the step size it got, its row of the mixing matrix, B and C. */
  showStep() {
    const c = this.answer.case;
    const k = (this.step ?? this.tokens.length) - 1;
    const names = this.tokens.map((t, j) => `${j + 1} ${this.name(t)}`);
    const at = item(c, "answered_at").values;
    const asked = at.indexOf(k);
    this.section.querySelector("#seq-step-said").textContent = `${k + 1} of ${this.tokens.length}: “${this.name(this.tokens[k])}”`;
    let said = `Token ${k + 1} (“${this.name(this.tokens[k])}”).`;
    if (asked >= 0) {
      const answered = item(c, "predicted").values[asked];
      const expected = item(c, "expected")?.values[asked];
      said += ` An answer is asked for here: the model gives “${this.name(answered)}”`
        + (expected === undefined ? "." : expected === answered ? ", which is right." : `; the right answer is “${this.name(expected)}”.`);
    }
    const view = this.section.querySelector("#seq-step-view");
    view.replaceChildren(el("p", { id: "seq-step-read" }, said), el("div", { class: "seq-states" }, ...this.layers.map((layer) => {
      const mean = item(c, `mean_delta_${layer}`).values;
      const mixing = this.layerMatrix("mixing", layer).values[k].slice(0, k + 1);
      const B = this.layerMatrix("B", layer).values[k];
      const C = this.layerMatrix("C", layer).values[k];
      const states = B.map((_, n) => `state ${n}`);
      return el("figure", { class: "seq-state", "data-layer": layer },
        el("figcaption", {}, `Layer ${layer}: step size Δ ${sig(mean[k], 3)} here (mean over the channels; ${sig(Math.min(...mean), 3)} to ${sig(Math.max(...mean), 3)} over the sequence)`),
        el("p", { class: "fine" }, "What this output is made of, by earlier token:"), bars(mixing, names.slice(0, k + 1)),
        el("p", { class: "fine" }, "B: how this token is written into the state"), bars(B, states),
        el("p", { class: "fine" }, "C: how this output reads the state"), bars(C, states));
    })));
  }
}
