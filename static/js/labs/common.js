// What every lab kind shares: JSON requests that wait out a busy server, bars, recorded items by key,
// and the server's comparison of a live run with the recorded case it replays.

import { diverging, inProse, sig } from "../charts.js";
import { editQuery, el, errorMessage, readJson, requireData, scrollBox, setDisabled, showStatus } from "../dom.js";

const BUSY_RETRIES = 3;
const PROGRESS_MS = 1000; // how often a waiting run's elapsed time is shown
const TEXT_CELL_STRENGTH = 0.7; // cells that carry text take at most 70% of a colour: dark text keeps 5:1

async function send(url, init, onBusy) {
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(url, init);
    const data = await readJson(response);
    if (response.ok) return requireData(response, data);
    if (response.status === 429 && attempt < BUSY_RETRIES) {
      const seconds = Math.min(30, Number(response.headers.get("Retry-After")) || 5);
      onBusy(seconds);
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      continue;
    }
    // A 400 is the input refused, said apart from a run that failed: the learner has something to change.
    if (response.status === 400) throw Object.assign(new Error(errorMessage(response, data)), { refused: true });
    requireData(response, data);
  }
}

/** POST JSON; when the server is busy (429) wait for its Retry-After and try again, a few times. */
export function postJson(url, body, onBusy = () => {}) {
  const init = { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" }, body: JSON.stringify(body) };
  return send(url, init, onBusy);
}

/** GET a lab endpoint with its fields as query parameters (lists comma-separated). */
export function getJson(url, params, onBusy = () => {}) {
  const query = new URLSearchParams(Object.entries(params).map(([k, v]) => [k, Array.isArray(v) ? v.join(",") : String(v)]));
  return send(`${url}?${query}`, { headers: { Accept: "application/json" } }, onBusy);
}

/**
 * Runs of which only the latest counts: a newer edit supersedes an older run. `start(busy)` sends the
 * request(s), passing `busy` on to postJson; the answer comes back, or null when the run failed (its
 * message reported) or a newer run started meanwhile.
 */
class Latest {
  constructor(report) {
    this.report = report; // (text, isError) => void
    this.count = 0;
  }

  /** No run under way counts any more: its answer, when it comes, is dropped (the input it was for is gone). */
  supersede() {
    this.count++;
  }

  async run(start, waiting = "Running the recipe on the server…") {
    const mine = ++this.count;
    const current = () => mine === this.count;
    this.report(waiting);
    // A run that takes longer than a moment shows its time, so that a wait (a recipe process still
    // starting after the server did, a queue) reads as progress rather than as a page that hangs.
    const began = Date.now();
    let busy = false;
    const progress = setInterval(() => {
      if (!current() || busy) return;
      const seconds = Math.round((Date.now() - began) / 1000);
      this.report(`${waiting} ${seconds} s so far; a first run after the server starts waits for its recipe process.`);
    }, PROGRESS_MS);
    try {
      const answer = await start((seconds) => {
        busy = true;
        if (current()) this.report(`The server is busy; trying again in ${seconds} s…`);
        setTimeout(() => { busy = false; }, seconds * 1000);
      });
      return current() ? answer : null;
    } catch (error) {
      if (current()) this.report(`${error.refused ? "The model cannot take this input" : "The run failed"}: ${error.message}`, true);
      return null;
    } finally {
      clearInterval(progress);
    }
  }
}

/**
 * What every lab panel starts from: its settings (from the page), each endpoint's URL by name, its status
 * line, and one Latest for its runs.
 */
export class LabPanel {
  constructor(section) {
    this.section = section;
    this.settings = JSON.parse(section.dataset.settings);
    this.urls = Object.fromEntries(Object.entries(this.settings.endpoints).map(([name, e]) => [name, e.url]));
    this.status = section.querySelector("#lab-status");
    this.latest = new Latest((text, isError) => this.setStatus(text, isError));
  }

  setStatus(text, isError = false) {
    showStatus(this.status, text, isError);
  }

  /**
   * Say a run's outcome first, in the status line: the sentence the server wrote for it (its lab kind reads the
   * answer: what the model answered, whether it is right, how sure), else `fallback` (an endpoint that answers no
   * case); `problem` (a link that could not be used) before it. Under it, folded, how the answer was computed and,
   * where the input is the recorded case labelled `recorded`, whether it reproduces that case (provenance).
   */
  answered(answer, { fallback = "The answer is below.", problem = null, recorded = null } = {}) {
    this.setStatus([problem, answer.outcome ?? fallback].filter(Boolean).join(" "));
    this.section.querySelector("#lab-provenance")?.remove();
    this.status.after(provenance(answer, recorded));
  }

  /** Tell the page what the lab just ran (the request as the server ran it), so that What if? can run it
   * again with changes. */
  ran(endpoint, answer) {
    this.section.dispatchEvent(new CustomEvent("lab-request", { bubbles: true, detail: { endpoint, request: answer.request } }));
  }
}

/** A fresh copy of one of the parts the recorded cases are drawn with (templates/_parts.html). */
function part(name) {
  return document.getElementById(`${name}-template`).content.firstElementChild.cloneNode(true);
}

/** A metric of a live run, as a recorded case shows one; `attrs` go on its value (an id, say). */
export function metric(label, value, attrs = {}) {
  const node = part("metric");
  node.querySelector("dt").textContent = label;
  const dd = node.querySelector("dd");
  dd.textContent = typeof value === "number" ? inProse(value) : value;
  if (typeof value === "number") dd.title = sig(value);
  for (const [k, v] of Object.entries(attrs)) dd.setAttribute(k, v);
  return node;
}

/** A token chip, as a recorded case shows one; `extra` adds classes (is-traced, is-moved) and children. */
export function chip(text, title, { classes = [], children = [], attrs = {} } = {}) {
  const node = part("chip");
  node.textContent = text;
  node.title = title;
  node.classList.add(...classes);
  node.append(...children);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

/** One bar, as a recorded case shows one: the scale goes into the viewBox and the value into the rect. */
export function bar(value, max, { label, negative = value < 0 } = {}) {
  const row = part("bar");
  row.querySelector(".bar-index").textContent = label;
  row.querySelector(".bar-track").setAttribute("viewBox", `0 0 ${max > 0 ? max : 1} 10`);
  const fill = row.querySelector(".bar-fill");
  fill.setAttribute("width", Math.abs(value));
  fill.classList.toggle("bar-negative", negative);
  const shown = row.querySelector(".bar-value");
  shown.textContent = inProse(value);
  shown.title = sig(value);
  return row;
}

export function bars(values, labels, max = Math.max(...values.map(Math.abs))) {
  return el("ol", { class: `bars${labels ? " bars-named" : ""}` }, ...values.map((v, i) => bar(v, max, { label: labels ? labels[i] : i })));
}

/**
 * Vectors of one length as the rows of one table, a column per index, so that the same unit lines up from row
 * to row at any width (the table scrolls sideways on a phone). Each row is coloured on its own scale; a null is
 * a value the model masked out. `columnClass(i)` may mark a column (an FFN unit that passed GELU, say).
 */
export function vectors(rows, caption, columnClass = () => "") {
  const length = rows[0][1].length;
  const body = rows.map(([label, values]) => {
    const max = Math.max(...values.map((v) => Math.abs(v ?? 0)));
    return el("tr", {}, el("th", { scope: "row" }, label), ...values.map((v, i) => {
      const cell = el("td", { title: v === null ? "masked" : String(v), class: columnClass(i) }, v === null ? "masked" : sig(v, 3));
      if (v !== null) cell.style.background = diverging(v, max / TEXT_CELL_STRENGTH);
      return cell;
    }));
  });
  const box = scrollBox(caption,
    el("table", { class: "vector-table" }, el("caption", {}, caption),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "index"), ...Array.from({ length }, (_, i) => el("th", { scope: "col" }, i)))),
      el("tbody", {}, ...body)));
  box.classList.add("trace-vector");
  return box;
}

