// The feature-geometry lab: one model of a toy that writes more features than it has dimensions, each feature's
// direction (its column of W) drawn as an arrow on equal axes with the unit circle. A slider chooses the model (one
// per sparsity); each feature can be dropped (its column zeroed) or turned. Every change runs the model on the server
// (the recipe edits W and measures): the arrows it writes, the example read back, and the held-out loss against the
// loss as trained.

import { scatterSvg, sig } from "../charts.js";
import { chartBox, el, keepingFocus } from "../dom.js";
import { LabPanel, item, markPreset, metric, postJson, startFromLink, table } from "./common.js";

const SETTLE_MS = 120; // a slider's steps closer together than this share one request

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.results = section.querySelector("#lab-results");
    this.model = section.querySelector("#geometry-model");
    this.drops = [...section.querySelectorAll("[data-drop]")];
    this.turns = [...section.querySelectorAll("[data-turn]")];
    for (const input of [this.model, ...this.drops, ...this.turns]) input.addEventListener("input", () => this.changed());
    section.querySelector("#geometry-reset").addEventListener("click", () => this.reset());
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => {
        this.model.value = this.settings.presets.find((p) => p.id === button.dataset.preset).request.model;
        this.reset();
      });
    }
    // The recorded case the page shows (or the link's), as every lab starts.
    const { preset } = startFromLink(this.settings.presets, () => null);
    if (preset) this.model.value = preset.request.model;
    this.reset();
  }

  /** Every edit undone: the chosen model as trained. */
  reset() {
    for (const box of this.drops) box.checked = false;
    for (const slider of this.turns) slider.value = 0;
    this.changed();
  }

  /** The model and the edits; on a recorded model unedited, the case the server compares the run with. */
  request() {
    return {
      model: Number(this.model.value),
      drop: this.drops.filter((box) => box.checked).map((box) => Number(box.dataset.drop)),
      turn: this.turns.map((slider) => Number(slider.value)),
      ...(this.preset ? { compare_with: this.preset } : {}),
    };
  }

  changed() {
    // A model unedited is its recorded case; an edit is a model no case recorded.
    const model = Number(this.model.value);
    const unedited = this.drops.every((box) => !box.checked) && this.turns.every((slider) => Number(slider.value) === 0);
    this.preset = unedited ? this.settings.presets.find((p) => p.request.model === model)?.id ?? null : null;
    markPreset(this.section, this.preset);
    const request = this.request();
    this.section.querySelector("#geometry-model-said").textContent = `${this.settings.names[request.model]}`;
    for (const slider of this.turns) this.section.querySelector(`[data-turn-said="${slider.dataset.turn}"]`).textContent = `${slider.value}°`;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), SETTLE_MS);
  }

  async run() {
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, this.request(), busy), "Running the model with your edits on the server…");
    if (!answer) return;
    this.ran("runs", answer);
    const recorded = this.preset ? this.settings.presets.find((p) => p.id === this.preset)?.label : null;
    this.answered(answer, { recorded });
    this.render(answer);
  }

  render(answer) {
    const c = answer.case;
    const columns = item(c, "columns");
    const names = columns.rows;
    const lengths = item(c, "lengths").values;
    const example = item(c, "example").values;
    const back = item(c, "read_back").values;
    const rows = names.map((name, i) => [name, sig(lengths[i], 3), sig(example[i], 3), sig(back[i], 3)]);
    const parts = [
      el("dl", { class: "metrics" }, ...c.metrics.map((m) => metric(m.label, m.value, { "data-key": m.key }))),
      el("div", { class: "geometry-view" },
        el("figure", { class: "chart geometry-arrows" }, el("figcaption", {}, columns.label),
          chartBox(`${columns.label}: arrows`, scatterSvg(columns.values, { label: columns.label, x: columns.columns[0], y: columns.columns[1], names, arrows: true }))),
        table(["feature", "its arrow's length", "example", "read back"], rows, "Each feature: how strongly it is written, and the example read back through the two dimensions", { reflow: true })),
    ];
    keepingFocus(this.results, () => this.results.replaceChildren(...parts));
  }
}
