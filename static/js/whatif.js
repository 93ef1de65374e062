// What if? Interventions from the graph: the selected module's output (or one attention head's) zeroed,
// averaged, scaled or patched from another case, changes stacked and removed one by one, run on the recorded
// case the page shows or on the input last run in the lab. The graph is shaded by how much each module moved;
// every item shows before and after (a lab kind may draw its own view of a whole answer: its `beforeAfter`).
// The server says what each node can do on the run changed (POST .../interventions/options: the actions that run
// on that input, the cases a patch may take it from, and why not the rest), and the page offers only those; it
// checks every change again (POST .../interventions). The list lives in the URL (?whatif=, and ?whatif_on=lab
// when it runs on the lab's input, which the lab keeps in the URL itself).

import { barsSvg, sig, valueHeatmap } from "./charts.js";
import { chartBox, editQuery, el, inOrder, keepingFocus, readJson, requireData, reveal, showStatus } from "./dom.js";

const PARAM = "whatif";
const ON = "whatif_on";

export class WhatIf {
  constructor(section, { caseId }) {
    this.section = section;
    this.settings = JSON.parse(section.dataset.settings);
    this.graph = null; // attach() hands it over once it is drawn
    this.caseId = caseId; // () => the recorded case the page shows
    this.changes = [];
    this.node = null;
    this.requests = 0;
    this.find = (id) => section.querySelector(`#${id}`);
    this.action = this.find("whatif-action");
    this.action.addEventListener("change", () => this.showFields());
    this.find("whatif-add").addEventListener("click", () => this.add());
    this.options = null; // { subject, nodes }: what each node can do on the run the changes are made to
    this.asked = null; // the subject whose options were last asked for
    this.status = this.find("whatif-status");
    this.results = document.getElementById("whatif-results"); // below the graph, where a table has the page's width
    this.lab = null; // { endpoint, request }: what the lab last ran
    this.view = null; // the lab kind's beforeAfter(before, after), where it draws one
    const on = new URL(window.location.href).searchParams.get(ON);
    this.subject = (on === "lab" || !this.settings.cases.length) && this.settings.lab ? "lab" : "case";
    for (const input of section.querySelectorAll("input[name=whatif-subject]")) {
      input.checked = input.value === this.subject;
      input.addEventListener("change", () => {
        this.subject = input.value;
        this.link();
        this.subjectChanged();
      });
    }
    document.addEventListener("lab-request", (event) => {
      this.lab = event.detail;
      const note = this.find("whatif-lab-note");
      if (note) note.textContent = "";
      if (this.subject === "lab") this.subjectChanged(!this.pending);
    });
    this.fromLink();
  }

  /** The run the changes are made to is another (the case shown, the subject, the lab's input): what each node
   * can do on it is asked for once a module is selected (a page read without What if? starts no run), and the
   * changes run on it where `run`. */
  subjectChanged(run = true) {
    if (this.node !== null) this.loadOptions();
    else this.asked = this.options = null;
    if (run) this.run();
  }

