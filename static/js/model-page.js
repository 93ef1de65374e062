// The model page: recorded cases without reloads, the tour on the interactive graph, re-verification.
// Everything here enhances a page that is complete without JavaScript.

import { LARGE_GRID, barsSvg, curveSvg, downloadSvg, greySvg, scatterSvg, slugify, smallMap, valueHeatmap } from "./charts.js";
import { clampOnPhone, editQuery, el, keepingFocus, readJson, requireData, reveal, setDisabled, watchOverflow } from "./dom.js";
import { Activations, drawingInWords, drawnOf, fullDrawing } from "./activations.js";
import { glossPage } from "./glossary.js";
import { GraphView } from "./graph.js";
import { RetrainPanel } from "./retrain.js";
import { besideCurves, VariantPanel } from "./variants.js";
import { Training } from "./training.js";
import { VerifyHistory, VerifyPanel } from "./verify.js";
import { WhatIf } from "./whatif.js";

const IMAGE_SIZE = 160; // px: a recorded image, its pixels plain to see
const MAP_SIZE = 112; // px: each of a group's maps (a feature map's pixels visible; a 70 px swatch hid them)
const page = document.getElementById("model-page");
const slug = page.dataset.slug;
const state = { case: page.dataset.case, step: page.dataset.step };
let graph = null;
let whatif = null;
let training = null;
let sourceLines = null;
const activations = new Activations(page.dataset.activationsUrl);
let pictureSubject = null; // what the picture is drawn on: {case} or the lab's {endpoint, request}
const recordedInputs = JSON.parse(page.dataset.recordedInputs || "[]");

// ---- URL state: ?case=…&step=… is a shareable view; back and forward restore it.

function writeUrl(push) {
  const url = new URL(window.location.href);
  if (state.case) url.searchParams.set("case", state.case); // a recording without cases has none to name
  url.searchParams.set("step", state.step);
  window.history[push ? "pushState" : "replaceState"]({ ...state }, "", url);
}

window.addEventListener("popstate", () => {
  const params = new URL(window.location.href).searchParams;
  if (params.get("case") && params.get("case") !== state.case) showCase(params.get("case"), false);
  const step = params.get("step") ?? steps[0].dataset.stepId; // no step named: the overview, where a page opens
  if (step !== state.step) showStep(step, false);
});

// ---- The graph's view in the URL: ?open=a,b (the open modules) and ?node=<id> (the selected node), so that a
// link shows the same graph with the same node's details (and What if?'s module chosen).

function writeGraphState() {
  editQuery((params) => {
    params.set("open", [...graph.open].join(","));
    if (graph.selected) params.set("node", graph.selected);
    else params.delete("node");
  });
}

function linkedGraphState() {
  const params = new URL(window.location.href).searchParams;
  return {
    open: params.has("open") ? params.get("open").split(",").filter(Boolean) : JSON.parse(page.dataset.graphOpen || "[]"),
    node: params.get("node"),
  };
}

// ---- Recorded cases

