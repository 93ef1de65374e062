// "Re-verify on the server": start a verification, show its progress, then the live report.

import { deviationColour, heatmapSvg, sig } from "./charts.js";
import { duration, el, readJson, requireData, scrollBox, showStatus, sleep } from "./dom.js";

const POLL_MS = 500;
const GIVE_UP_MS = 240000;

export class VerifyPanel {
  constructor({ button, status, output, url, openCase = () => null, history = null }) {
    Object.assign(this, { button, status, output, url, openCase, history });
    button.addEventListener("click", () => this.run());
  }

  setStatus(text, isError = false) {
    showStatus(this.status, text, isError);
  }

  tick() {
    const seconds = ((performance.now() - this.started) / 1000).toFixed(1);
    const phase = this.phase === "running" ? "Running the recipe on the server" : "Queued";
    this.setStatus(`${phase}… ${seconds} s`);
  }

  async run() {
    // aria-disabled, not disabled: a disabled button loses the keyboard focus to <body>.
    if (this.button.getAttribute("aria-disabled") === "true") return;
    this.button.setAttribute("aria-disabled", "true");
    this.output.replaceChildren();
    this.started = performance.now();
    this.phase = "queued";
    this.tick();
    const timer = setInterval(() => this.tick(), 100);
    try {
      const report = await this.fetchReport();
      clearInterval(timer);
      const took = duration(performance.now() - this.started);
      this.setStatus(report.cached ? `Done in ${took} (the report of an identical earlier run, kept by the server).` : `Done in ${took}.`,
        report.status === "error");
      this.render(report);
      this.history?.load();
    } catch (error) {
      clearInterval(timer);
      this.setStatus(`Verification could not finish: ${error.message}`, true);
    } finally {
      this.button.removeAttribute("aria-disabled");
    }
  }

  async fetchReport() {
    let response = await fetch(this.url, { method: "POST", headers: { Accept: "application/json" } });
    let body = requireData(response, await readJson(response));
    if (response.status !== 202) return body;
    const location = response.headers.get("Location");
    while (performance.now() - this.started < GIVE_UP_MS) {
      this.phase = body.state;
      await sleep(POLL_MS);
      response = await fetch(location, { headers: { Accept: "application/json" } });
      body = requireData(response, await readJson(response));
      if (body.state === "done") return body.report;
    }
    throw new Error(`no result after ${GIVE_UP_MS / 1000} s; the server may be busy, try again later`);
  }

  render(report) {
    const out = this.output;
    out.append(el("p", { class: `report-headline is-${report.status}`, id: "report-headline" }, headline(report)));
    if (report.status === "error") return;
    out.append(this.environment(report));
    for (const c of report.cases) out.append(this.caseBlock(c));
    out.append(checksBlock(report.checks));
  }

