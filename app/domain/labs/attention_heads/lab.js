// The attention-heads lab: type a sequence; every edit runs the model on the server, which answers every head's
// attention, where an induction head would look, and every head's two scores (the recipe computes them: the page
// draws them and computes none). One head is drawn at full size with the tokens on both axes and the two patterns
// outlined; every head is drawn small beside its scores, to choose from. "Switch it off" runs the same input again
// through What if? with that head zeroed, and shows what every head and the loss lose.

import { sig, smallMap, valueHeatmap } from "../charts.js";
import { chartBox, el, keepingFocus } from "../dom.js";
import { COLOUR } from "../palette.js";
import { EditedSequenceLab, item, metric, postJson, table } from "./common.js";

const HEAD = /^attention_l(\d+)_h(\d+)$/; // a head's map: attention_l<layer>_h<head>
const MARKS = {
  previous: { colour: COLOUR.rust, dash: "3 2" },
  induction: { colour: COLOUR.accent, dash: "" },
};

export class Lab extends EditedSequenceLab {
  constructor(section) {
    super(section, "tokens");
    this.thing = this.settings.words?.thing ?? "token";
    this.emptySaid = `Type a few ${this.thing}s to start; type a run of them twice to give the heads something to copy.`;
    this.chosen = null; // the key of the head drawn at full size
    this.start();
  }