function enhanceCase(panel) {
  if (!panel) return; // a recording without cases
  for (const figure of panel.querySelectorAll('[data-chart="heatmap"]')) {
    const values = JSON.parse(figure.dataset.values);
    const axes = figure.dataset.axes ? JSON.parse(figure.dataset.axes) : null;
    figure.querySelector(".chart-canvas").replaceChildren(valueHeatmap(values, figure.dataset.label, axes));
  }
  for (const figure of panel.querySelectorAll('[data-chart="image"]')) { // ink on paper, as the digit was drawn
    const values = JSON.parse(figure.dataset.values);
    figure.querySelector(".chart-canvas").replaceChildren(greySvg(values, { label: figure.dataset.label, max: Number(figure.dataset.ink), size: IMAGE_SIZE }));
  }
  for (const figure of panel.querySelectorAll('[data-chart="multiples"]')) {
    const maps = [...figure.querySelectorAll(".feature-map")].map((map) => ({ map, values: JSON.parse(map.dataset.values), axes: map.dataset.axes ? JSON.parse(map.dataset.axes) : null }));
    const largest = (values) => Math.max(...values.flat().map(Math.abs));
    const shared = Math.max(...maps.map(({ values }) => largest(values)));
    const under = figure.dataset.over ? JSON.parse(figure.dataset.over) : null;
    const ink = figure.dataset.ink ? Number(figure.dataset.ink) : null; // pictures: ink on paper
    for (const { map, values, axes } of maps) {
      const limit = figure.dataset.scale === "own" ? largest(values) : shared; // own: each map on its own scale
      map.querySelector(".map-canvas").replaceChildren(ink ? greySvg(values, { label: map.dataset.label, max: ink, size: MAP_SIZE })
        : smallMap(values, { label: map.dataset.label, limit, under, size: MAP_SIZE, axes }));
    }
  }
  for (const figure of panel.querySelectorAll('[data-chart="overview"]')) drawOverview(figure);
  for (const figure of panel.querySelectorAll('[data-chart="scatter"]')) {
    const { x, y, arrows } = JSON.parse(figure.dataset.scatter);
    const names = figure.dataset.names ? JSON.parse(figure.dataset.names) : null;
    figure.querySelector(".chart-canvas").replaceChildren(scatterSvg(JSON.parse(figure.dataset.values), { label: figure.dataset.label, x, y, names, arrows }));
  }
  for (const figure of panel.querySelectorAll('[data-chart="curve"]')) {
    const curve = JSON.parse(figure.dataset.curve);
    figure.querySelector(".chart-canvas").replaceChildren(curveSvg(JSON.parse(figure.dataset.values), {
      label: figure.dataset.label, ...curve, first: Number(figure.dataset.first),
    }));
  }
  // The tables are open for a page without scripts, where they are all there is; with the charts drawn, a click
  // away. A large one is out of the page until it is opened: a sampler's three were 10,000 cells, most of the
  // page's elements, laid out and walked by every accessibility tree while no one could see them.
  for (const details of panel.querySelectorAll(".value-details")) {
    details.open = false;
    if (details.querySelectorAll("td").length <= LARGE_GRID) continue;
    const tables = [...details.querySelectorAll(":scope > .table-wrap")];
    for (const table of tables) table.remove();
    const restore = () => { // also told of the closing above, which is queued
      if (!details.open) return;
      details.append(...tables);
      details.removeEventListener("toggle", restore);
    };
    details.addEventListener("toggle", restore);
  }
  for (const box of panel.querySelectorAll(".chart-canvas, .table-wrap")) watchOverflow(box);
  for (const button of panel.querySelectorAll("[data-export-svg]")) {
    button.addEventListener("click", () => {
      const figure = button.closest("figure");
      const label = figure.dataset.label;
      const svg = ["heatmap", "curve", "scatter", "image"].includes(figure.dataset.chart)
        ? figure.querySelector(".chart-canvas svg")
        : barsSvg(JSON.parse(figure.dataset.values), Number(figure.dataset.max), label, { first: Number(figure.dataset.first), names: [...figure.querySelectorAll(".bar-index")].map((n) => n.textContent) });
      downloadSvg(svg, `${slug}-${panel.dataset.case}-${slugify(label)}.svg`);
    });
  }
}

/** Every layer's heads at once, each map on its own scale, and one query row followed through all of them: chosen
 * in the list, or by pointing at a row of any map. */
function drawOverview(figure) {
  const { unit, layers, heads, maps, rows } = JSON.parse(figure.dataset.overview);
  const grid = figure.querySelector(".overview-grid");
  grid.style.setProperty("--heads", heads.length);
  const cell = (values, layer, head) => {
    if (!values) return el("span");
    const label = `${unit} ${layer}, head ${head}`;
    const limit = Math.max(...values.flat().map(Math.abs));
    return el("div", { class: "overview-map" }, smallMap(values, { label, limit, size: 120 })); // the grid's headings name it
  };
  grid.replaceChildren(el("span"), ...heads.map((head) => el("span", { class: "overview-head" }, `head ${head}`)),
    ...layers.flatMap((layer, i) => [el("span", { class: "overview-layer" }, `${unit} ${layer}`),
      ...maps[i].map((values, j) => cell(values, layer, heads[j]))]));
  const select = figure.querySelector("[data-follow]");
  const follow = (row) => {
    grid.classList.toggle("is-following", row !== null);
    for (const rect of grid.querySelectorAll("rect[data-row]")) rect.classList.toggle("is-followed", rect.dataset.row === String(row));
    select.value = row === null ? "" : String(row);
    figure.dataset.following = row === null ? "" : rows ? rows[row] : String(row);
  };
  select.addEventListener("change", () => follow(select.value === "" ? null : Number(select.value)));
  grid.addEventListener("pointerover", (event) => {
    const rect = event.target.closest("rect[data-row]");
    if (rect) follow(Number(rect.dataset.row));
  });
}