/** One vector of a trace: a one-row table of `vectors`. */
export function vector(values, label) {
  return vectors([[label, values]], label);
}

/**
 * A trace table whose first column heads each row. A `reflow` table becomes one card per row on a phone,
 * each value under its column's name, instead of scrolling sideways (for tables with few, wide columns).
 */
export function table(headers, rows, caption, { reflow = false } = {}) {
  return scrollBox(caption, el("table", { class: `trace-table${reflow ? " reflow" : ""}` }, el("caption", {}, caption),
    el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((v, i) => (i === 0 ? el("th", { scope: "row" }, v) : el("td", { "data-label": headers[i] }, v))))))));
}

const PREVIEW_SETTLE_MS = 120; // a slider's steps closer together than this share one request

/**
 * The next token's distribution as a generation would draw it (templates/labs/_generation.html's #gen-preview),
 * redrawn as the temperature, top-k or the way of picking moves, before anything is generated: each change asks the
 * server for one step, so that the recipe's own rule (temperature, then top-k) draws it, never a copy of it here.
 * `ask(fields)` sends a one-step generation with those fields; `read(answer)` gives its drawn distribution's
 * likeliest tokens as [name, probability] pairs. draw() redraws it for a new prompt.
 */
export class SamplingPreview {
  constructor(section, ask, read) {
    this.section = section;
    this.box = section.querySelector("#gen-preview");
    this.ask = ask;
    this.read = read;
    this.count = 0;
    for (const id of ["gen-temperature", "gen-top-k"]) section.querySelector(`#${id}`).addEventListener("input", () => this.soon());
    for (const radio of section.querySelectorAll("[name=strategy]")) radio.addEventListener("change", () => this.soon());
  }

