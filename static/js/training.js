// What did training change? The recorded case run on the weights the recipe kept while it trained (at
// initialisation, after some epochs) and on the trained ones: the prediction at each stage, and the graph
// shaded by how far each module's weights, or its output on this case, had moved from initialisation.
// The server computes every figure (POST /api/models/<slug>/training); the stage and the shading live in
// the URL (?training=<stage>&moved=weights|activations).

import { barsSvg, sig } from "./charts.js";
import { chartBox, editQuery, el, inOrder, readJson, requireData, reveal, showStatus } from "./dom.js";

const WHAT = { weights: "weights moved from initialisation", activations: "output on this case moved from initialisation" };

export class Training {
  constructor(section, { caseId }) {
    this.section = section;
    this.settings = JSON.parse(section.dataset.settings);
    this.caseId = caseId; // () => the recorded case the page shows
    this.graph = null;
    this.answer = null;
    this.requests = 0;
    this.status = section.querySelector("#training-status");
    this.results = document.getElementById("training-results"); // below the graph, at the page's width
    const params = new URL(window.location.href).searchParams;
    this.stage = this.settings.stages.some((s) => s.id === params.get("training")) ? params.get("training") : null;
    this.moved = params.get("moved") in WHAT ? params.get("moved") : "weights";
    section.querySelector("#training-run").addEventListener("click", () => this.run());
    for (const input of section.querySelectorAll("input[name=training-moved]")) {
      input.checked = input.value === this.moved;
      input.addEventListener("change", () => {
        this.moved = input.value;
        this.show();
      });
    }
    if (params.get("training") !== null && this.stage === null) {
      showStatus(this.status, `The link's stage “${params.get("training")}” is not one this model kept; pick one below.`, true);
    }
  }

  /** The graph is drawn: run a linked stage now. */
  attach(graph) {
    this.graph = graph;
    if (this.stage !== null) this.run();
  }

  /** The case changed: run it again if the panel shows a run. */
  refresh() {
    if (this.answer) this.run();
  }

