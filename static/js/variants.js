// "Train your own": move a recipe's knobs, train a variant on the server, watch it learn (its curves, and the pictures
// the recipe draws of it, played to the lab in turn), then open it as a model of its own. On a variant's page: its
// curves over the recorded model's.

import { curveSvg } from "./charts.js";
import { chartBox, duration, el, readJson, requireData, showStatus, sleep } from "./dom.js";
import { cancelJob, drawCurves, followJob } from "./retrain.js";

const FRAME_MS = 160; // one picture of the training after another: fast enough to watch it learn, slow enough to see
export const DRAWING = "tensorviz:drawing"; // the event a lab hears a picture of a training by (detail: a Drawing)

export class VariantPanel {
  constructor(section) {
    this.section = section;
    this.settings = JSON.parse(section.dataset.settings);
    this.form = section.querySelector("#knobs");
    this.button = section.querySelector("#train-variant");
    this.status = section.querySelector("#variant-status");
    this.curves = section.querySelector("#variant-curves");
    this.made = section.querySelector("#variant-made");
    this.cancelButton = section.querySelector("#variant-cancel");
    this.cancelButton.addEventListener("click", () => this.cancel());
    for (const range of this.form.querySelectorAll("input[type=range]")) {
      const shown = this.form.querySelector(`output[for="${range.id}"]`);
      range.addEventListener("input", () => { shown.value = range.value; });
    }
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.train();
    });
  }

  /** Every knob's value as the form holds it: numbers as numbers, choices as their names. */
  knobs() {
    return Object.fromEntries(this.settings.knobs.map((knob) => {
      const value = this.form.elements[knob.name].value;
      return [knob.name, knob.choices.length ? value : Number(value)];
    }));
  }

  async train() {
    if (this.button.getAttribute("aria-disabled") === "true") return;
    this.button.setAttribute("aria-disabled", "true");
    this.started = performance.now();
    this.shown = -1;
    this.frames = [];
    this.polled = false;
    this.made.replaceChildren();
    showStatus(this.status, "Starting the training on the server…");
    try {
      const response = await fetch(this.settings.url, {
        method: "POST", headers: { Accept: "application/json", "Content-Type": "application/json" },
        body: JSON.stringify({ knobs: this.knobs() }),
      });
      const body = requireData(response, await readJson(response));
      // Given to the learner who started the job alone: one who joined the same knobs' training cannot cancel it.
      this.token = body.cancel_token ?? null;
      const report = response.status === 202 ? await this.follow(response.headers.get("Location"), body) : { status: "made", variant: body, kept: true };
      this.polled = true;
      await this.played;
      this.finish(report);
    } catch (error) {
      this.polled = true;
      showStatus(this.status, `The variant could not be made: ${error.message}`, true);
    } finally {
      this.location = this.token = null;
      this.cancelButton.hidden = true;
      this.button.removeAttribute("aria-disabled");
    }
  }

  async cancel() {
    if (!this.location || !this.token) return;
    this.cancelButton.hidden = true;
    await cancelJob(this.location, this.token, this.status);
  }

  async follow(location, job) {
    this.location = location;
    this.cancelButton.hidden = !this.token;
    const report = await followJob(location, job, (state) => this.progress(state));
    this.polled = true; // the last pictures are queued: the player stops once it has shown them
    return report;
  }

  progress(job) {
    const took = duration(performance.now() - this.started);
    const p = job.progress;
    if (job.stage === "recording") showStatus(this.status, `Trained. Recording your variant: its graph, cases and checks… ${took}`);
    else if (!p) showStatus(this.status, `${job.state === "queued" ? "Waiting for its turn: this server trains one model at a time" : "Starting train.py"}… ${took}`);
    else showStatus(this.status, `Training… ${p.unit} ${p.epoch} of ${p.epochs}${p.loss == null ? "" : ` · loss ${Number(p.loss).toPrecision(3)}`} · ${took}`);
    if (!p) return;
    drawCurves(this.curves, p.curves);
    for (const drawing of p.drawings || []) {
      if (drawing.epoch > this.shown && !this.frames.some((f) => f.epoch === drawing.epoch)) this.frames.push({ ...drawing, epochs: p.epochs, unit: p.unit });
    }
    this.played ??= this.play();
  }

  /** The training's pictures to the lab, one after another, each once. */
  async play() {
    for (;;) {
      const frame = this.frames.shift();
      if (!frame) {
        if (this.polled) break;
        await sleep(FRAME_MS);
        continue;
      }
      this.shown = frame.epoch;
      document.dispatchEvent(new CustomEvent(DRAWING, { detail: frame }));
      await sleep(FRAME_MS);
    }
    this.played = null;
  }

  finish(report) {
    const took = duration(performance.now() - this.started);
    if (report.status === "cancelled") {
      showStatus(this.status, `Cancelled after ${took}: ${report.message}.`);
      return;
    }
    if (report.status !== "made") {
      showStatus(this.status, `The variant could not be made: ${report.message}`, true);
      return;
    }
    const v = report.variant;
    showStatus(this.status, report.kept ? `Already trained with these knobs: kept by the server (${took}).` : `Done in ${took}: trained in ${duration(v.train_seconds * 1000)}, recorded in ${duration(v.record_seconds * 1000)}.`);
    this.made.replaceChildren(el("a", { class: "button button-primary", href: v.page, id: "variant-link" }, "Open your variant"),
      " its own page, with its cases beside the recorded model's; its link works for as long as the server keeps it.");
  }
}

/** On a variant's page: each curve the recipe draws, the variant's over the recorded model's (dashed). */
export function besideCurves(container) {
  const curves = JSON.parse(container.dataset.curves);
  container.replaceChildren(...curves.map((c) => {
    const label = `${c.label}: your variant, and the recorded model dashed`;
    return chartBox(label, curveSvg(c.variant, { label, x: c.x, y: c.y, log: c.log, first: c.first,
      series: [{ values: c.recorded, label: "the recorded model", dashed: true }] }));
  }));
}