  async loadOptions() {
    const subject = this.subjectBody();
    const key = subject ? JSON.stringify(subject) : null;
    if (key !== null && key === this.asked) return;
    this.asked = key;
    this.options = null;
    this.showFields();
    if (key === null) return; // nothing to run yet (the lab has not run): nothing to ask about
    try {
      const response = await fetch(this.settings.options, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: key,
      });
      const answer = requireData(response, await readJson(response));
      if (key !== this.asked) return; // another subject was asked for meanwhile
      this.options = answer;
    } catch (error) {
      if (key === this.asked) this.asked = null; // asked again with the next selection
      this.addWhenKnown = false;
      showStatus(this.status, `Could not learn what this run can change: ${error.message}`, true);
    }
    this.showFields();
    if (this.addWhenKnown && this.options) this.add(); // a press of Add that came while the options were asked for
  }

  /** The lab kind's module is loaded: use its own view of an answer, where it has one. */
  useKind(module) {
    this.view = module.beforeAfter ?? null;
  }

  /** The graph selected a node: a module can be changed (the server names them), an op or an input cannot. */
  select(layer) {
    const changeable = this.settings.nodes.includes(layer.id);
    this.node = changeable ? layer.id : null;
    this.find("whatif-node").textContent = changeable ? layer.id : `${layer.id} is ${layer.kind === "layer" ? "an op" : `an ${layer.kind}`}: select a module`;
    if (changeable) this.loadOptions(); // once for each input the changes are made to
    this.showFields();
  }

  /** The form for the node selected: only the actions that run on this input, a patch from the cases that can
   * give it, and why not the others; nothing to add until the options are known. */
  showFields() {
    const offer = this.node !== null ? this.options?.nodes[this.node] : null;
    const why = [];
    for (const option of this.action.options) {
      const reason = offer?.why_not[option.value];
      option.disabled = Boolean(reason);
      if (reason) why.push(`${option.value}: ${reason}`);
    }
    if (offer && this.action.selectedOptions[0]?.disabled && offer.actions.length) this.action.value = offer.actions[0];
    const note = this.find("whatif-why");
    if (this.node !== null && !offer) {
      note.textContent = !this.subjectBody() ? "Run your input in the lab first: then this panel says what each module can do on it."
        : this.asked ? `Asking the server what ${this.node} can do on this input…` : "What this input's run can change is not known: select the module again to ask again.";
    } else if (why.length) note.textContent = offer.actions.length ? `Not offered here: ${why.join("; ")}.` : `Nothing to change here: ${Object.values(offer.why_not)[0]}.`;
    else note.textContent = "";
    note.hidden = !note.textContent;
    const source = this.find("whatif-source");
    for (const option of source.options) option.disabled = Boolean(offer) && !offer.from_cases.includes(option.value);
    if (offer && source.selectedOptions[0]?.disabled && offer.from_cases.length) source.value = offer.from_cases[0];
    this.find("whatif-add").disabled = !offer?.actions.length;
    const action = this.action.value;
    const heads = this.node !== null && this.node in this.settings.heads;
    this.find("whatif-head-label").hidden = !heads;
    const count = heads ? this.settings.heads[this.node] : null;
    if (count !== null) this.find("whatif-head").max = count - 1;
    else this.find("whatif-head").removeAttribute("max");
    this.find("whatif-factor-label").hidden = action !== "scale";
    this.find("whatif-source-label").hidden = action !== "patch";
  }

  /** The change the form describes, as the API takes it. */
  described() {
    const change = { node: this.node, action: this.action.value };
    const head = this.find("whatif-head").value;
    if (!this.find("whatif-head-label").hidden && head !== "") change.head = Number(head);
    if (change.action === "scale") change.factor = Number(this.find("whatif-factor").value);
    if (change.action === "patch") change.from_case = this.find("whatif-source").value;
    return change;
  }

  add() {
    // Add pressed while the options of a new subject are still being asked for (the lab's input just changed):
    // the change is made once they are known, not dropped.
    this.addWhenKnown = this.options === null && this.asked !== null;
    if (!this.options?.nodes[this.node]?.actions.includes(this.action.value)) return;
    this.changes.push(this.described());
    this.showList();
    this.run();
  }

  remove(index) {
    this.changes.splice(index, 1);
    this.showList();
    if (this.changes.length) this.run();
    else this.clear();
  }

  showList() {
    const list = this.find("whatif-list");
    keepingFocus(list, () => list.replaceChildren(...this.changes.map((change, i) => {
      const text = describe(change, (id) => this.settings.cases.find((c) => c.id === id)?.label ?? id);
      const remove = el("button", { type: "button", class: "link-button", "data-remove": i, "aria-label": `Remove: ${text}` }, "Remove");
      remove.addEventListener("click", () => this.remove(i));
      return el("li", {}, text, " ", remove);
    })));
    this.link();
  }

  /** Nothing is changed: the graph and the results as recorded. */
  clear() {
    this.graph?.shade(null);
    this.results.replaceChildren();
    showStatus(this.status, "No change: the graph shows the model as recorded.");
  }

  link() {
    editQuery((params) => {
      if (this.changes.length) params.set(PARAM, JSON.stringify(this.changes));
      else params.delete(PARAM);
      if (this.subject === "lab" && this.settings.cases.length) params.set(ON, "lab");
      else params.delete(ON);
    });
  }

  /** The changes a link carries; a link the page cannot read says so and changes nothing. */
  fromLink() {
    const text = new URL(window.location.href).searchParams.get(PARAM);
    if (!text) return;
    try {
      const changes = JSON.parse(text);
      if (!Array.isArray(changes) || !changes.every((c) => c && typeof c.node === "string" && typeof c.action === "string")) throw new Error("not a list of changes");
      this.changes = changes;
    } catch (error) {
      showStatus(this.status, `The link's changes could not be read (${error.message}).`, true);
      return;
    }
    this.showList();
    this.pending = true; // run once the graph is ready to be shaded
  }

  /** The graph is drawn: shade it, running a linked list of changes first. */
  attach(graph) {
    this.graph = graph;
    if (this.pending) {
      this.pending = false;
      this.run();
    }
  }

  /** What the changes run on: the recorded case shown, or the lab's last request; null while there is none. */
  subjectBody() {
    if (this.subject === "lab") return this.lab && { request: this.lab.request, endpoint: this.lab.endpoint };
    const caseId = this.caseId();
    return caseId ? { case: caseId } : null;
  }

  async run() {
    if (!this.changes.length) return;
    const subject = this.subjectBody();
    if (!subject) {
      if (this.subject === "lab") showStatus(this.status, "Run your input in the lab first: the changes run on what it ran last.");
      return;
    }
    const request = ++this.requests;
    const what = subject.case ? `“${this.settings.cases.find((c) => c.id === subject.case)?.label ?? subject.case}”` : "your lab input";
    showStatus(this.status, `Running ${what} with ${this.changes.length} change${this.changes.length > 1 ? "s" : ""}…`);
    try {
      const response = await fetch(this.settings.url, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ ...subject, interventions: this.changes }),
      });
      const answer = requireData(response, await readJson(response));
      if (request !== this.requests) return; // a later run was asked for meanwhile
      this.graph?.shade(answer.effects);
      this.show(answer);
      const moved = Object.values(answer.effects).filter((v) => v > 1e-6).length;
      showStatus(this.status, `Done: ${moved} of ${Object.keys(answer.effects).length} modules' outputs moved; the graph shades them.`);
    } catch (error) {
      if (request === this.requests) showStatus(this.status, `Could not run the changes: ${error.message}`, true);
    }
  }

  /** The outcome first (the recorded numbers that changed, in words), then every item that moved, most first,
   * the unchanged ones (the inputs among them) folded away, and the vectors and matrices that moved drawn before and
   * after (a matrix as two maps on one scale);
   * or the kind's own view of a whole answer. */
  show(answer) {
    const results = this.results;
    const heading = el("h3", {}, "What if? The answer with your changes");
    if (!answer.items) {
      const caption = el("p", { class: "fine" }, `Your lab input (${answer.endpoint}) before and after the changes.`);
      results.replaceChildren(heading, caption, ...(this.view ? this.view(answer.before, answer.after) : [rawChange(answer)]));
      reveal(results);
      return;
    }
    const items = Object.entries(answer.items).map(([key, item]) => {
      const change = largest(item.delta);
      return { key, item, change, moved: change > 0 ? change / Math.max(largest(item.before), Number.MIN_VALUE) : 0 };
    });
    const changed = items.filter((i) => i.change > 0).sort((a, b) => b.moved - a.moved);
    const unchanged = items.filter((i) => !(i.change > 0));
    const subject = answer.case ? `“${answer.case_label ?? answer.case}”` : "Your lab input";
    const table = (rows, caption, label) => el("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": label },
      el("table", {}, el("caption", {}, caption),
        el("thead", {}, el("tr", {}, ...["item", "before", "after", "largest change"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, ...rows.map(({ key, item, change }) => {
          const value = (v) => (typeof v === "number" ? sig(v) : item.kind === "vector" ? entries(v, item.names) : item.kind === "matrix" && Array.isArray(v?.[0]) ? `${v.length} × ${v[0].length} map` : "—");
          return el("tr", { "data-item": key }, el("th", { scope: "row" }, item.label),
            el("td", { class: "number" }, value(item.before)), el("td", { class: "number" }, value(item.after)), el("td", { class: "number" }, sig(change)));
        }))));
    const parts = [el("p", { class: "whatif-outcome" }, inWords(answer.outcome) ?? outcome(changed, this.settings.numbers))];
    if (changed.length) parts.push(table(changed, `${subject}: what the changes moved, most for its size first`, "The items the changes moved"));
    if (unchanged.length) {
      parts.push(el("details", { class: "whatif-unchanged" },
        el("summary", {}, `${unchanged.length} item${unchanged.length > 1 ? "s" : ""} unchanged (the inputs among them)`),
        table(unchanged, `${subject}: unchanged by the changes`, "The items the changes left as they were")));
    }
    // Token ids (an answer the model wrote) are words, not amounts: the table says them, no bar draws them.
    const amounts = (values) => typeof values[0] === "number" && !values.every(Number.isInteger);
    const figures = changed.filter(({ item }) => item.kind === "vector" && amounts(item.before)).slice(0, 3).map(({ item }) => {
      const max = Math.max(...item.before.map(Math.abs), ...item.after.map(Math.abs));
      return el("figure", { class: "chart whatif-bars" }, el("figcaption", {}, `${item.label}: before and after`),
        el("div", { class: "lab-columns is-compare" }, ...["before", "after"].map((when) =>
          chartBox(`${item.label}, ${when}`, barsSvg(item[when], max, `${item.label}, ${when}`, { names: item.names ?? null })))));
    });
    // A matrix that moved (an attention pattern) as maps before and after on one scale: a learner sees it change.
    const maps = changed.filter(({ item }) => item.kind === "matrix" && Array.isArray(item.before?.[0])).slice(0, 3).map(({ key, item }) => {
      const limit = Math.max(largest(item.before), largest(item.after), Number.MIN_VALUE);
      const cell = Math.max(6, Math.min(24, Math.floor(280 / item.before[0].length)));
      return el("figure", { class: "chart whatif-maps", "data-item": key }, el("figcaption", {}, `${item.label}: before and after`),
        el("div", { class: "lab-columns is-compare" }, ...["before", "after"].map((when) =>
          chartBox(`${item.label}, ${when}`, valueHeatmap(item[when], `${item.label}, ${when}`, item.axes ?? null, { limit, cell })))));
    });
    results.replaceChildren(heading, ...parts, ...figures, ...maps);
    reveal(results);
  }
}

