// The reinforcement lab: the grid drawn from the policy's answer (each open cell filled by the value the agent
// expects there and marked with its greedy move), and an episode played on the server from a start the reader
// picks, greedy or exploring; the reader steps through its moves (or plays them) with the value of every move at
// each state.

import { diverging, sig, svgEl } from "../charts.js";
import { COLOUR } from "../palette.js";
import { el } from "../dom.js";
import { bars, item, LabPanel, LinkedStep, linkInput, markPreset, postJson, startFromLink, table } from "./common.js";

const CELL = 60; // px: one cell of the grid
const CODES = { wall: 1, goal: 2, pit: 3, start: 4 }; // a case's map, as the recipe codes it
const PLAY_MS = 450;
const SEED_MAX = 2147483647;

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.moves = this.settings.names;
    this.$ = (id) => section.querySelector(`#${id}`);
    this.linkedMove = new LinkedStep("move"); // an episode opens on its start, move 0
    this.$("rl-epsilon").addEventListener("input", () => { this.$("rl-epsilon-value").value = this.$("rl-epsilon").value; });
    this.$("rl-run").addEventListener("click", () => this.episode());
    this.$("rl-step").addEventListener("input", () => this.showMove(Number(this.$("rl-step").value)));
    this.$("rl-back").addEventListener("click", () => { this.stop(); this.showMove(this.move - 1); });
    this.$("rl-forward").addEventListener("click", () => { this.stop(); this.showMove(this.move + 1); });
    this.$("rl-play").addEventListener("click", () => this.play());
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.load(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    this.ready = this.drawPolicy();
    const episodes = this.settings.presets.filter((p) => p.endpoint === "episode");
    const start = startFromLink(episodes, (params) => this.linked(params));
    this.ready.then(() => (start.input ? this.fromLink(start.input) : start.preset && this.load(start.preset, start.problem)));
  }

  linked(params) {
    if (!params.has("start")) return null;
    const cell = params.get("start").split(",").map(Number);
    const epsilon = Number(params.get("epsilon") ?? 0);
    const seed = Number(params.get("seed") ?? 0);
    if (cell.length !== 2 || !cell.every(Number.isInteger)) throw new Error("start must be a row and a column, as 2,3");
    if (!(epsilon >= 0 && epsilon <= 1)) throw new Error("epsilon must be a number from 0 to 1");
    if (!Number.isInteger(seed) || seed < 0 || seed > SEED_MAX) throw new Error(`seed must be a whole number from 0 to ${SEED_MAX}`);
    return { start: cell, epsilon, seed };
  }

  fromLink(request) {
    this.set(request);
    this.episode();
  }

  set({ start, epsilon, seed }) {
    this.$("rl-start").value = start.join(",");
    this.$("rl-epsilon").value = String(epsilon);
    this.$("rl-epsilon-value").value = String(epsilon);
    this.$("rl-seed").value = String(seed);
  }

  load(preset, problem = null) {
    this.preset = preset;
    markPreset(this.section, preset.id);
    if (preset.endpoint === "policy") {
      this.drawPolicy(preset);
      return;
    }
    this.set(preset.request);
    this.episode(problem);
  }

  // ---- the policy: the grid itself

  async drawPolicy(preset = null) {
    let answer;
    try {
      answer = await postJson(this.urls.policy, preset ? { compare_with: preset.id } : {});
    } catch (error) {
      this.setStatus(`The policy could not be drawn: ${error.message}`, true);
      return;
    }
    const c = answer.case;
    this.map = item(c, "map").values;
    this.values = item(c, "values").values;
    this.best = item(c, "policy").values;
    const open = [];
    this.map.forEach((row, r) => row.forEach((code, col) => { if (![CODES.wall, CODES.goal, CODES.pit].includes(code)) open.push([r, col]); }));
    const select = this.$("rl-start");
    const chosen = select.value;
    select.replaceChildren(...open.map(([r, col]) => el("option", { value: `${r},${col}` }, `row ${r}, column ${col}${this.map[r][col] === CODES.start ? " (the start)" : ""}`)));
    if (chosen) select.value = chosen;
    this.drawGrid();
    if (preset) {
      this.ran("policy", answer);
      this.answered(answer, { recorded: preset.label });
      this.$("rl-results").replaceChildren(this.policyTable(c));
    }
  }

  policyTable(c) {
    const q = item(c, "q_values");
    const exact = item(c, "optimal");
    const rows = q.values.map((values, k) => [q.rows[k], ...values.map((v, a) => `${sig(v, 3)} (${sig(exact.values[k][a], 3)})`)]);
    return table(["cell", ...this.moves.map((m) => `Q(${m}) (Q*)`)], rows, "Every open cell: the network's Q(s, a), then the exact Q* by value iteration", { reflow: true });
  }

  /** The grid: walls, the goal and the pit, each open cell filled by its value and marked with its greedy move;
   * and, once an episode is shown, its path up to the move shown and the agent there. */
  drawGrid() {
    const size = this.map.length;
    const svg = svgEl("svg", { viewBox: `0 0 ${size * CELL} ${size * CELL}`, width: size * CELL, height: size * CELL, class: "rl-drawing", role: "group",
      "aria-label": "The grid: each open cell filled by the return the agent expects from it, with the move it would make; click an open cell to start an episode there" });
    const limit = Math.max(...this.values.flat().map(Math.abs), 1e-9);
    this.map.forEach((row, r) => row.forEach((code, c) => {
      const x = c * CELL;
      const y = r * CELL;
      const g = svgEl("g", { class: "rl-cell", "data-cell": `${r},${c}` });
      const kind = code === CODES.wall ? "wall" : code === CODES.goal ? "goal" : code === CODES.pit ? "pit" : "open";
      const fill = kind === "wall" ? COLOUR.inkSoft : kind === "goal" ? COLOUR.mint : kind === "pit" ? COLOUR.rust : diverging(this.values[r][c], limit);
      g.append(svgEl("rect", { x, y, width: CELL, height: CELL, fill, stroke: COLOUR.cell }));
      if (kind === "goal" || kind === "pit") {
        g.append(svgEl("text", { x: x + CELL / 2, y: y + CELL / 2 + 7, "text-anchor": "middle", "font-size": 20, fill: COLOUR.paper, "font-weight": 700 }, kind === "goal" ? "goal" : "pit"));
      } else if (kind === "open") {
        const move = this.best[r][c];
        g.append(svgEl("title", {}, `Row ${r}, column ${c}: expects ${sig(this.values[r][c], 3)}, would move ${this.moves[move]}`));
        g.append(svgEl("text", { x: x + CELL / 2, y: y + CELL / 2 + 9, "text-anchor": "middle", "font-size": 26, fill: COLOUR.ink }, this.settings.arrows[move] ?? ""));
        if (code === CODES.start) g.append(svgEl("rect", { x: x + 3, y: y + 3, width: CELL - 6, height: CELL - 6, fill: "none", stroke: COLOUR.accent, "stroke-width": 3 }));
        g.addEventListener("click", () => {
          this.$("rl-start").value = `${r},${c}`;
          this.episode();
        });
      }
      svg.append(g);
    }));
    if (this.shown) {
      const centre = ([r, c]) => `${c * CELL + CELL / 2},${r * CELL + CELL / 2}`;
      const cells = this.shown.cells.slice(0, this.move + 1);
      // The path and the agent are drawn over the cells: a click on a cell under them still starts an episode there.
      svg.append(svgEl("polyline", { points: cells.map(centre).join(" "), fill: "none", stroke: COLOUR.accent, "stroke-width": 4, "stroke-linecap": "round", "stroke-linejoin": "round", "pointer-events": "none", class: "rl-path" }));
      const [r, c] = cells[cells.length - 1];
      svg.append(svgEl("circle", { cx: c * CELL + CELL / 2, cy: r * CELL + CELL / 2, r: CELL / 5, fill: COLOUR.accent, stroke: COLOUR.paper, "stroke-width": 3, "pointer-events": "none", class: "rl-agent" }));
    }
    this.$("rl-grid").replaceChildren(svg);
  }

  // ---- an episode

  async episode(problem = null) {
    const start = this.$("rl-start").value.split(",").map(Number);
    const epsilon = Number(this.$("rl-epsilon").value);
    const seed = Number(this.$("rl-seed").value);
    if (!Number.isInteger(seed) || seed < 0 || seed > SEED_MAX) {
      this.setStatus(`The seed must be a whole number from 0 to ${SEED_MAX}.`, true);
      return;
    }
    const request = { start, epsilon, seed };
    const p = this.preset;
    const preset = p && p.endpoint === "episode" && p.request.start.join() === start.join() && p.request.epsilon === epsilon && p.request.seed === seed ? p : null;
    markPreset(this.section, preset?.id ?? null);
    linkInput({ start: start.join(","), epsilon, seed }, preset?.id);
    const answer = await this.latest.run((busy) => postJson(this.urls.episode, { ...request, ...(preset ? { compare_with: preset.id } : {}) }, busy), "Playing the episode on the server…");
    if (!answer) return;
    this.ran("episode", answer);
    const c = answer.case;
    const actions = item(c, "actions").values;
    const cells = item(c, "cells").values;
    this.shown = { cells, actions, q: item(c, "q_values").values, explored: item(c, "explored").values, rewards: item(c, "rewards").values };
    this.answered(answer, { problem, recorded: preset?.label ?? null });
    this.$("rl-results").replaceChildren(
      table(["move", "at", ...this.moves.map((m) => `Q(${m})`), "made", "paid"], actions.map((a, k) => [
        String(k + 1), `(${cells[k].join(", ")})`, ...this.shown.q[k].map((v) => sig(v, 3)),
        `${this.settings.arrowed[a]}${this.shown.explored[k] ? " (random)" : ""}`, sig(this.shown.rewards[k], 2)]), "Every move of the episode", { reflow: true }));
    this.stop();
    const slider = this.$("rl-step");
    slider.max = String(actions.length);
    this.$("rl-steps").hidden = false;
    this.showMove(this.linkedMove.opening(0, actions.length));
  }

  showMove(k) {
    const { cells, actions, q, explored, rewards } = this.shown;
    this.move = Math.max(0, Math.min(actions.length, k));
    this.$("rl-step").value = String(this.move);
    this.linkedMove.write(this.move, 0);
    this.drawGrid();
    const [r, c] = cells[this.move];
    if (this.move < actions.length) {
      const a = actions[this.move];
      this.$("rl-where").textContent = `Move ${this.move + 1} of ${actions.length}, at row ${r}, column ${c}: ${explored[this.move] ? "a random move" : "the best move"}, ${this.settings.arrowed[a]}, which pays ${sig(rewards[this.move], 2)}.`;
      const max = Math.max(...q[this.move].map(Math.abs));
      this.$("rl-q").replaceChildren(el("p", { class: "fine" }, "Q(s, a) of each move here:"), bars(q[this.move], this.moves, max));
    } else {
      this.$("rl-where").textContent = `The end, after ${actions.length} moves, at row ${r}, column ${c}.`;
      this.$("rl-q").replaceChildren();
    }
  }

  play() {
    if (this.timer) {
      this.stop();
      return;
    }
    if (this.move >= this.shown.actions.length) this.showMove(0);
    this.$("rl-play").setAttribute("aria-pressed", "true");
    this.$("rl-play").textContent = "Pause";
    this.$("rl-where").setAttribute("aria-live", "off");
    this.timer = setInterval(() => {
      if (this.move >= this.shown.actions.length) this.stop();
      else this.showMove(this.move + 1);
    }, PLAY_MS);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
    this.$("rl-play").setAttribute("aria-pressed", "false");
    this.$("rl-play").textContent = "Play";
    this.$("rl-where").setAttribute("aria-live", "polite");
  }
}