  soon() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.draw(), PREVIEW_SETTLE_MS);
  }

  /** The fields the controls hold, or an Error saying which is out of its bounds. */
  fields() {
    const input = (id) => this.section.querySelector(`#${id}`);
    const temperature = input("gen-temperature");
    const t = Number(temperature.value);
    if (temperature.value === "" || !(t >= Number(temperature.min) && t <= Number(temperature.max))) {
      throw new Error(`The temperature must be from ${Number(temperature.min)} to ${Number(temperature.max)}`);
    }
    const topK = input("gen-top-k");
    const strategy = this.section.querySelector("[name=strategy]:checked").value;
    if (topK.value === "") return { temperature: t, strategy };
    const k = Number(topK.value);
    if (!(Number.isInteger(k) && k >= Number(topK.min) && k <= Number(topK.max))) throw new Error(`Top-k must be a whole number from ${Number(topK.min)} to ${Number(topK.max)}, or empty for all`);
    return { temperature: t, top_k: k, strategy };
  }

  async draw() {
    const mine = ++this.count;
    let fields;
    try {
      fields = this.fields();
    } catch (error) {
      this.box.replaceChildren(el("p", { class: "notice" }, `${error.message}.`));
      return;
    }
    try {
      const pairs = this.read(await this.ask(fields));
      if (mine !== this.count) return; // a later move of the controls asked again
      const how = `temperature ${fields.temperature}${fields.top_k ? `, the ${fields.top_k} likeliest only` : ", every token"}`;
      const picks = fields.strategy === "greedy" ? `greedy takes “${pairs[0][0]}”` : "sampling draws from these";
      this.box.replaceChildren(el("figcaption", { class: "chart-title" }, `The next token as it would be drawn (${how}): ${picks}`),
        bars(pairs.map(([, p]) => p), pairs.map(([name]) => name), 1));
    } catch (error) {
      if (mine === this.count) this.box.replaceChildren(el("p", { class: "notice" }, `The distribution could not be drawn: ${error.message}`));
    }
  }
}

const unfolded = new Set(); // the folded parts a reader opened: a new answer draws them open again

