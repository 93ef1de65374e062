// The training-spectrum lab: a slider over a training's rounds. Each round asks the server, which computes the
// embedding's power at each frequency from the embedding the training kept after that round; the page draws both
// accuracies over every round with the chosen one marked, and that round's power at each frequency.

import { curveSvg } from "../charts.js";
import { chartBox, el, keepingFocus } from "../dom.js";
import { bars, LabPanel, markPreset, postJson } from "./common.js";

const SETTLE_MS = 120; // a slider's steps closer together than this share one request

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.results = section.querySelector("#lab-results");
    this.slider = section.querySelector("#spectrum-round");
    this.slider.addEventListener("input", () => this.changed());
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => {
        this.slider.value = this.settings.presets.find((p) => p.id === button.dataset.preset).request.round;
        this.changed();
      });
    }
    this.changed();
  }

  changed() {
    const round = Number(this.slider.value);
    this.section.querySelector("#spectrum-round-said").textContent = `${round} of ${this.settings.sizes.rounds}`;
    markPreset(this.section, this.settings.presets.find((p) => p.request.round === round)?.id ?? null);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(round), SETTLE_MS);
  }

  async run(round) {
    const answer = await this.latest.run((busy) => postJson(this.urls.rounds, { round }, busy), `Reading round ${round} on the server…`);
    if (!answer) return;
    this.answered(answer);
    this.render(answer);
  }

  render(result) {
    const at = result.round - 1;
    const thing = this.settings.words?.thing ?? "example";
    const curves = curveSvg(result.test_accuracy, {
      label: "Accuracy after each round", x: "Round", y: `Held-out ${thing}s right`, first: 1, mark: at,
      series: [{ values: result.train_accuracy, label: `Training ${thing}s right`, dashed: true }],
    });
    const parts = [
      el("figure", { class: "chart spectrum-curves" }, el("figcaption", {}, `Held-out ${thing}s right (solid) and training ${thing}s right (dashed), round ${result.round} marked`),
        chartBox("Accuracy after each round", curves)),
      el("figure", { class: "chart spectrum-bars" },
        el("figcaption", {}, `The embedding's power at each frequency after round ${result.round} (its strongest: ${result.key_frequencies.join(", ")})`),
        bars(result.spectrum, result.frequencies, 1)),
    ];
    keepingFocus(this.results, () => this.results.replaceChildren(...parts));
  }
}