  environment(report) {
    const env = report.environment;
    const recipe = report.recipe;
    const facts = [
      ...environmentFacts(env), ["seed", env.seed], ["mode", env.mode],
      ["deterministic", String(env.deterministic)], ["compute", `${(report.compute_seconds * 1000).toFixed(1)} ms`],
      ["total", `${report.duration_seconds.toFixed(2)} s`], ["started", report.started_at],
      ["model.py sha256", recipe.model_py_sha256.slice(0, 16) + "…"],
      ["recorded source", `${(recipe.recorded_source_sha256 || "—").slice(0, 16)}… (${recipe.matches_recorded_source ? "the same file" : "another file"})`],
    ];
    // Why the two hashes may differ, in the server's words, where they are shown.
    // Likewise for the checkpoint, where the model reads one: the recording is only reproduced from the same files.
    const checkpoint = report.checkpoint ? [el("p", { class: "fine report-checkpoint-note" }, report.checkpoint.note)] : [];
    return el("div", {}, el("dl", { class: "report-env" }, ...facts.map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, String(v))))),
      el("p", { class: "fine report-source-note" }, recipe.note), ...checkpoint);
  }

  caseBlock(c) {
    const passedCount = c.values.filter((v) => v.status === "passed").length;
    const details = el("details", { class: "report-case", "data-case": c.id });
    if (c.status !== "passed" || c.id === this.openCase()) details.open = true;
    details.append(el("summary", {}, `${c.label} — `,
      el("span", { class: `status-${c.status}` }, c.status === "passed" ? "matched ✓" : "did not match ✗"),
      ` (${passedCount} of ${c.values.length} values)`));
    if (c.message) details.append(el("p", {}, c.message));
    // Each iterated process checked step by step: the server's words, the first step that left its bound named.
    for (const s of c.steps || []) {
      details.append(el("p", { class: `report-steps status-${s.status}` }, s.status === "passed" ? "✓ " : "✗ ", s.note || s.message));
    }
    const rows = c.values.map((v) => {
      const stepwise = v.stepwise && v.stepwise.status !== "passed" ? `; step by step: ${v.stepwise.message || `max |Δ| ${sig(v.stepwise.max_abs_diff)}`}` : "";
      const status = v.status;
      return el("tr", { class: `status-row-${status}` },
        el("th", { scope: "row" }, v.label, v.tolerance.widened ? el("div", { class: "fine report-envelope" }, v.tolerance.note) : null),
        el("td", {}, v.kind),
        el("td", { class: `status-${status}` }, status === "passed" ? "✓ matched" : "✗ off"),
        el("td", { class: "num" }, v.max_abs_diff == null ? "—" : sig(v.max_abs_diff)),
        el("td", { class: "num" }, v.max_rel_diff == null ? "—" : sig(v.max_rel_diff)),
        el("td", { class: "num" }, v.worst_index?.length ? `[${v.worst_index.join(", ")}]` : "—"),
        el("td", {}, deviation(v) || v.message || "", stepwise));
    });
    const caption = `Every recorded value of “${c.label}”, replayed and compared`;
    const table = el("table", { class: "report-values" },
      el("caption", {}, caption),
      el("thead", {}, el("tr", {}, ...["Value", "Kind", "Result", "max |Δ|", "max rel.", "worst at", "deviation / tolerance"]
        .map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...rows));
    details.append(scrollBox(caption, table));
    return details;
  }
}

/** Where a recipe ran, as label and value pairs: the software, the processor and the kernels torch chose on it. */
export function environmentFacts(env) {
  return [
    ["python", env.python], ["torch", env.torch], ["numpy", env.numpy], ["os", env.os], ["processor", env.cpu],
    ["vector extensions", env.vector_extensions.join(" ") || "—"],
    ["torch kernels", env.kernels && env.kernels !== "native" ? `${env.cpu_capability} (the ${env.kernels} family)` : env.cpu_capability],
    ["torch threads", env.torch_threads],
  ];
}

function headline(report) {
  if (report.status === "error") return `Error — ${report.message}`;
  const s = report.summary;
  const tol = `rtol ${sig(report.tolerance.rtol)}, atol ${sig(report.tolerance.atol)}`;
  // The envelopes: float32's tolerance, wider only where the recording measured rounding to move a value further.
  const within = s.values_widened ? `within their envelopes (${tol}, or wider for the ${s.values_widened} values that rounding was measured to move further)` : `within ${tol}`;
  const stepwise = s.steps_checked ? `, and ${s.steps_checked} steps of iterated processes replayed one by one from their recorded states` : "";
  if (report.status === "passed" && !s.values) { // nothing recorded to compare: not a match of numbers
    return `Passed — ${s.checks} of ${s.checks} checks pass on the live run; the recording holds no recorded numbers to compare (${s.cases} cases).`;
  }
  if (report.status === "passed") {
    return `Passed — all ${s.elements} recorded numbers (${s.values} values in ${s.cases} cases) match the live replay ${within}${stepwise}; ${s.checks} of ${s.checks} checks pass.`;
  }
  return `Failed — ${s.values_failed} of ${s.values} values in ${s.cases_failed} of ${s.cases} cases are outside ${s.values_widened ? "their envelopes" : tol}; ${s.checks_failed} of ${s.checks} checks fail.`;
}