/**
 * A part of an answer that a reader opens when wanted (every step's heatmaps, every stage's maps), folded under a
 * summary that says what it holds, so that a page as loaded stays short. `key` names it across answers: once
 * opened, it stays open as the input changes.
 */
export function folded(key, summary, ...children) {
  const details = el("details", { class: "lab-more", "data-fold": key }, el("summary", {}, summary), ...children);
  details.open = unfolded.has(key);
  details.addEventListener("toggle", () => (details.open ? unfolded.add(key) : unfolded.delete(key)));
  return details;
}

/** Show which recorded case the lab is on (pressed), or none once the user's edits have left it. */
export function markPreset(section, presetId) {
  for (const b of section.querySelectorAll("[data-preset]")) b.setAttribute("aria-pressed", String(b.dataset.preset === presetId));
}

/** The preset a lab starts from: the recorded case the page's ?case= names, else the first one. */
export function startingPreset(presets) {
  const wanted = new URLSearchParams(window.location.search).get("case");
  return presets.find((p) => p.id === wanted) ?? presets[0];
}

// ---- The lab's input in the page's URL: a reload or a shared link shows the same input.

const LINKED_PRESET = "lab"; // ?lab=<preset id>: the reader's last choice was a recorded case, unedited
const STEP = "seq_step"; // ?seq_step=<k>: the step a sequence lab shows (1-based), where it is not the last

/**
 * Where a lab starts from its link: `{input}` when the query carries an input (`parse(params)` reads it, null
 * when there is none, and throws an Error saying what is wrong with a malformed one), else `{preset}`, the
 * recorded case ?lab= or ?case= names; `problem` says why a link's input was not used.
 */
export function startFromLink(presets, parse) {
  const params = new URLSearchParams(window.location.search);
  let problem = null;
  try {
    const input = parse(params);
    if (input) return { input };
  } catch (error) {
    problem = `The link's input could not be used (${error.message}); showing a recorded case instead.`;
  }
  const linked = presets.find((p) => p.id === params.get(LINKED_PRESET));
  return { preset: linked ?? startingPreset(presets), problem };
}

/**
 * Write the lab's input into the URL, replacing the history entry (an edit is not a page to go back to):
 * `values` by parameter, null removing one. A recorded case is named by `preset` instead of its values.
 */
export function linkInput(values, preset = null) {
  editQuery((params) => {
    for (const [name, value] of Object.entries(values)) {
      if (value === null || preset) params.delete(name);
      else params.set(name, value);
    }
    if (preset) params.set(LINKED_PRESET, preset);
    else params.delete(LINKED_PRESET);
  });
}

/**
 * A lab's step through an answer (a slider over a sequence's, a chain's steps or an episode's moves) in the link, as
 * ?<name>=<k>: a reload shows the same step of the same answer. Only the first answer drawn opens on the link's
 * step; the step an answer opens on (`standard`) is left out of the link.
 */
export class LinkedStep {
  constructor(name) {
    this.name = name;
    const text = new URLSearchParams(window.location.search).get(name);
    this.pending = text !== null && /^\d+$/.test(text) ? Number(text) : null;
  }

  /** The step a new answer of `last` + 1 steps opens on: the link's (once, within the answer), else `standard`. */
  opening(standard, last) {
    const linked = this.pending;
    this.pending = null;
    return linked === null ? standard : Math.min(linked, last);
  }

  /** Say in the link that step `k` is shown. */
  write(k, standard) {
    editQuery((params) => (k === standard ? params.delete(this.name) : params.set(this.name, k)));
  }
}

/** A comma-separated list of whole numbers from a link; an Error names the parameter when it is not one. */
export function linkedInts(params, name) {
  const text = params.get(name);
  const values = text === null || text === "" ? [] : text.split(",").map(Number);
  if (!values.every(Number.isInteger)) throw new Error(`${name} must be whole numbers separated by commas`);
  return values;
}