/** The outcome in words, from the items that moved (most for its size first): each recorded number among them, in
 * the order the recording gives them (`order`, by key: a prediction, its probability, a loss), else the item that
 * moved most. */
function outcome(changed, order) {
  const byRecording = inOrder(order);
  const numbers = changed.filter(({ item }) => item.kind === "metric").sort((a, b) => byRecording(a.key, b.key)).slice(0, 4);
  if (numbers.length) return `With these changes, ${numbers.map(({ item }) => `${item.label} goes from ${sig(item.before)} to ${sig(item.after)}`).join("; ")}.`;
  if (changed.length) return `With these changes, no recorded number changes; ${changed[0].item.label} moves most (by up to ${sig(changed[0].change)}).`;
  return "With these changes, nothing recorded for this case changes.";
}

/** The answer before and after the changes, in the sentences the server wrote (the lab kind's outcome of each), where
 * it wrote both; null where it could not. */
function inWords(said) {
  if (!said?.before || !said?.after) return null;
  if (said.before === said.after) return `With these changes the answer stays: ${said.after}`;
  return `Before the changes: ${said.before} With them: ${said.after}`;
}

/** A whole answer's largest change, where the kind draws no view of its own. */
function rawChange(answer) {
  return el("p", {}, `The largest change of any number in the answer: ${sig(largest(answer.delta))}.`);
}