async function showCase(caseId, push) {
  const container = document.getElementById("case-container");
  const current = document.getElementById("case-panel");
  current.classList.add("is-loading");
  try {
    const response = await fetch(`/models/${encodeURIComponent(slug)}/cases/${encodeURIComponent(caseId)}`);
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    container.innerHTML = await response.text();
  } catch (error) {
    current.classList.remove("is-loading");
    current.prepend(Object.assign(document.createElement("p"), { className: "notice", textContent: `Could not load that case: ${error.message}` }));
    return;
  }
  enhanceCase(document.getElementById("case-panel"));
  for (const link of document.querySelectorAll("[data-case-id]")) {
    const on = link.dataset.caseId === caseId;
    link.classList.toggle("is-current", on);
    if (on) link.setAttribute("aria-current", "true");
    else link.removeAttribute("aria-current");
  }
  state.case = caseId;
  whatif?.subjectChanged(); // what each node can do on the case now shown, and the changes, if any, run on it
  training?.refresh();
  drawPicture({ case: caseId });
  announce(`Showing the recorded case “${document.getElementById("case-panel").dataset.caseLabel}”.`);
  if (push !== undefined) writeUrl(push);
}

for (const link of document.querySelectorAll("[data-case-id]")) {
  link.addEventListener("click", (event) => {
    event.preventDefault();
    if (link.dataset.caseId !== state.case) showCase(link.dataset.caseId, true);
  });
}
enhanceCase(document.getElementById("case-panel"));

// ---- The picture: what every node computed on the input shown (the case, or the lab's last run)

/** Where the picture's input came from, in words. */
function pictureSource(subject) {
  if (subject.case === undefined) return "your input in the lab";
  const label = document.querySelector(`[data-case-id="${CSS.escape(subject.case)}"]`)?.textContent.trim();
  return `the recorded case “${label || subject.case}”`;
}

async function drawPicture(subject) {
  pictureSubject = subject;
  if (!graph) return; // drawn once the graph is
  const stage = document.getElementById("graph-stage");
  const status = document.getElementById("graph-picture-status");
  if (!page.dataset.activationsUrl) { // the model's checkpoint is missing: the lab says how to provide one
    stage.dataset.picture = "failed";
    status.textContent = "The graph shows the architecture alone: drawing what each node computes needs the model's checkpoint.";
    return;
  }
  stage.dataset.picture = "drawing";
  status.textContent = `Drawing what each node computes on ${pictureSource(subject)}…`;
  let answer;
  try {
    answer = await activations.of(subject);
  } catch (error) {
    if (subject !== pictureSubject) return;
    stage.dataset.picture = "failed";
    status.textContent = `The graph shows the architecture alone: what each node computes could not be drawn (${error.message}).`;
    return;
  }
  if (!answer || subject !== pictureSubject) return; // another input was asked for meanwhile
  graph.picture(answer.nodes);
  stage.dataset.picture = "drawn";
  status.textContent = `Drawn on ${pictureSource(subject)}: in each node what it computed, on each arrow its tensor's shape.`;
  if (graph.selected) showComputed(graph.layers.get(graph.selected));
}

/** The selected node's output on the picture's input, full size, in its details. */
async function showComputed(layer) {
  const panel = document.getElementById("node-details");
  panel.querySelector(".node-computed")?.remove();
  const entry = graph?.activations?.[layer.id];
  if (!entry) return;
  const box = el("div", { class: "node-computed" }, el("h4", {}, "On this input"), el("p", {}, `${layer.id} computed ${drawingInWords(entry)}.`));
  panel.querySelector("dl")?.before(box);
  try {
    const large = await activations.node(layer.id);
    if (large && graph.selected === layer.id && box.isConnected) { // a region that scrolls by keyboard too
      box.append(watchOverflow(el("div", { class: "chart-canvas", tabindex: 0, role: "region", "aria-label": `${layer.id}'s output on this input, full size` }, fullDrawing(layer.id, large))));
      const left = drawnOf(large);
      if (left) box.append(el("p", { class: "fine" }, left));
    }
  } catch (error) {
    box.append(el("p", { class: "notice" }, `Its output could not be drawn full size: ${error.message}`));
  }
}

