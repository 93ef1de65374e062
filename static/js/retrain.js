// "Retrain on the server": start the recipe's training again, draw its loss as it learns, then say whether the
// weights came out the same, tensor by tensor.

import { curveSvg, sig } from "./charts.js";
import { chartBox, duration, el, readJson, requireData, scrollBox, showStatus, sleep } from "./dom.js";
import { environmentFacts } from "./verify.js";

const POLL_MS = 500;

/** Ask the job at `location` to stop with its starter's token, saying so in `status`; it ends as cancelled. */
export async function cancelJob(location, token, status) {
  showStatus(status, "Cancelling…");
  const headers = { Accept: "application/json", Authorization: `Bearer ${token}` };
  const response = await fetch(location, { method: "DELETE", headers });
  if (!response.ok && response.status !== 409) showStatus(status, `Could not cancel: ${(await readJson(response))?.error?.message}`, true);
}

/** A metric's name as the recipe stores it, in words: "test_accuracy" -> "test accuracy". */
const words = (name) => name.replaceAll("_", " ");

export class RetrainPanel {
  constructor(section, history = null) {
    this.section = section;
    this.history = history;
    this.url = section.dataset.url;
    this.button = section.querySelector("#retrain");
    this.cancelButton = section.querySelector("#retrain-cancel");
    this.status = section.querySelector("#retrain-status");
    this.curves = section.querySelector("#retrain-curves");
    this.output = section.querySelector("#retrain-report");
    this.button.addEventListener("click", () => this.run());
    this.cancelButton.addEventListener("click", () => this.cancel());
  }

  async run() {
    // aria-disabled, not disabled: a disabled button loses the keyboard focus to <body>.
    if (this.button.getAttribute("aria-disabled") === "true") return;
    this.button.setAttribute("aria-disabled", "true");
    this.curves.replaceChildren();
    this.output.replaceChildren();
    this.started = performance.now();
    showStatus(this.status, "Starting the training on the server…");
    try {
      const response = await fetch(this.url, { method: "POST", headers: { Accept: "application/json" } });
      const body = requireData(response, await readJson(response));
      // Given to the reader who started the job alone: one who joined another's retraining cannot cancel it.
      this.token = body.cancel_token ?? null;
      const report = response.status === 202 ? await this.follow(response.headers.get("Location"), body) : body;
      this.finish(report);
      this.history?.load();
    } catch (error) {
      showStatus(this.status, `The retraining could not finish: ${error.message}`, true);
    } finally {
      this.location = this.token = null;
      this.cancelButton.hidden = true;
      this.button.removeAttribute("aria-disabled");
    }
  }

  /** Poll the job, drawing its curves as they grow, until it is done: its report. */
  follow(location, job) {
    this.location = location;
    this.cancelButton.hidden = !this.token;
    return followJob(location, job, (state) => this.progress(state));
  }

  progress(job) {
    const took = duration(performance.now() - this.started);
    const p = job.progress;
    const joined = this.token ? "" : " (another reader started this retraining: you are watching theirs, which only they can cancel)";
    if (!p) {
      const what = job.state === "queued" ? "Waiting for its turn: this server trains one model at a time" : "Starting train.py";
      showStatus(this.status, `${what}… ${took}${joined}`);
      return;
    }
    const which = p.runs > 1 ? `model ${p.run}, ` : "";
    const metrics = Object.entries(p.metrics).map(([name, value]) => ` · ${words(name)} ${sig(value, 3)}`).join("");
    const loss = p.loss == null ? "" : ` · loss ${sig(p.loss, 3)}`;
    showStatus(this.status, `Training… ${which}${p.unit} ${p.epoch} of ${p.epochs}${loss}${metrics} · ${took}${joined}`);
    this.draw(p.curves);
  }

  draw(curves) {
    drawCurves(this.curves, curves);
  }

  async cancel() {
    if (!this.location || !this.token) return;
    this.cancelButton.hidden = true;
    await cancelJob(this.location, this.token, this.status);
  }

  finish(report) {
    const took = duration(performance.now() - this.started);
    const kept = report.cached ? ` (the report of an identical earlier retraining, made ${report.started_at}, kept by the server)` : "";
    showStatus(this.status, `Done in ${took}${kept}.`, report.status === "error");
    if (report.curves.length) this.draw(report.curves);
    this.output.replaceChildren(el("p", { class: `report-headline is-${report.status}`, id: "retrain-headline" }, headline(report)));
    if (!report.tensors) return;
    this.output.append(tensorTable(report), figureTable(report),
      el("dl", { class: "report-env" }, ...[...environmentFacts(report.environment), ["training", duration(report.compute_seconds * 1000)]]
        .map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, String(v))))));
  }
}