/**
 * Token ids typed as text: one character per token where every name is one character, else names separated
 * by spaces. Where the names are characters, what a person types beside them is read as they meant it: a space
 * or a punctuation mark that is no token is left out, a capital whose small letter is a token (or the other way
 * round) is read as that token; `read` says so ("spaces left out"), with the text as read. Throws an Error naming
 * the first part that is still not a token, and what may be typed (`hint`, the server's words).
 */
export function typedTokens(text, names, hint = null) {
  const single = names.every((n) => n.length === 1);
  const said = [];
  let parts = single ? [...text] : text.trim().split(/\s+/).filter(Boolean);
  if (single) {
    const kept = parts.filter((c) => !/[\s\p{P}]/u.test(c) || names.includes(c));
    if (kept.length < parts.length) said.push(parts.some((c) => /\p{P}/u.test(c) && !names.includes(c)) ? "spaces and punctuation left out" : "spaces left out");
    const cased = kept.map((c) => (names.includes(c) ? c : names.find((n) => n.toLowerCase() === c.toLowerCase()) ?? c));
    if (cased.some((c, k) => c !== kept[k])) said.push(cased.some((c, k) => c !== kept[k] && c === c.toLowerCase()) ? "capitals read as small letters" : "small letters read as capitals");
    parts = cased;
  }
  const ids = parts.map((part) => names.indexOf(part));
  const stray = parts.find((_, k) => ids[k] < 0);
  const may = hint ?? (names.length === 2 ? names.join(" or ") : `one of ${names.join(" ")}`);
  if (stray !== undefined) throw new Error(`“${stray}” is not one of the tokens: type ${may}`);
  return { ids, read: said.length ? `read as “${parts.join("")}”: ${said.join(", ")}` : null };
}

/** Token ids a link or a text box gave, checked against a length and the highest id; an Error says what is wrong. */
export function checkedTokens(tokens, longest, highest) {
  if (!tokens.length) throw new Error("the sequence holds no token");
  if (tokens.length > longest) throw new Error(`the sequence holds ${tokens.length} tokens; at most ${longest}`);
  if (tokens.some((t) => t < 0 || t > highest)) throw new Error(`tokens must be ids from 0 to ${highest}`);
  return tokens;
}

const SEQUENCE_SETTLE_MS = 150; // keystrokes closer together than this share one run

/**
 * A lab whose input is a sequence of tokens typed as text (the recurrent and seq2seq kinds): the recorded
 * cases as presets, the sequence in the link under `field`, and edits that settle before a run. A subclass
 * sets `typeable` (the names a reader may type) and `emptySaid`, defines checked(), showTokens() and run(),
 * then calls start().
 */