document.addEventListener("lab-request", (event) => drawPicture({ endpoint: event.detail.endpoint, request: event.detail.request }));
// The lab refused what was typed: the picture is still of the input it last ran, and says so.
document.addEventListener("lab-refused", () => {
  const stage = document.getElementById("graph-stage");
  if (stage.dataset.picture !== "drawn") return;
  stage.dataset.picture = "stale";
  document.getElementById("graph-picture-status").textContent = `Still drawn on ${pictureSource(pictureSubject)}, the last input the lab ran: the lab refused what you typed since.`;
});

// ---- Tour

const steps = [...document.querySelectorAll(".tour-step")];

function showStep(stepId, push) {
  const index = Math.max(0, steps.findIndex((s) => s.dataset.stepId === stepId));
  steps.forEach((s, i) => {
    s.classList.toggle("is-current", i === index);
    if (i === index) s.setAttribute("aria-current", "step");
    else s.removeAttribute("aria-current");
  });
  state.step = steps[index].dataset.stepId;
  document.getElementById("tour-position").textContent = `Step ${index + 1} of ${steps.length}`;
  const prev = document.querySelector('[data-tour="prev"]');
  const next = document.querySelector('[data-tour="next"]');
  setDisabled(prev, index === 0, next);
  setDisabled(next, index === steps.length - 1, prev);
  const target = steps[index].dataset.target;
  if (target) graph?.highlight(target);
  else if (push !== undefined) graph?.overview(); // back to the overview: the model at block level again
  if (push !== undefined) writeUrl(push);
}

document.querySelector('[data-tour="prev"]').addEventListener("click", () => {
  const i = steps.findIndex((s) => s.dataset.stepId === state.step);
  showStep(steps[Math.max(0, i - 1)].dataset.stepId, true);
});
document.querySelector('[data-tour="next"]').addEventListener("click", () => {
  const i = steps.findIndex((s) => s.dataset.stepId === state.step);
  showStep(steps[Math.min(steps.length - 1, i + 1)].dataset.stepId, true);
});
for (const link of document.querySelectorAll("[data-step-link]")) {
  link.addEventListener("click", (event) => {
    event.preventDefault();
    showStep(link.dataset.stepLink, true);
  });
}
showStep(state.step);

// ---- Graph and node details

async function loadSource() {
  if (!sourceLines) {
    const response = await fetch(page.dataset.sourceUrl);
    if (!response.ok) throw new Error(`model.py: the server answered ${response.status}`);
    sourceLines = (await response.text()).split("\n");
  }
  return sourceLines;
}

function fact(dl, name, value) {
  dl.append(Object.assign(document.createElement("dt"), { textContent: name }));
  const dd = document.createElement("dd");
  dd.append(value);
  dl.append(dd);
}

/** A short summary for screen readers, instead of re-reading a whole panel. */
function announce(text) {
  document.getElementById("page-announce").textContent = text;
}