/** A change in words; `label(id)` names a recorded case as its page does. */
function describe(change, label) {
  const head = change.head !== undefined ? ` head ${change.head}` : "";
  const detail = change.action === "scale" ? ` × ${change.factor}` : change.action === "patch" ? ` from “${label(change.from_case)}”` : "";
  return `${change.action} ${change.node}${head}${detail}`;
}

/** The largest |number| in a nested list (0 for none). */
function largest(value) {
  if (Array.isArray(value)) return value.reduce((m, v) => Math.max(m, largest(v)), 0);
  return typeof value === "number" ? Math.abs(value) : 0;
}

const SHOWN_IDS = 12; // the entries of a vector of ids (an answer's tokens, labels) a table cell shows

/** A vector in a table cell: a vector of ids (an answer's tokens) as its ids; one of amounts by its largest entry,
 * named as the recipe names its entries (else by its number) with its value. */
function entries(values, names) {
  if (!values?.length) return "—";
  if (values.every(Number.isInteger)) return values.slice(0, SHOWN_IDS).join(" ") + (values.length > SHOWN_IDS ? " …" : "");
  const at = values.indexOf(Math.max(...values.filter((v) => typeof v === "number")));
  return `largest: ${names?.[at] !== undefined ? `“${names[at]}”` : `entry ${at}`}, ${sig(values[at])}`;
}
