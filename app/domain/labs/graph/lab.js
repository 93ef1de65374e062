// The graph lab: the graph drawn with every node coloured by the group the model places it in; a link added or
// removed (two clicks on the drawing, or the two menus and a button) or another node given, and the server trains
// the model again from its seed on the graph as it stands. The answer: every node's probability of each group,
// its embedding after the first layer, the normalised adjacency and the training curve.

import { curveSvg, diverging, sig, svgEl, valueHeatmap } from "../charts.js";
import { COLOUR } from "../palette.js";
import { chartBox, el } from "../dom.js";
import { folded, item, LabPanel, linkInput, markPreset, postJson, startFromLink, table } from "./common.js";

const MARGIN = 0.08; // around the layout's extent, in its units: room for the nodes at its edge
const NODE = 0.055; // a node's radius, in the layout's units
const LABEL = 0.05; // a node's number, in the layout's units (about 12 px where the drawing is 560 px wide)

const APART = 2.3 * NODE; // the least distance between two nodes' centres as drawn: no node hides another
const SPREAD_ROUNDS = 60;

/**
 * The layout as drawn: the recipe's positions (y up), each pair of nodes closer than APART pushed apart along the line
 * between them, half the shortfall each, round after round: a picture in which no node hides another, moved as little
 * as that takes. Deterministic: the same layout draws the same way.
 */
function spread(layout) {
  const at = layout.map(([x, y]) => [x, -y]);
  for (let round = 0; round < SPREAD_ROUNDS; round++) {
    let moved = false;
    for (let a = 0; a < at.length; a++) {
      for (let b = a + 1; b < at.length; b++) {
        let [dx, dy] = [at[b][0] - at[a][0], at[b][1] - at[a][1]];
        let d = Math.hypot(dx, dy);
        if (d >= APART) continue;
        if (d < 1e-9) [dx, dy, d] = [1, 0, 1]; // one on top of another: apart along x
        const push = (APART - d) / 2 / d;
        at[a][0] -= dx * push; at[a][1] -= dy * push;
        at[b][0] += dx * push; at[b][1] += dy * push;
        moved = true;
      }
    }
    if (!moved) break;
  }
  return at;
}

/** A link's key, the same either way round. */
function key(a, b) {
  return a < b ? `${a}-${b}` : `${b}-${a}`;
}