  async run() {
    const caseId = this.caseId();
    if (!caseId) return;
    const request = ++this.requests;
    showStatus(this.status, `Running “${caseId}” on ${this.settings.stages.length} stages of training…`);
    try {
      const response = await fetch(this.settings.url, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ case: caseId }),
      });
      const answer = requireData(response, await readJson(response));
      if (request !== this.requests) return; // a later run was asked for meanwhile
      this.answer = answer;
      this.stage ??= answer.stages.at(-1).id;
      this.show();
      showStatus(this.status, `Done: “${caseId}” ran on ${answer.stages.length} stages of the weights.`);
      reveal(this.results);
    } catch (error) {
      if (request === this.requests) showStatus(this.status, `Could not run the stages: ${error.message}`, true);
    }
  }

  link() {
    editQuery((params) => {
      params.set("training", this.stage);
      params.set("moved", this.moved);
    });
  }

  /** The stages' predictions, the chosen stage's movement per module, and the graph shaded by it. */
  show() {
    const answer = this.answer;
    if (!answer) return;
    const stage = answer.stages.find((s) => s.id === this.stage) ?? answer.stages.at(-1);
    this.stage = stage.id;
    this.link();
    const moved = stage[this.moved];
    // One scale for every stage (the largest movement anywhere), so that stepping through them shows growth.
    const scale = Math.max(...answer.stages.flatMap((s) => Object.values(s[this.moved])), 1e-12);
    this.graph?.shade(moved, { scale, what: WHAT[this.moved] });
    this.results.replaceChildren(el("h3", {}, "What training changed"), el("p", { class: "training-outcome" }, this.outcome(answer, stage)),
      this.stagesTable(answer, stage), this.modulesTable(answer, stage), ...this.bars(answer, stage));
  }

  /** The outcome in words: how the case's recorded numbers that training changed read at the chosen stage against
   * the trained weights (from initialisation, where the trained stage is chosen), in the recording's order. */
  outcome(answer, stage) {
    const trained = answer.stages.at(-1);
    const from = stage.id === trained.id ? answer.stages[0] : stage;
    const numbers = this.numbers(answer).filter((key) => from.values[key] !== trained.values[key]).slice(0, 4);
    if (!numbers.length) return `${from.label} and the trained weights read this case alike.`;
    const said = numbers.map((key) => `${answer.items[key].label} ${format(from.values[key])} → ${format(trained.values[key])}`);
    return `What training changed, ${from.label.toLowerCase()} → as trained: ${said.join("; ")}.`;
  }

  /** The case's numbers that differ between stages, in the recording's order (one the same at every stage, as a
   * true label, is said once under the table instead). */
  numbers(answer) {
    return this.keysOf(answer, "metric").filter((key) => varies(answer, key));
  }

  keysOf(answer, kind) {
    return Object.keys(answer.items).filter((key) => answer.items[key].kind === kind).sort(inOrder(this.settings.numbers));
  }

  /** One row per stage: a radio to pick it, and every number of the case that training changed at that stage. */
  stagesTable(answer, chosen) {
    const metrics = this.numbers(answer).map((key) => [key, answer.items[key]]);
    const same = this.keysOf(answer, "metric").filter((key) => !varies(answer, key));
    const rows = answer.stages.map((stage) => {
      const radio = el("input", { type: "radio", name: "training-stage", value: stage.id });
      radio.checked = stage.id === chosen.id;
      radio.addEventListener("change", () => {
        this.stage = stage.id;
        this.show();
        this.results.querySelector(`input[value="${CSS.escape(stage.id)}"]`)?.focus();
      });
      return el("tr", { "data-stage": stage.id, class: stage.id === chosen.id ? "is-current" : "" },
        el("th", { scope: "row" }, el("label", {}, radio, " ", stage.label)),
        ...metrics.map(([key]) => el("td", { "data-item": key }, format(stage.values[key]))));
    });
    const table = el("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "The case at every stage of training" },
      el("table", {}, el("caption", {}, `“${answer.case}” at every stage of training: pick a stage to shade the graph`),
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "stage"),
          ...metrics.map(([, item]) => el("th", { scope: "col" }, item.label)))),
        el("tbody", {}, ...rows)));
    if (!same.length) return table;
    const said = same.map((key) => `${answer.items[key].label} ${format(answer.stages[0].values[key])}`).join("; ");
    return el("div", {}, table, el("p", { class: "fine training-same" }, `The same at every stage: ${said}.`));
  }

  /** Every module of the chosen stage: how far its weights and its output had moved, largest first. */
  modulesTable(answer, stage) {
    const nodes = [...new Set([...Object.keys(stage.weights), ...Object.keys(stage.activations)])]
      .filter((node) => !node.includes("#"))
      .sort((a, b) => (stage[this.moved][b] ?? -1) - (stage[this.moved][a] ?? -1));
    const percent = (v) => (v === undefined ? "no weights" : `${sig(100 * v, 3)}%`);
    return el("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "How far each module moved" },
      el("table", {}, el("caption", {}, `${stage.label}: how far each module moved from initialisation`),
        el("thead", {}, el("tr", {}, ...["module", "weights moved", "output moved"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, ...nodes.map((node) => el("tr", { "data-node": node }, el("th", { scope: "row" }, el("code", {}, node)),
          el("td", {}, percent(stage.weights[node])), el("td", {}, percent(stage.activations[node])))))));
  }

  /** The case's vectors of numbers that training changed (logits, probabilities; never an input, the same at
   * every stage) at the chosen stage beside the trained weights'. */
  bars(answer, stage) {
    const trained = answer.stages.at(-1);
    const shown = stage.id === trained.id ? [trained] : [stage, trained];
    return Object.entries(answer.items).filter(([key, item]) => item.kind === "vector" && typeof stage.values[key]?.[0] === "number" && varies(answer, key))
      .map(([key, item]) => {
        const max = Math.max(...shown.flatMap((s) => s.values[key].map(Math.abs)));
        return el("figure", { class: "chart training-bars", "data-item": key }, el("figcaption", {}, `${item.label}: ${shown.map((s) => s.label).join(" and ")}`),
          el("div", { class: `lab-columns${shown.length > 1 ? " is-compare" : ""}` }, ...shown.map((s) =>
            chartBox(`${item.label}, ${s.label}`, barsSvg(s.values[key], max, `${item.label}, ${s.label}`)))));
      });
  }
}

function format(value) {
  return typeof value === "number" ? sig(value) : value === undefined || value === null ? "—" : String(value);
}

/** Whether an item of the case reads differently at some stage. */
function varies(answer, key) {
  const first = JSON.stringify(answer.stages[0].values[key]);
  return answer.stages.some((stage) => JSON.stringify(stage.values[key]) !== first);
}