/** Poll a training's job at `location` every POLL_MS, telling `seen(job)` each state as it comes, until it is done:
 * its report. */
export async function followJob(location, job, seen) {
  for (;;) {
    seen(job);
    if (job.state === "done") return job.report;
    await sleep(POLL_MS);
    const response = await fetch(location, { headers: { Accept: "application/json" } });
    job = requireData(response, await readJson(response));
  }
}

/** A training's curves as they grow, one chart each: the loss of each model it trains, then each held-out metric. */
export function drawCurves(container, curves) {
  const charts = [];
  for (const curve of curves) {
    const of = curves.length > 1 ? ` of model ${curve.run}` : "";
    const unit = curve.unit;
    const label = `Training loss${of}, ${unit} by ${unit} (${curve.loss.length} of ${curve.epochs})`;
    charts.push(chartBox(label, curveSvg(curve.loss, { label, x: unit, y: "mean training loss", first: 1, extent: curve.epochs })));
    for (const [name, values] of Object.entries(curve.metrics)) {
      const titled = `${words(name)}${of} after each ${unit} (${values.length} of ${curve.epochs})`;
      charts.push(chartBox(titled, curveSvg(values, { label: titled, x: unit, y: words(name), first: 1, extent: curve.epochs })));
    }
  }
  container.replaceChildren(...charts);
}

function headline(report) {
  if (report.status === "cancelled") return `Cancelled: ${report.message}.`;
  if (report.status === "error") return `Error — ${report.message}`;
  // The server says which guarantee held, in words (recipekit.training.compared): the rule is not repeated here.
  return `${report.verdict} ${report.summary}.`;
}

/** The tensors that differ most (or could not be compared) first. */
function worstFirst(a, b) {
  const rank = (t) => (t.largest_difference == null ? Infinity : t.largest_difference);
  return rank(b) - rank(a);
}

function tensorTable(report) {
  const caption = `Every retrained tensor against the stored one, the largest difference first (at most ${sig(report.bound)})`;
  const rows = [...report.tensors].sort(worstFirst).map((t) => el("tr", { class: t.largest_difference != null && t.largest_difference <= report.bound ? "status-row-passed" : "status-row-failed" },
    el("th", { scope: "row" }, el("code", {}, `${t.file}: ${t.name ?? "—"}`)),
    el("td", { class: "num" }, t.shape ? t.shape.join("×") || "scalar" : "—"),
    el("td", { class: "num" }, t.largest_difference == null ? "—" : sig(t.largest_difference, 3)),
    el("td", {}, t.problem ?? (t.identical ? "the same bits" : "within rounding"))));
  return scrollBox(caption, el("table", { class: "report-values", id: "retrain-tensors" }, el("caption", {}, caption),
    el("thead", {}, el("tr", {}, ...["Tensor", "Shape", "max |Δ|", "Bits"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, ...rows)));
}

function figureTable(report) {
  const caption = "What the training measured, stored beside the weights and measured again";
  const shown = (f) => (f.stored != null ? [sig(f.stored, 6), sig(f.retrained, 6)] : f.values ? [`${f.values} values`, f.same ? "the same" : `max |Δ| ${sig(f.largest_difference, 3)}`] : ["text", f.same ? "the same" : "differs"]);
  const rows = report.figures.map((f) => el("tr", {},
    el("th", { scope: "row" }, words(f.name)), ...shown(f).map((v) => el("td", { class: "num" }, v)),
    el("td", {}, f.same ? "✓" : "✗")));
  const facts = report.facts.map((f) => el("tr", {}, el("th", { scope: "row" }, f.name), el("td", {}, "—"), el("td", {}, "—"), el("td", {}, f.held ? "✓ held" : "✗ did not hold")));
  // What the model does, each figure within its bound where the weights are not the same bits.
  const behaviour = (report.behaviour || []).map((b) => el("tr", {},
    el("th", { scope: "row" }, words(b.name.split(":").pop()), el("div", { class: "fine" }, `within ±${sig(b.allowed)}: ${b.why}`)),
    el("td", { class: "num" }, b.stored == null ? "—" : sig(b.stored, 6)), el("td", { class: "num" }, b.retrained == null ? "—" : sig(b.retrained, 6)),
    el("td", {}, b.held ? "✓ within its bound" : "✗ outside its bound")));
  return scrollBox(caption, el("table", { class: "report-values", id: "retrain-figures" }, el("caption", {}, caption),
    el("thead", {}, el("tr", {}, ...["Figure", "Stored", "Retrained", "Same"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, ...rows, ...behaviour, ...facts)));
}