export class SequenceLab extends LabPanel {
  constructor(section, field) {
    super(section);
    this.field = field;
    this.names = this.settings.names;
    this.typeable = this.names;
    this.text = section.querySelector("#seq-text");
    this.results = section.querySelector("#lab-results");
    this.tokens = [];
    this.step = null; // the step shown (1-based); null follows the last
    this.linkedStep = new LinkedStep(STEP);
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.load(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    this.text?.addEventListener("input", () => this.typedEdit());
  }

  /** The link's sequence, else its recorded case (or the first one), at the link's step (?seq_step=, 1-based; the
   * tour's is ?step=). */
  start() {
    const step = this.linkedStep.opening(null, Infinity); // a run's last step bounds it when it is drawn
    const start = startFromLink(this.settings.presets, (params) => (params.has(this.field) ? this.checked(linkedInts(params, this.field)) : null));
    if (start.input) this.edit(start.input);
    else this.load(start.preset, start.problem);
    if (step !== null && step >= 1) this.showAtStep(step);
  }

  /** Show step `step` (1-based; null follows the last), and say so in the link. */
  showAtStep(step) {
    this.step = step;
    this.linkedStep.write(step, null);
  }

  name(id) {
    return this.names[id] ?? String(id);
  }

  /** The text box as tokens; what is not a token, or too much, is said instead of sent. */
  typedEdit() {
    let typed;
    try {
      typed = typedTokens(this.text.value, this.typeable, this.typeable === this.names ? this.settings.names_hint : null);
      if (typed.ids.length) this.checked(typed.ids);
    } catch (error) {
      // The run of the last good sequence, pending or under way, would answer over this message; the answer to
      // the text before it goes too, so that nothing under the new text is another text's.
      clearTimeout(this.timer);
      this.latest.supersede();
      this.results.replaceChildren();
      this.section.querySelector("#lab-provenance")?.remove();
      this.setStatus(`${error.message}.`, true);
      this.section.dispatchEvent(new CustomEvent("lab-refused", { bubbles: true })); // the picture says it is the last run's
      return;
    }
    this.read = typed.read; // said with the run's outcome
    this.edit(typed.ids, { typed: true });
  }

  /** The run's outcome, after how the typed text was read where it was not taken as typed. */
  answered(answer, options = {}) {
    const read = this.read ? `${this.read[0].toUpperCase()}${this.read.slice(1)}.` : null;
    super.answered(answer, { ...options, problem: [options.problem, read].filter(Boolean).join(" ") || null });
  }

  /** A recorded case's sequence; `problem` says why a link's sequence was not used instead. */
  load(preset, problem = null) {
    this.read = null;
    this.preset = preset.id;
    this.presetLabel = preset.label;
    markPreset(this.section, preset.id);
    this.tokens = [...preset.request[this.field]];
    this.step = null;
    linkInput({ [this.field]: null, [STEP]: null }, this.preset);
    this.showTokens();
    this.run(problem);
  }

  edit(tokens, { typed = false } = {}) {
    if (!typed) this.read = null;
    this.preset = null;
    markPreset(this.section, null);
    this.tokens = tokens;
    this.step = null;
    linkInput({ [this.field]: tokens.length ? tokens.join(",") : null, [STEP]: null });
    if (!typed) this.showTokens();
    clearTimeout(this.timer);
    if (!tokens.length) {
      this.results.replaceChildren();
      this.setStatus(this.emptySaid);
      return;
    }
    this.timer = setTimeout(() => this.run(), typed ? SEQUENCE_SETTLE_MS : 0);
  }

  /**
   * What a run's answer opens with: the server's comparison with the recorded case (while it is one), the
   * metrics, and a slider over `count` steps; showStep() draws the chosen step into #seq-step-view.
   */
  stepHead(count) {
    const { answer } = this;
    if (this.step !== null && this.step > count) this.showAtStep(count); // a link's step past this run's last
    const slider = el("input", { type: "range", id: "seq-step", min: 1, max: count, value: this.step ?? count, "aria-describedby": "seq-step-said" });
    slider.addEventListener("input", () => {
      this.showAtStep(Number(slider.value));
      this.showStep();
    });
    return [el("dl", { class: "metrics" }, ...answer.case.metrics.map((m) => metric(m.label, m.value, { "data-key": m.key }))),
      el("h3", {}, "Step by step"),
      el("div", { class: "lab-options seq-step" }, el("label", {}, "Step ", slider), el("output", { id: "seq-step-said", for: "seq-step" })),
      el("div", { id: "seq-step-view" })];
  }

  /** The run's request: the sequence, and the recorded case it should reproduce while it is one. */
  request() {
    return { [this.field]: this.tokens, ...(this.preset ? { compare_with: this.preset } : {}) };
  }
}

/**
 * A SequenceLab edited as templates/labs/_sequence_editor.html draws it: a button adds each token, one removes the
 * last, one clears; the sequence is shown as typed (one character per token) or as names, and the buttons that
 * would go past `sizes.steps` tokens, or remove from an empty sequence, are disabled.
 */
export class EditedSequenceLab extends SequenceLab {
  constructor(section, field) {
    super(section, field);
    for (const button of section.querySelectorAll("[data-token]")) {
      button.addEventListener("click", () => this.edit([...this.tokens, Number(button.dataset.token)]));
    }
    section.querySelector("#seq-remove").addEventListener("click", () => this.edit(this.tokens.slice(0, -1)));
    section.querySelector("#seq-clear").addEventListener("click", () => this.edit([]));
  }