async function showDetails(layer) {
  const panel = document.getElementById("node-details");
  const title = Object.assign(document.createElement("h3"), { id: "node-details-title", textContent: layer.id });
  const dl = document.createElement("dl");
  if (layer.shown?.plain) fact(dl, "what it is", layer.shown.plain);
  fact(dl, "op", layer.op);
  fact(dl, "kind", layer.kind);
  const params = Object.entries(layer.params || {}).map(([k, v]) => `${k}=${v}`).join(", ");
  fact(dl, "params", params || "—");
  if (layer.parent && graph) {
    // The module around this node, selected from here by keyboard too (an open module's frame takes a click).
    const up = Object.assign(document.createElement("button"), { type: "button", className: "link-button", textContent: layer.parent });
    up.setAttribute("aria-label", `Select ${layer.parent}, the module around ${layer.id}`);
    up.addEventListener("click", () => graph.select(layer.parent));
    fact(dl, "parent", up);
  } else fact(dl, "parent", layer.parent || "— (top level)");
  if (layer.module) fact(dl, "calls", `call ${layer.call} of ${layer.calls} of the one module ${layer.module} (same parameters)`);
  for (const [param, others] of Object.entries(layer.sharedParams || {})) fact(dl, `shared ${param}`, `the same tensor as ${others.join(", ")}`);
  if (layer.kind === "input" && recordedInputs.length) {
    // What the recording ran with, beside what the graph says (a capture may have traced other sizes).
    fact(dl, "recorded with", recordedInputs.map((a) => `${a.name ? `${a.name}: ` : ""}${a.shape ?? "values"} ${a.dtype ?? "float32"}`).join("; "));
  }
  const src = layer.source;
  const lines = (span) => `model.py ${span.endLine !== span.line ? `lines ${span.line}–${span.endLine}` : `line ${span.line}`}`;
  fact(dl, layer.callSource ? "declared" : "source", src ? lines(src) : "—");
  if (layer.callSource) fact(dl, "runs at", lines(layer.callSource));
  // An op's recorded name read out (add@encoder#0: "the 1st torch.add in encoder's forward"); the name stays above.
  const inWords = layer.shown?.in_words ? el("p", { class: "node-in-words" }, `In words: ${layer.shown.in_words}.`) : null;
  const children = [title, inWords, dl].filter(Boolean);
  if (layer.kind === "module" && graph) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.toggle = layer.id; // found again by keepingFocus once the panel is drawn anew
    button.textContent = graph.isOpen(layer.id) ? `Close ${layer.id}` : `Open ${layer.id}`;
    button.addEventListener("click", () => {
      graph.toggle(layer.id);
      showDetails(layer);
    });
    children.push(button);
  }
  keepingFocus(panel, () => panel.replaceChildren(...children));
  showComputed(layer);
  if (!src) return;
  try {
    const text = await loadSource();
    for (const span of [src, layer.callSource].filter(Boolean)) {
      const pre = Object.assign(document.createElement("pre"), { className: "source", tabIndex: 0 }); // scrolls by keyboard
      pre.setAttribute("role", "region");
      pre.setAttribute("aria-label", `model.py lines ${span.line} to ${span.endLine}, with context`);
      const from = Math.max(1, span.line - 2);
      const to = Math.min(text.length, span.endLine + 2);
      for (let n = from; n <= to; n++) {
        const line = Object.assign(document.createElement("code"), { className: `source-line${n >= span.line && n <= span.endLine ? " is-hit" : ""}` });
        line.append(Object.assign(document.createElement("span"), { className: "ln", textContent: n }), text[n - 1]);
        pre.append(line);
      }
      panel.append(pre);
    }
  } catch (error) {
    panel.append(Object.assign(document.createElement("p"), { className: "notice", textContent: `Source unavailable: ${error.message}` }));
  }
}

function moduleToggles() {
  const holder = document.getElementById("module-toggles");
  // A toggle for each module that is in view: top level, or inside an open module.
  const shown = graph.modules.filter((m) => !m.parent || graph.isDrawnOpen(m.parent));
  keepingFocus(holder, () => holder.replaceChildren(...shown.map((m) => {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.module = m.id;
    const open = graph.isOpen(m.id);
    button.setAttribute("aria-pressed", String(open)); // pressed: the module is open
    button.textContent = `${open ? "▾" : "▸"} ${m.id}`;
    button.title = open ? `Close ${m.id}` : `Open ${m.id}`;
    button.addEventListener("click", () => graph.toggle(m.id));
    return button;
  })));
}

async function startGraph(recorded) {
  const stage = document.getElementById("graph-stage");
  const linked = linkedGraphState();
  let restoring = false; // a linked node is selected as the page loads: its details are not scrolled to
  try {
    graph = new GraphView(stage, recorded, {
      open: linked.open,
      // On a phone the panel lies below the graph: bring the details of a tapped node into view.
      onSelect: (layer) => {
        showDetails(layer);
        whatif?.select(layer);
        writeGraphState();
        if (restoring) return;
        announce(`Details of ${layer.id}: ${layer.op}${layer.source ? `, model.py line ${layer.source.line}` : ""}.`);
        reveal(document.getElementById("node-details"));
      },
      onToggle: () => {
        moduleToggles();
        writeGraphState();
      },
    });
  } catch (error) {
    stage.replaceChildren(Object.assign(document.createElement("p"), {
      className: "graph-loading", textContent: `The interactive graph could not load (${error.message}); the snapshot below shows the same graph.`,
    }));
    return;
  }
  const lab = document.getElementById("lab");
  graph.tokenNames = lab ? JSON.parse(lab.dataset.settings).names ?? null : null; // an input's ids drawn as tokens
  moduleToggles();
  for (const button of document.querySelectorAll("[data-zoom]")) {
    button.addEventListener("click", () => {
      const how = button.dataset.zoom;
      if (how === "fit") graph.fit();
      else graph.zoomBy(how === "in" ? 1.25 : 0.8);
    });
  }
  for (const button of document.querySelectorAll("[data-open-all]")) {
    button.addEventListener("click", () => graph.setAll(button.dataset.openAll === "true"));
  }
  document.querySelector("[data-export-graph]").addEventListener("click", () => graph.download(`${slug}-graph.svg`));
  showStep(state.step);
  if (linked.node && graph.layers.has(linked.node)) {
    restoring = true;
    graph.select(linked.node);
    restoring = false;
  }
}