/** Per-element |Δ| as a share of its allowance, as the server computed it: lightest is exact, rust is out of tolerance. */
function deviation(value) {
  if (value.kind === "metric") {
    return value.worst_ratio == null ? null : el("span", { class: "fine" }, `${sig(value.worst_ratio, 2)} of its allowance`);
  }
  if (!value.allowance_ratio) return null;
  const ratios = value.kind === "matrix" ? value.allowance_ratio : [value.allowance_ratio];
  const diffs = value.kind === "matrix" ? value.abs_diff : [value.abs_diff];
  const svg = heatmapSvg(ratios, {
    label: `Deviation of ${value.label}: worst element at ${sig(value.worst_ratio, 2)} of its tolerance`,
    colour: deviationColour, cell: value.kind === "matrix" ? 12 : 10, indices: false,
    describe: (r, i, j) => `|Δ| ${sig(diffs[i][j])}, ${sig(r, 2)} of the allowance`,
  });
  const wrap = el("span", { class: `deviation${value.kind === "matrix" ? "" : " deviation-strip"}` });
  wrap.append(svg, el("span", { class: "fine" }, ` worst ${sig(value.worst_ratio, 2)}×`));
  return wrap;
}

function checksBlock(checks) {
  return el("div", {},
    el("h3", {}, "Checks, re-run live"),
    el("ul", { class: "report-checks" }, ...checks.map((c) => el("li", {},
      el("span", { class: `status-${c.status}` }, c.status === "passed" ? "✓ " : "✗ "), c.name,
      c.message ? el("div", { class: "detail" }, c.message) : null,
      ...detail(c.detail || {})))));
}

/** What a check measured, in words ("bidirectional max shift: 0.8342"), and the recipe's own keys and values a
 * click away. */
function detail(measured) {
  const entries = Object.entries(measured);
  if (!entries.length) return [];
  const value = (v) => (typeof v === "number" ? sig(v) : JSON.stringify(v));
  return [el("div", { class: "detail" }, entries.map(([k, v]) => `${k.replaceAll("_", " ")}: ${value(v)}`).join(" · ")),
    el("details", { class: "detail raw-keys", "data-raw": "" }, el("summary", {}, "As the recipe reports it"),
      el("code", {}, JSON.stringify(measured)))];
}

/** The model's verification history: each environment it was checked in, by whom, how far from the recording. */
export class VerifyHistory {
  constructor(section) {
    this.url = section.dataset.url;
    this.box = section.querySelector("#verify-history-table");
  }

  async load() {
    try {
      const response = await fetch(this.url, { headers: { Accept: "application/json" } });
      this.render(requireData(response, await readJson(response)));
    } catch (error) {
      this.box.replaceChildren(el("p", { class: "fine" }, `The history could not load: ${error.message}`));
    }
  }

  render(history) {
    if (!history.environments.length) {
      this.box.replaceChildren(el("p", { class: "fine" }, "Not verified yet on this revision: re-verify above, or run tensorviz verify --share."));
      return;
    }
    const name = (env) => `${env.environment.cpu} (${env.environment.cpu_capability}), torch ${env.environment.torch}, Python ${env.environment.python}`;
    const deviation = (env, kind) => (kind in env.largest_deviation ? sig(env.largest_deviation[kind], 3) : "—");
    const caption = `The environments this model was checked in (${history.entries.length} reports kept, at most ${history.limit})`;
    const rows = history.environments.map((env) => el("tr", {},
      el("th", { scope: "row" }, name(env)),
      el("td", {}, env.reported_by === "server" ? "this server" : "a reader (their claim)"),
      el("td", { class: "num" }, `${env.reports - env.failed} of ${env.reports}`),
      el("td", { class: "num" }, deviation(env, "verification")),
      el("td", { class: "num" }, deviation(env, "retraining")),
      el("td", {}, env.last_at.slice(0, 16).replace("T", " "))));
    const table = el("table", { class: "report-values", id: "history-environments" }, el("caption", {}, caption),
      el("thead", {}, el("tr", {}, ...["Environment", "Checked by", "Passed", "Largest deviation", "Largest weight difference", "Last"]
        .map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...rows));
    const label = Object.fromEntries(history.environments.map((env) => [`${env.reported_by}:${env.id}`, `${name(env)} (this server)`]));
    const drift = history.drift.map((d) => el("li", {}, `${d.kind === "retraining" ? "Retrained weights" : "Replays"} of ${label[`${d.a_reported_by}:${d.a}`]} and ${label[`${d.b_reported_by}:${d.b}`]}: `,
      d.identical ? "the same bytes" : d.at_most == null ? "differ" : `differ by at most ${sig(d.at_most, 3)}`));
    this.box.replaceChildren(scrollBox(caption, table), ...(drift.length ? [el("ul", { class: "history-drift" }, ...drift)] : []));
  }
}