  checked(tokens) {
    return checkedTokens(tokens, this.settings.sizes.steps, this.settings.sizes.vocab - 1);
  }

  showTokens() {
    // The template offers a text box where every token's name is one character: the names then join as typed.
    const shown = this.tokens.map((t) => this.name(t)).join(this.text ? "" : " ");
    if (this.text) this.text.value = shown;
    else this.section.querySelector("#seq-shown").textContent = shown || "(empty)";
    const full = this.tokens.length >= this.settings.sizes.steps;
    const remove = this.section.querySelector("#seq-remove");
    for (const button of this.section.querySelectorAll("[data-token]")) setDisabled(button, full, remove);
    setDisabled(remove, !this.tokens.length, this.section.querySelector("[data-token]"));
  }
}

/** How long the recipe computed an answer, as a lab's status says it: "12 ms", "under 1 ms". */
/** What a DataLab's answer says of the checkpoint's weights, for its status line: the server's words where they look
 * untrained on the lab's own probes (recipekit.checkpoints.probe), or, where the server does not recognise them,
 * that they are not known; nothing for weights it knows that read the probes as trained weights do. */
export function weightsWarning(answer) {
  if (answer.checkpoint?.probe?.looks_untrained) return ` ${answer.checkpoint.probe.note}`;
  return answer.checkpoint_recognised === null ? ` ${answer.checkpoint_note}` : "";
}

export function serverTime(answer) {
  const ms = answer.compute_seconds * 1000;
  return `${ms < 1 ? "under 1" : ms.toFixed(0)} ms`;
}

/** A case's item (matrix, vector, metric: whatever groups the server's schema has) by its stable key; labels
 * are for display only. */
export function item(caseResult, key) {
  for (const group of Object.values(caseResult)) {
    const found = Array.isArray(group) ? group.find((x) => x?.key === key) : undefined;
    if (found) return found;
  }
  return undefined;
}

/**
 * How an answer was made, folded under it: computed now by the server (how long), and, while the input is a recorded
 * case's, whether it reproduces that case (recordCheck). The summary says both in a few words; the tolerances are
 * inside.
 */
export function provenance(answer, recordedLabel = null) {
  const check = recordedLabel && answer.record_check;
  const passed = check?.status === "passed";
  const checked = !check ? "" : passed ? ` · ✓ matches the recorded case “${recordedLabel}”` : ` · ✗ differs from the recorded case “${recordedLabel}”`;
  const details = el("details", { class: `lab-provenance${check && !passed ? " is-failed" : ""}`, id: "lab-provenance" },
    el("summary", {}, `Computed live in ${serverTime(answer)}${checked}`),
    el("p", { class: "fine" }, `The server ran the model's code on the recorded weights for this input just now${answer.cached ? " (an identical request was answered before, so this is that answer)" : ""}.`),
    ...(check ? [recordCheck(check, recordedLabel)] : []));
  details.open = Boolean(check && !passed); // a failed reproduction is not folded away
  return details;
}

/** The server's verdict on a live run of a recorded case (the tolerance rule is applied there). */
export function recordCheck(check, recordedLabel) {
  const worst = Math.max(0, ...check.values.map((v) => v.max_abs_diff ?? Infinity));
  const tol = check.tolerance;
  const passed = check.status === "passed";
  return el("p", { class: `record-check ${passed ? "is-passed" : "is-failed"}`, id: "record-check" },
    passed ? `✓ This live run reproduces the recorded case “${recordedLabel}” within its envelopes (rtol ${sig(tol.rtol)}, atol ${sig(tol.atol)}, or wider where rounding was measured to move a value further; largest |Δ| ${sig(worst)}).`
    : `✗ This live run differs from the recorded case “${recordedLabel}”: ${check.values.filter((v) => v.status !== "passed").length} values are outside their envelopes.`);
}
