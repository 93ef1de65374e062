// The diffusion lab: a new image sampled on the server from a seed, or a drawing noised to a chosen step and
// denoised back; either answer is a chain of every step (the image, the noise the model predicts in it, the clean
// image that prediction implies, the step's loss term), which the reader steps through, plays, or jumps along.

import { curveSvg, greySvg, sig, smallMap } from "../charts.js";
import { chartBox, el } from "../dom.js";
import { item, LabPanel, LinkedStep, linkInput, markPreset, postJson, startFromLink } from "./common.js";
import { DrawingPad } from "./drawing.js";

const BIG = 120; // px: the three images of the step shown
const STRIP = 48; // px: each image of the strip
const STRIP_EVERY = 10; // the strip shows every tenth step, and the last
const PLAY_MS = 90; // a step every 90 ms while playing
const NOISE_LIMIT = 3; // the predicted noise is drawn on one diverging scale, ±3 standard deviations
const SEED_MAX = 2147483647;
const SEED_SETTLE_MS = 250; // digits of a seed typed closer together than this share one sample

/** A row of 64 values (a chain's step) as the 8x8 image it is. */
function square(row, cols) {
  return Array.from({ length: row.length / cols }, (_, r) => row.slice(r * cols, (r + 1) * cols));
}

/** A whole number from an input, within 0..max, or null. */
function seedOf(input) {
  const value = Number(input.value);
  return Number.isInteger(value) && value >= 0 && value <= SEED_MAX ? value : null;
}

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.sizes = this.settings.sizes;
    this.thing = this.settings.words.thing;
    this.$ = (id) => section.querySelector(`#${id}`);
    this.linkedStep = new LinkedStep("chain_step"); // a chain opens on its last step, x₀
    this.pad = new DrawingPad(section, this.sizes, () => this.edited());
    this.$("clear-drawing").addEventListener("click", () => this.pad.replace(this.pad.blank(), true));
    this.$("sample-run").addEventListener("click", () => this.sample());
    // A new seed draws its digit as it is typed (or stepped with the arrows): the noise a seed starts from is felt,
    // not asked for. A seed being typed waits for a pause, and one out of range is said, not sent.
    this.$("sample-seed").addEventListener("input", () => {
      clearTimeout(this.seedTimer);
      this.seedTimer = setTimeout(() => this.sample(), SEED_SETTLE_MS);
    });
    this.$("sample-next").addEventListener("click", () => {
      this.$("sample-seed").value = String(((seedOf(this.$("sample-seed")) ?? 0) + 1) % (SEED_MAX + 1));
      this.sample();
    });
    this.$("denoise-run").addEventListener("click", () => this.denoise());
    this.$("denoise-start").addEventListener("input", () => { this.$("denoise-start-value").value = this.$("denoise-start").value; });
    this.$("chain-step").addEventListener("input", () => this.showStep(Number(this.$("chain-step").value)));
    this.$("chain-back").addEventListener("click", () => this.move(-1));
    this.$("chain-forward").addEventListener("click", () => this.move(1));
    this.$("chain-play").addEventListener("click", () => this.play());
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.load(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    const drawn = this.settings.presets.find((p) => "image" in p.request);
    if (drawn) this.pad.replace(drawn.request.image, false); // something to bury in noise before the first stroke
    const start = startFromLink(this.settings.presets, (params) => this.linked(params));
    if (start.input) this.fromLink(start.input);
    else if (start.preset) this.load(start.preset, start.problem);
  }

  /** The input a link carries: a seed, or a drawing with its step and noise seed; null without one. */
  linked(params) {
    if (params.has("seed")) {
      const seed = Number(params.get("seed"));
      if (!Number.isInteger(seed) || seed < 0 || seed > SEED_MAX) throw new Error(`seed must be a whole number from 0 to ${SEED_MAX}`);
      return { seed };
    }
    if (!params.has("drawing") || !this.pad.linkable) return null;
    const start = Number(params.get("start") ?? 40);
    const noise = Number(params.get("noise_seed") ?? 0);
    if (!Number.isInteger(start) || start < 1 || start > this.sizes.steps) throw new Error(`start must be a step from 1 to ${this.sizes.steps}`);
    if (!Number.isInteger(noise) || noise < 0 || noise > SEED_MAX) throw new Error(`noise_seed must be a whole number from 0 to ${SEED_MAX}`);
    return { image: this.pad.parse(params.get("drawing")), start, noise_seed: noise };
  }

  fromLink(input) {
    if ("seed" in input) {
      this.$("sample-seed").value = String(input.seed);
      this.sample();
      return;
    }
    this.setDenoise(input);
    this.pad.replace(input.image, false);
    this.denoise();
  }

  setDenoise(request) {
    this.$("denoise-start").value = String(request.start);
    this.$("denoise-start-value").value = String(request.start);
    this.$("denoise-seed").value = String(request.noise_seed);
  }

  load(preset, problem = null) {
    this.preset = preset;
    markPreset(this.section, preset.id);
    if ("seed" in preset.request) {
      this.$("sample-seed").value = String(preset.request.seed);
      this.sample(problem);
    } else {
      this.setDenoise(preset.request);
      this.pad.replace(preset.request.image, false);
      this.denoise(problem);
    }
  }

  edited() {
    this.preset = null;
    markPreset(this.section, null);
  }

  // ---- the two runs

  async sample(problem = null) {
    const seed = seedOf(this.$("sample-seed"));
    if (seed === null) {
      this.setStatus(`The seed must be a whole number from 0 to ${SEED_MAX}.`, true);
      return;
    }
    const preset = this.preset && this.preset.request.seed === seed ? this.preset : null;
    if (!preset) markPreset(this.section, null);
    linkInput({ seed, drawing: null, start: null, noise_seed: null }, preset?.id);
    const body = { seed, ...(preset ? { compare_with: preset.id } : {}) };
    const answer = await this.latest.run((busy) => postJson(this.urls.sample, body, busy), `Sampling a ${this.thing} from seed ${seed} on the server…`);
    if (!answer) return;
    this.ran("sample", answer);
    this.show(answer, preset, `${problem ? `${problem} ` : ""}Seed ${seed} drew the ${this.thing} at the end of the chain.`,
      `From pure noise, x${sub(this.sizes.steps)}, to x₀: every step of the reverse process for seed ${seed}. The loss term at each step is measured against the ${this.thing} the chain became.`);
  }

  async denoise(problem = null) {
    const start = Number(this.$("denoise-start").value);
    const noise = seedOf(this.$("denoise-seed"));
    if (noise === null) {
      this.setStatus(`The noise seed must be a whole number from 0 to ${SEED_MAX}.`, true);
      return;
    }
    const request = { image: this.pad.image, start, noise_seed: noise };
    const preset = this.preset && !("seed" in this.preset.request) && this.preset.request.start === start
      && this.preset.request.noise_seed === noise ? this.preset : null;
    if (!preset) markPreset(this.section, null);
    linkInput({ seed: null, drawing: this.pad.linkable ? this.pad.text() : null, start, noise_seed: noise }, preset?.id);
    const body = { ...request, ...(preset ? { compare_with: preset.id } : {}) };
    const answer = await this.latest.run((busy) => postJson(this.urls.denoise, body, busy), `Noising the drawing to step ${start} and denoising it on the server…`);
    if (!answer) return;
    this.ran("denoise", answer);
    const c = answer.case;
    const left = item(c, "signal").value;
    this.show(answer, preset, `${problem ? `${problem} ` : ""}Noised to step ${start} (√ᾱ = ${sig(left, 2)} of the drawing left) and denoised back: the end is ${sig(item(c, "distance").value, 3)} grey levels from the drawing on average.`,
      `Your drawing buried in noise to step ${start}, then every step back to x₀. The loss term at each step is measured against your drawing.`);
  }

  // ---- the chain

  show(answer, preset, said, about) {
    const c = answer.case;
    this.answered(answer, { fallback: said, recorded: preset?.label ?? null });
    const chain = item(c, "chain");
    this.chain = {
      names: chain.rows,
      images: chain.values.map((row) => square(row, this.sizes.cols)),
      noise: item(c, "noise").values.map((row) => square(row, this.sizes.cols)),
      predicted: item(c, "predicted").values.map((row) => square(row, this.sizes.cols)),
      terms: item(c, "step_loss").values, // by timestep, from t = 1
    };
    this.stop();
    const last = this.chain.images.length - 1;
    const slider = this.$("chain-step");
    slider.max = String(last);
    this.$("chain-view").hidden = false;
    this.$("chain-said").textContent = about;
    this.drawStrip();
    const label = item(c, "step_loss").label;
    this.$("chain-curve").replaceChildren(chartBox(label, curveSvg(this.chain.terms, { label, x: "Timestep t", y: "‖ε − ε̂‖²", log: true, first: 1 })));
    this.showStep(this.linkedStep.opening(last, last));
  }

  /** The timestep of the chain's k-th image (the first is the noisiest). */
  timestep(k) {
    return this.chain.images.length - 1 - k;
  }

  showStep(k) {
    const { images, noise, predicted, terms } = this.chain;
    const last = images.length - 1;
    this.step = Math.max(0, Math.min(last, k));
    this.$("chain-step").value = String(this.step);
    this.linkedStep.write(this.step, last);
    const t = this.timestep(this.step);
    const figure = (svg, caption) => el("figure", { class: "code-image" }, svg, el("figcaption", {}, caption));
    const parts = [figure(greySvg(images[this.step], { label: `The image at step t = ${t}`, max: this.sizes.levels, size: BIG }), t ? `x${sub(t)}, the image at step ${t}` : `x₀, the ${this.thing} at the end`)];
    if (t > 0) {
      parts.push(
        figure(smallMap(noise[this.step], { label: `The noise the model predicts in x${sub(t)}`, limit: NOISE_LIMIT, size: BIG }), `ε̂: the noise it sees (±${NOISE_LIMIT})`),
        figure(greySvg(predicted[this.step], { label: `The clean image the prediction at step ${t} implies`, max: this.sizes.levels, size: BIG }), "x̂₀: where it points"));
    }
    this.$("chain-images").replaceChildren(...parts);
    this.$("chain-where").textContent = t > 0
      ? `Step ${this.step} of ${last}: t = ${t}. Loss term ‖ε − ε̂‖² at this step: ${sig(terms[t - 1], 3)}.`
      : `Step ${last} of ${last}: x₀, the end of the chain.`;
    for (const button of this.$("chain-strip").querySelectorAll("button")) button.setAttribute("aria-pressed", String(Number(button.dataset.step) === this.step));
  }

  drawStrip() {
    const last = this.chain.images.length - 1;
    const shown = [...new Set([...Array.from({ length: Math.floor(last / STRIP_EVERY) + 1 }, (_, i) => i * STRIP_EVERY), last])];
    this.$("chain-strip").replaceChildren(el("div", { class: "chain-strip", role: "group", "aria-label": "Jump to a step" },
      ...shown.map((k) => {
        const t = this.timestep(k);
        const button = el("button", { type: "button", class: "chain-frame", "data-step": String(k), "aria-label": `Go to step ${k}, t = ${t}` },
          greySvg(this.chain.images[k], { label: `x at t = ${t}`, max: this.sizes.levels, size: STRIP }), el("span", {}, `t = ${t}`));
        button.addEventListener("click", () => { this.stop(); this.showStep(k); });
        return button;
      })));
  }

  move(by) {
    this.stop();
    this.showStep(this.step + by);
  }

  play() {
    if (this.timer) {
      this.stop();
      return;
    }
    if (this.step >= this.chain.images.length - 1) this.showStep(0);
    this.$("chain-play").setAttribute("aria-pressed", "true");
    this.$("chain-play").textContent = "Pause";
    this.$("chain-where").setAttribute("aria-live", "off"); // a step every 90 ms is not read out; the end is
    this.timer = setInterval(() => {
      if (this.step >= this.chain.images.length - 1) this.stop();
      else this.showStep(this.step + 1);
    }, PLAY_MS);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
    this.$("chain-play").setAttribute("aria-pressed", "false");
    this.$("chain-play").textContent = "Play";
    this.$("chain-where").setAttribute("aria-live", "polite");
  }
}

/** A timestep as a subscript: 40 → ₄₀. */
function sub(t) {
  return String(t).replace(/\d/g, (d) => "₀₁₂₃₄₅₆₇₈₉"[d]);
}