async function main() {
  let recorded;
  try {
    // The recorded graph as it is drawn: the layers (each with its node's text) and the connections.
    const response = await fetch(page.dataset.graphUrl, { headers: { Accept: "application/json" } });
    recorded = requireData(response, await readJson(response));
  } catch (error) {
    document.getElementById("graph-stage").textContent = `The model's graph could not load: ${error.message}`;
    return;
  }
  const historySection = document.getElementById("verify-history");
  const verifyHistory = historySection ? new VerifyHistory(historySection) : null;
  verifyHistory?.load();
  if (document.getElementById("reverify")) { // none where the checkpoint it needs is missing
    new VerifyPanel({
      button: document.getElementById("reverify"),
      status: document.getElementById("verify-status"),
      output: document.getElementById("verify-report"),
      url: page.dataset.verifyUrl,
      openCase: () => state.case,
      history: verifyHistory,
    });
  }
  const retraining = document.getElementById("retraining");
  if (retraining) new RetrainPanel(retraining, verifyHistory);
  const trainYourOwn = document.getElementById("train-your-own");
  if (trainYourOwn) new VariantPanel(trainYourOwn);
  const beside = document.getElementById("beside-curves");
  if (beside) besideCurves(beside);
  const whatifSection = document.getElementById("whatif");
  if (whatifSection) whatif = new WhatIf(whatifSection, { caseId: () => state.case });
  const labSection = document.getElementById("lab");
  if (labSection) {
    // Each lab kind brings its own module; the page loads the one this model's recipe declares.
    try {
      const kind = await import(labSection.dataset.script);
      whatif?.useKind(kind);
      new kind.Lab(labSection);
      labSection.dataset.ready = "true";
    } catch (error) {
      labSection.append(Object.assign(document.createElement("p"), { className: "notice", textContent: `The lab could not start: ${error.message}` }));
    }
  }
  const trainingSection = document.getElementById("training");
  if (trainingSection) training = new Training(trainingSection, { caseId: () => state.case });
  await startGraph(recorded);
  const firstSubject = pictureSubject ?? (state.case ? { case: state.case } : null);
  if (graph && firstSubject) drawPicture(firstSubject);
  else if (graph) document.getElementById("graph-stage").dataset.picture = "waiting"; // for the lab's first run
  if (graph) {
    whatif?.attach(graph);
    training?.attach(graph);
  }
}

// ---- The section navigation marks the section being read: the last one whose top has passed under it.

const SECTION_SLACK = 24; // px below the navigation where a section taken to by its link lands (scroll-margin-top)

function markSection(current = null) {
  const links = [...document.querySelectorAll("#section-nav a")];
  const below = document.getElementById("section-nav").getBoundingClientRect().bottom + SECTION_SLACK;
  let nearest = -Infinity; // of the sections whose top has passed, the one that passed last (What if? is inside the graph's)
  for (const link of current ? [] : links) {
    const top = document.getElementById(link.hash.slice(1))?.getBoundingClientRect().top;
    if (top <= below && top > nearest) [current, nearest] = [link, top];
  }
  for (const link of links) {
    if (link === current) link.setAttribute("aria-current", "true");
    else link.removeAttribute("aria-current");
  }
}
// A section near the page's end may never reach the top: the link followed names the section read, also through
// the scroll that following it makes.
let followed = null;
for (const link of document.querySelectorAll("#section-nav a")) {
  link.addEventListener("click", () => {
    followed = link;
    markSection(link);
  });
}
let marking = null;
window.addEventListener("scroll", () => {
  marking ??= requestAnimationFrame(() => {
    marking = null;
    markSection(followed);
    followed = null;
  });
}, { passive: true });

writeUrl(false);
glossPage();
for (const box of document.querySelectorAll("[data-clamp]")) clampOnPhone(box);
main();