/** Links as the URL writes them: "8-33,1-20". */
function written(pairs) {
  return pairs.map(([a, b]) => `${a}-${b}`).join(",");
}

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.names = this.settings.names;
    this.words = this.settings.words;
    this.classes = this.settings.sizes.classes;
    this.$ = (id) => section.querySelector(`#${id}`);
    const presets = this.settings.presets;
    this.recorded = presets[0]?.request ?? { edges: [], given: [...Array(this.classes).keys()] };
    this.base = new Set(this.recorded.edges.map(([a, b]) => key(a, b)));
    this.edges = new Map(this.recorded.edges.map(([a, b]) => [key(a, b), [a, b]]));
    this.given = [...this.recorded.given];
    this.picked = null;
    for (const end of ["a", "b"]) this.$(`link-${end}`).addEventListener("change", () => this.labelToggle());
    this.$("link-b").value = "1";
    this.$("link-toggle").addEventListener("click", () => this.toggle(Number(this.$("link-a").value), Number(this.$("link-b").value)));
    for (let k = 0; k < this.classes; k++) {
      this.$(`given-${k}`).addEventListener("change", () => this.give(k, Number(this.$(`given-${k}`).value)));
    }
    this.$("graph-reset").addEventListener("click", () => { if (presets[0]) this.load(presets[0]); });
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.load(presets.find((p) => p.id === button.dataset.preset)));
    }
    const start = startFromLink(presets, (params) => this.linked(params));
    if (start.input) this.edit(start.input);
    else if (start.preset) this.load(start.preset, start.problem);
  }

  // ---- the graph as edited, in the URL

  /** The links a URL adds to and cuts from the recorded graph, and the nodes it gives; null without any. */
  linked(params) {
    if (!["add", "cut", "given"].some((name) => params.has(name))) return null;
    const members = this.names.length;
    const pairs = (name) => (params.get(name) || "").split(",").filter(Boolean).map((text) => {
      const pair = text.split("-").map(Number);
      if (pair.length !== 2 || !pair.every((m) => Number.isInteger(m) && m >= 0 && m < members) || pair[0] === pair[1]) {
        throw new Error(`${name} must be links written a-b between two different ${this.words.thing}s 0 to ${members - 1}`);
      }
      return pair;
    });
    const given = params.has("given") ? params.get("given").split(",").map(Number) : this.recorded.given;
    if (given.length !== this.classes || !given.every((m) => Number.isInteger(m) && m >= 0 && m < members) || new Set(given).size !== given.length) {
      throw new Error(`given must be ${this.classes} different ${this.words.thing}s 0 to ${members - 1}`);
    }
    return { add: pairs("add"), cut: pairs("cut"), given };
  }

  edit({ add, cut, given }) {
    for (const [a, b] of cut) this.edges.delete(key(a, b));
    for (const [a, b] of add) this.edges.set(key(a, b), [a, b]);
    this.given = given;
    this.run();
  }

  load(preset, problem = null) {
    this.preset = preset;
    this.edges = new Map(preset.request.edges.map(([a, b]) => [key(a, b), [a, b]]));
    this.given = [...preset.request.given];
    this.run(problem);
  }

  // ---- changes

  labelToggle() {
    const [a, b] = ["a", "b"].map((end) => Number(this.$(`link-${end}`).value));
    this.$("link-toggle").textContent = this.edges.has(key(a, b)) ? "Remove the link" : "Add the link";
  }

  toggle(a, b) {
    if (a === b) {
      this.setStatus(`A link joins two different ${this.words.thing}s: pick another.`, true);
      return;
    }
    const k = key(a, b);
    if (this.edges.has(k)) this.edges.delete(k);
    else this.edges.set(k, [Math.min(a, b), Math.max(a, b)]);
    this.changed();
  }

  give(k, member) {
    const other = this.given.indexOf(member);
    if (other >= 0 && other !== k) {
      this.$(`given-${k}`).value = String(this.given[k]);
      this.setStatus(`${this.names[member]} is already given for another ${this.words.group}: pick another ${this.words.thing}.`, true);
      return;
    }
    this.given[k] = member;
    this.changed();
  }

  /** A node clicked on the drawing: the first end of a link, then the second, which adds or removes it. */
  pick(member) {
    if (this.picked === null || this.picked === member) {
      this.picked = this.picked === member ? null : member;
      this.$("link-a").value = String(member);
      this.labelToggle();
      this.markPicked();
      if (this.picked !== null) this.setStatus(`${this.names[member]} picked: click another ${this.words.thing} to add or remove the link between them.`);
      return;
    }
    const first = this.picked;
    this.picked = null;
    this.$("link-b").value = String(member);
    this.toggle(first, member);
  }

  markPicked() {
    for (const node of this.$("graph-canvas").querySelectorAll(".graph-node")) node.classList.toggle("is-picked", Number(node.dataset.member) === this.picked);
  }

  changed() {
    this.preset = null;
    this.run();
  }

  async run(problem = null) {
    const edges = [...this.edges.values()];
    const unchanged = this.preset && edges.length === this.preset.request.edges.length
      && this.preset.request.given.every((m, k) => m === this.given[k]);
    const preset = unchanged ? this.preset : null;
    markPreset(this.section, preset?.id ?? null);
    const added = edges.filter(([a, b]) => !this.base.has(key(a, b)));
    const cut = this.recorded.edges.filter(([a, b]) => !this.edges.has(key(a, b)));
    linkInput({ add: added.length ? written(added) : null, cut: cut.length ? written(cut) : null, given: this.given.join(",") }, preset?.id);
    for (let k = 0; k < this.classes; k++) this.$(`given-${k}`).value = String(this.given[k]);
    this.labelToggle();
    const body = { edges, given: this.given, ...(preset ? { compare_with: preset.id } : {}) };
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, body, busy), `Training the model on ${edges.length} links on the server…`);
    if (!answer) return;
    this.ran("runs", answer);
    this.draw(answer, preset, problem);
  }

  // ---- the answer

  draw(answer, preset, problem) {
    const c = answer.case;
    const probabilities = item(c, "probabilities");
    const groups = probabilities.columns;
    const predicted = item(c, "predicted").values;
    const sides = item(c, "sides").values;
    const given = item(c, "given").values;
    groups.forEach((name, k) => { this.$(`given-${k}-name`).textContent = `${name}:`; });
    const { thing, group } = this.words;
    this.answered(answer, { problem, recorded: preset?.label ?? null });
    this.$("graph-canvas").querySelector(".graph-figure")?.remove();
    const swatch = (lean) => {
      const box = svgEl("svg", { width: 14, height: 14, class: "graph-swatch", "aria-hidden": "true" });
      box.append(svgEl("rect", { width: 14, height: 14, fill: diverging(lean, 1), stroke: COLOUR.inkSoft }));
      return box;
    };
    this.$("graph-canvas").prepend(el("figure", { class: "graph-figure" },
      this.drawing(item(c, "layout").values, item(c, "edges").values, probabilities.values, predicted, sides, given, groups),
      el("figcaption", { class: "graph-legend" }, swatch(-1), ` ${groups[0]} `, swatch(1), ` ${groups[groups.length - 1]}`,
        "; paler: less sure. Blue links were added, dashed ones removed.")));
    const rows = probabilities.values.map((p, m) => [
      this.names[m], given.includes(m) ? `given: ${groups[given.indexOf(m)]}` : "", groups[sides[m]],
      ...p.map((v) => sig(v, 3)), groups[predicted[m]], predicted[m] === sides[m] ? "yes" : "no"]);
    const hidden = item(c, "hidden");
    const normalised = item(c, "normalised");
    const named = (names) => names.map((name) => ({ name }));
    const loss = item(c, "training_loss");
    this.$("graph-results").replaceChildren(
      table([thing, "given", "joined", ...groups.map((g) => `P(${g})`), "placed", "right"], rows, `Every ${thing}: the ${group} it joined and where the model places it`, { reflow: true }),
      folded("embedding", `Each ${thing}'s embedding after the first layer (heatmap)`,
        chartBox(hidden.label, valueHeatmap(hidden.values, hidden.label, { rows: named(hidden.rows), columns: named(hidden.columns) }))),
      folded("adjacency", "The normalised adjacency the layers mix through (heatmap)",
        chartBox(normalised.label, valueHeatmap(normalised.values, normalised.label, { rows: named(normalised.rows), columns: named(normalised.columns) }))),
      ...(loss ? [el("h3", {}, "Training"), chartBox(loss.label, curveSvg(loss.values, { label: loss.label, x: "Epoch", y: "Cross entropy", log: true, first: 1 }))] : []));
  }

  /** The graph: links as lines (added ones marked, cut ones of the recorded graph dashed), each node filled by
   * the model's group, ringed where given, dashed where placed on a group other than its own. */
  drawing(layout, edges, probabilities, predicted, sides, given, groups) {
    const { thing, group } = this.words;
    const placed = spread(layout); // y down, as the picture is drawn
    const xs = placed.map(([x]) => x);
    const ys = placed.map(([, y]) => y);
    const [left, top] = [Math.min(...xs) - MARGIN, Math.min(...ys) - MARGIN];
    const [width, height] = [Math.max(...xs) + MARGIN - left, Math.max(...ys) + MARGIN - top];
    const svg = svgEl("svg", { viewBox: `${left} ${top} ${width} ${height}`, class: "graph-drawing", role: "group",
      "aria-label": `The graph: ${layout.length} ${thing}s and ${edges.length} links, each ${thing} filled by the ${group} the model places it in. Click two ${thing}s to add or remove a link; the menus below do the same.` });
    const at = (m) => placed[m];
    const line = ([a, b], cls) => {
      const [[x1, y1], [x2, y2]] = [at(a), at(b)];
      return svgEl("line", { x1, y1, x2, y2, class: cls });
    };
    const present = new Set(edges.map(([a, b]) => key(a, b)));
    for (const [a, b] of this.recorded.edges) if (!present.has(key(a, b))) svg.append(line([a, b], "graph-link is-cut"));
    for (const pair of edges) svg.append(line(pair, this.base.has(key(...pair)) ? "graph-link" : "graph-link is-added"));
    layout.forEach((_, m) => {
      const [x, y] = at(m);
      const p = probabilities[m];
      const lean = p.length === 2 ? p[1] - p[0] : (predicted[m] ? 1 : -1) * Math.max(...p);
      const wrong = predicted[m] !== sides[m];
      const node = svgEl("g", { class: `graph-node${given.includes(m) ? " is-given" : ""}${wrong ? " is-wrong" : ""}`, "data-member": m });
      node.append(
        svgEl("title", {}, `${this.names[m]}: placed on ${groups[predicted[m]]} (${sig(Math.max(...p), 3)}), joined ${groups[sides[m]]}${given.includes(m) ? ", given" : ""}`),
        svgEl("circle", { cx: x, cy: y, r: NODE, fill: diverging(lean, 1) }),
        svgEl("text", { x, y: y + LABEL * 0.35, "font-size": LABEL, "text-anchor": "middle", class: "node-label" }, String(m)));
      node.addEventListener("click", () => this.pick(m));
      svg.append(node);
    });
    return svg;
  }
}