  async run(problem = null) {
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, this.request(), busy), `Reading the ${this.thing}s on the server…`);
    if (!answer) return;
    this.ran("runs", answer);
    this.answered(answer, { problem, recorded: this.preset ? this.presetLabel : null });
    this.answer = answer;
    this.switchedOff = null;
    this.render();
  }

  /** Every head's map, with its layer, its number and its two scores, in the order the scores name them. */
  heads(caseResult) {
    const previous = item(caseResult, "previous_token_scores");
    const induction = item(caseResult, "induction_scores");
    return caseResult.matrices.filter((m) => HEAD.test(m.key)).map((m, k) => {
      const [, layer, head] = m.key.match(HEAD).map(Number);
      return { key: m.key, map: m, layer, head, name: previous?.names?.[k] ?? `layer ${layer} · head ${head}`,
        previous: previous?.values[k] ?? null, induction: induction?.values[k] ?? null };
    });
  }

  render() {
    const c = this.answer.case;
    const heads = this.heads(c);
    if (!heads.some((h) => h.key === this.chosen)) this.chosen = best(heads, "induction")?.key ?? heads[0].key;
    const chosen = heads.find((h) => h.key === this.chosen);
    const rows = heads.map((h) => [h.name, sig(h.previous, 3), h.induction === null ? "—" : sig(h.induction, 3),
      el("button", { type: "button", class: "link-button", "data-head": h.key, "aria-pressed": String(h.key === this.chosen) }, "Draw it")]);
    const parts = [
      el("dl", { class: "metrics" }, ...c.metrics.map((m) => metric(m.label, m.value, { "data-key": m.key }))),
      table(["head", `one ${this.thing} back`, "just after an earlier place", "full size"], rows,
        `Every head scored: its mean attention to the ${this.thing} just before (a previous-token head), and from a ${this.thing} seen before to just after its earlier places (an induction head)`, { reflow: true }),
      this.figure(chosen, this.answer),
      el("div", { class: "lab-options" }, el("button", { type: "button", id: "head-off" }, `Switch ${chosen.name} off`)),
      el("div", { id: "head-off-result" }),
      el("h3", {}, "Every head, small"),
      el("div", { class: "heads-grid" }, ...heads.map((h) => el("button", { type: "button", class: "head-pick", "data-head": h.key, "aria-pressed": String(h.key === this.chosen) },
        smallMap(h.map.values, { label: h.name, limit: 1, size: 96 }),
        el("span", {}, `${h.name}: back ${sig(h.previous, 2)}${h.induction === null ? "" : `, copy ${sig(h.induction, 2)}`}`)))),
    ];
    keepingFocus(this.results, () => this.results.replaceChildren(...parts));
    for (const button of this.results.querySelectorAll("[data-head]")) {
      button.addEventListener("click", () => {
        this.chosen = button.dataset.head;
        this.switchedOff = null;
        this.render();
      });
    }
    this.results.querySelector("#head-off").addEventListener("click", () => this.switchOff(chosen));
    if (this.switchedOff) this.showSwitchedOff();
  }

  /** A head's map at full size, the tokens on both axes, the cells one token back and just after each earlier place
   * of the query's token outlined. */
  figure(head, answer, { when = "" } = {}) {
    const targets = item(answer.case ?? answer, "induction_targets").values; // a lab's answer, or one side of What if?'s
    const back = head.map.values.slice(1).map((_, i) => [i + 1, i]);
    const after = targets.flatMap((row, i) => row.flatMap((v, j) => (v ? [[i, j]] : [])));
    const label = `${head.name} attention${when}`;
    const outlines = [{ ...MARKS.previous, name: `one ${this.thing} back`, cells: back },
      { ...MARKS.induction, name: "just after an earlier place", cells: after }];
    return el("figure", { class: "chart lab-heatmap head-full", "data-key": head.key },
      el("figcaption", {}, el("span", { class: "chart-title" }, label),
        el("span", { class: "chart-range" }, `back ${sig(head.previous, 3)}${head.induction === null ? "" : ` · copy ${sig(head.induction, 3)}`}`)),
      chartBox(`${label}: heatmap`, valueHeatmap(head.map.values, label, head.map.axes ?? answer.axes?.[head.key] ?? null, { limit: 1, cell: 18, outlines })));
  }

  /** The same input again with the head zeroed (What if?, on the lab's request), then what every head lost. */
  async switchOff(head) {
    const node = this.settings.head_modules[head.layer];
    const change = { node, action: "zero", head: head.head };
    const answer = await this.latest.run((busy) => postJson(this.settings.interventions, { endpoint: "runs", request: this.answer.request, interventions: [change] }, busy),
      `Reading the ${this.thing}s again without ${head.name}…`);
    if (!answer) return;
    this.setStatus(`Read again with ${head.name} switched off (${node}, head ${head.head}, zeroed).`);
    this.switchedOff = { head, answer };
    this.showSwitchedOff();
  }

  showSwitchedOff() {
    const { head, answer } = this.switchedOff;
    const [before, after] = ["before", "after"].map((when) => side(answer.items, when));
    const [headsBefore, headsAfter] = [before, after].map((c) => this.heads(c));
    // The later head that lost most of its copying, drawn with the head and without it.
    const hurt = headsAfter.map((h, k) => ({ h, k, lost: (headsBefore[k].induction ?? 0) - (h.induction ?? 0) }))
      .filter(({ h }) => h.layer > head.layer).sort((a, b) => b.lost - a.lost)[0];
    const losses = before.metrics.map((m, k) => [m.label, sig(m.value, 3), sig(after.metrics[k].value, 3)]);
    const score = (v) => (v === null ? "—" : sig(v, 3));
    const rows = headsBefore.map((b, k) => [b.name, score(b.previous), score(headsAfter[k].previous), score(b.induction), score(headsAfter[k].induction)]);
    const parts = [el("h3", {}, `Without ${head.name}`),
      table(["", "before", "after"], losses, `The loss with ${head.name} and without it`, { reflow: true }),
      table(["head", "back, before", "back, after", "copy, before", "copy, after"], rows, `Every head's scores with ${head.name} and without it`, { reflow: true })];
    if (!hurt) {
      parts.push(el("p", { class: "fine" }, `No head after ${head.name} reads what it writes, so every map stays as it was: a head switched off `
        + "still looks where it looked; what it no longer writes is missed by later layers and by the prediction alone."));
    } else {
      parts.push(el("div", { class: "lab-columns is-compare" },
        this.figure(headsBefore[hurt.k], before, { when: `, with ${head.name}` }),
        this.figure(hurt.h, after, { when: `, without ${head.name}` })));
    }
    keepingFocus(this.results, () => this.results.querySelector("#head-off-result").replaceChildren(...parts));
  }
}

/** What if?'s answer (its items, each before and after) as the case of one side: matrices, vectors and metrics in the
 * order the run gave them. */
function side(items, when) {
  const found = { matrices: [], vectors: [], metrics: [] };
  for (const [key, it] of Object.entries(items)) {
    // A matrix keeps the axes and a vector the names the server gave the item.
    if (it.kind === "metric") found.metrics.push({ key, label: it.label, value: it[when] });
    else if (it.kind === "matrix") found.matrices.push({ key, label: it.label, values: it[when], axes: it.axes });
    else found.vectors.push({ key, label: it.label, values: it[when], ...(it.names ? { names: it.names } : {}) });
  }
  return found;
}

/** The head that scores highest on `score` (null where no head has that score). */
function best(heads, score) {
  const scored = heads.filter((h) => h[score] !== null);
  return scored.length ? scored.reduce((a, b) => (b[score] > a[score] ? b : a)) : null;
}
