// The autoencoder lab: draw on a grid of grey levels; every edit is encoded and decoded on the server (the
// code's mean and spread, the reconstruction, the two terms of the loss). The code can then be moved by hand
// (a slider per dimension, or a click on the map of what the decoder draws across the plane), and the
// straight line between two drawings' codes walked, each code decoded by the server.

import { greyPixels, greySvg, sig, svgEl } from "../charts.js";
import { COLOUR } from "../palette.js";
import { editQuery, el } from "../dom.js";
import { getJson, item, LabPanel, linkInput, markPreset, metric, postJson, startFromLink, table } from "./common.js";
import { DrawingPad } from "./drawing.js";

const SETTLE_MS = 120; // edits closer together than this (a drag) share one run
const SLIDE_MS = 60; // slider moves closer together than this share one decode
const WALK_STEPS = 8;
const BIG = 120; // px: the drawing, its reconstruction and the decoded image
const TILE_PIXEL = 6; // px per pixel of each of the map's images

/** A code as the page writes it: "z = (0.55, -1.30)". */
function codeText(code) {
  return `z = (${code.map((z) => z.toFixed(2)).join(", ")})`;
}

export class Lab extends LabPanel {
  constructor(section) {
    super(section);
    this.sizes = this.settings.sizes;
    this.answerBox = section.querySelector("#code-answer");
    this.decodedBox = section.querySelector("#decoded");
    this.mapBox = section.querySelector("#latent-map");
    this.walkBox = section.querySelector("#walk-path");
    this.sliders = [...section.querySelectorAll(".latent-slider input")];
    this.pad = new DrawingPad(section, this.sizes, () => this.edited());
    this.decodes = 0;
    this.walks = 0;
    for (const button of section.querySelectorAll("[data-preset]")) {
      button.addEventListener("click", () => this.load(this.settings.presets.find((p) => p.id === button.dataset.preset)));
    }
    section.querySelector("#clear-drawing").addEventListener("click", () => this.pad.replace(this.pad.blank(), true));
    for (const slider of this.sliders) {
      slider.addEventListener("input", () => {
        clearTimeout(this.slideTimer);
        this.slideTimer = setTimeout(() => this.moveCode(this.sliders.map((s) => Number(s.value))), SLIDE_MS);
      });
    }
    // A code moved by hand (?code=z1,z2) and a walk's two ends (?walk_a=&walk_b=) live in the link; a new drawing's
    // code follows the drawing, so it drops the linked one.
    const params = new URLSearchParams(window.location.search);
    const code = (params.get("code") ?? "").split(",").map(Number);
    this.linkedCode = code.length === this.sliders.length && code.every(Number.isFinite) ? code : null;
    this.ends = ["a", "b"].map((end) => section.querySelector(`#walk-${end}`));
    const presets = this.settings.presets;
    if (presets.length) [this.ends[0].value, this.ends[1].value] = [presets[0].id, presets[presets.length - 1].id];
    this.ends.forEach((end, k) => {
      const linked = params.get(`walk_${"ab"[k]}`);
      if ([...end.options].some((option) => option.value === linked)) end.value = linked;
    });
    section.querySelector("#walk").addEventListener("click", () => {
      editQuery((query) => this.ends.forEach((end, k) => query.set(`walk_${"ab"[k]}`, end.value)));
      this.walk();
    });
    this.drawMap();
    this.walk();
    const start = startFromLink(presets, (params) => (params.has("drawing") && this.pad.linkable ? { image: this.pad.parse(params.get("drawing")) } : null));
    if (start.input) this.pad.replace(start.input.image, true);
    else if (start.preset) this.load(start.preset, start.problem);
    else this.run();
  }

  image(values, label, caption, size = BIG) {
    const svg = greySvg(values, { label, max: this.sizes.levels, size });
    return el("figure", { class: "code-image" }, svg, el("figcaption", {}, caption));
  }

  load(preset, problem = null) {
    this.preset = preset.id;
    this.presetLabel = preset.label;
    this.pad.replace(preset.request.image, false);
    markPreset(this.section, preset.id);
    linkInput({ drawing: this.pad.text() }, this.preset);
    this.run(problem);
  }

  edited() {
    this.preset = null;
    markPreset(this.section, null);
    if (this.pad.linkable) linkInput({ drawing: this.pad.text() });
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), SETTLE_MS);
  }

  // ---- the drawing's code and reconstruction

  async run(problem = null) {
    const body = { image: this.pad.image };
    if (this.preset) body.compare_with = this.preset;
    const answer = await this.latest.run((busy) => postJson(this.urls.runs, body, busy), "Encoding the drawing on the server…");
    if (!answer) return;
    this.ran("runs", answer);
    const c = answer.case;
    const mean = item(c, "mean").values;
    this.answered(answer, { problem, recorded: this.preset ? this.presetLabel : null });
    const parts = [];
    const sigma = item(c, "sigma").values;
    parts.push(
      el("div", { class: "code-images" },
        this.image(item(c, "image").values, "Your drawing", "Your drawing"),
        this.image(item(c, "reconstruction").values, item(c, "reconstruction").label, "Decoded from its code")),
      table(["dimension", "mean μ", "spread σ"], mean.map((m, d) => [`z${d + 1}`, sig(m), sig(sigma[d])]), "The code: the Gaussian the encoder gives the drawing"),
      el("dl", { class: "metrics", id: "code-terms" }, ...["reconstruction_term", "kl", "loss"].map((key) => metric(item(c, key).label, item(c, key).value))));
    this.answerBox.replaceChildren(...parts);
    this.own = mean;
    const linked = this.linkedCode;
    this.linkedCode = null;
    if (linked) { // the first run of a link that moved the code by hand
      this.moveCode(linked);
      return;
    }
    editQuery((query) => query.delete("code"));
    mean.forEach((m, d) => { this.sliders[d].value = String(Math.max(-3, Math.min(3, m))); });
    this.decode(this.sliders.map((s) => Number(s.value)));
  }

  /** A code the reader chose (a slider, a click on the map), as the sliders take it: decoded, and kept in the link. */
  moveCode(code) {
    code.forEach((z, d) => { this.sliders[d].value = String(z); });
    const shown = this.sliders.map((slider) => Number(slider.value));
    editQuery((query) => query.set("code", shown.join(",")));
    this.decode(shown);
  }

  // ---- moving the code

  async decode(code) {
    const mine = ++this.decodes;
    code.forEach((z, d) => { this.section.querySelector(`#latent-${d}-value`).value = z.toFixed(2); });
    this.code = code;
    this.placeMarks();
    let answer;
    try {
      answer = await postJson(this.urls.decode, { code });
    } catch (error) {
      if (mine === this.decodes) this.decodedBox.replaceChildren(el("p", { class: "notice" }, `The decoder failed: ${error.message}`));
      return;
    }
    if (mine !== this.decodes) return;
    const where = codeText(code);
    this.decodedBox.replaceChildren(this.image(answer.image, `What the decoder draws at ${where}`, `Decoded at ${where}`));
  }

  async drawMap() {
    let plane;
    try {
      plane = await getJson(this.urls.plane, {});
    } catch (error) {
      this.mapBox.replaceChildren(el("p", { class: "notice" }, `The map could not be drawn: ${error.message}`));
      return;
    }
    const { axis, images } = plane;
    const side = images[0][0].length * TILE_PIXEL; // one image's width in px
    const half = (axis[1] - axis[0]) / 2;
    this.span = [axis[0] - half, axis[axis.length - 1] + half];
    const size = axis.length * side;
    const svg = svgEl("svg", { viewBox: `0 0 ${size} ${size}`, width: size, height: size, role: "img", class: "latent-plane",
      "aria-label": `Map of the code plane: what the decoder draws at ${axis.length} × ${axis.length} codes from ${axis[0].toFixed(1)} to ${axis[axis.length - 1].toFixed(1)} on each axis; click to decode a point (the sliders do the same from the keyboard)` });
    svg.append(svgEl("title", {}, svg.getAttribute("aria-label")));
    images.forEach((row, i) => row.forEach((image, j) => {
      svg.append(...greyPixels(image, { max: this.sizes.levels, pixel: TILE_PIXEL, x: j * side, y: i * side }),
        svgEl("rect", { x: j * side, y: i * side, width: side, height: side, fill: "none", stroke: COLOUR.cell, "stroke-width": 0.5 }));
    }));
    this.ownMark = svgEl("circle", { r: 7, fill: "none", stroke: COLOUR.rust, "stroke-width": 2.5, class: "own-code" });
    this.codeMark = svgEl("circle", { r: 4, fill: COLOUR.mint, stroke: COLOUR.paper, "stroke-width": 1.5, class: "decoded-code" });
    svg.append(this.ownMark, this.codeMark);
    svg.addEventListener("click", (e) => {
      const box = svg.getBoundingClientRect();
      const [lo, hi] = this.span;
      const code = [lo + ((e.clientX - box.left) / box.width) * (hi - lo), hi - ((e.clientY - box.top) / box.height) * (hi - lo)];
      this.moveCode(code);
    });
    this.plane = svg;
    // The axes in the page's text beside the map, which narrows on a phone: drawn in it, they would shrink too.
    const [lo, hi] = this.span;
    const ticks = (values) => values.map((v) => el("span", {}, sig(v, 2)));
    this.mapBox.replaceChildren(el("div", { class: "plane-frame" },
      el("div", { class: "plane-y", "aria-hidden": "true" }, ...ticks([hi, 0, lo])),
      svg,
      el("div", { class: "plane-x", "aria-hidden": "true" }, ...ticks([lo, 0, hi])),
      el("p", { class: "plane-titles fine" }, "Across: z₁, left to right; up: z₂, bottom to top.")));
    this.placeMarks();
  }

  /** The ring at the drawing's code and the dot at the code decoded, where the map has been drawn. */
  placeMarks() {
    if (!this.plane) return;
    const [lo, hi] = this.span;
    const size = Number(this.plane.getAttribute("width"));
    const at = (mark, code) => {
      mark.setAttribute("visibility", code ? "visible" : "hidden");
      if (!code) return;
      mark.setAttribute("cx", (((code[0] - lo) / (hi - lo)) * size).toFixed(1));
      mark.setAttribute("cy", (((hi - code[1]) / (hi - lo)) * size).toFixed(1));
    };
    at(this.ownMark, this.own);
    at(this.codeMark, this.code);
  }

  // ---- the line between two drawings

  drawingOf(end) {
    const preset = this.settings.presets.find((p) => p.id === end.value);
    return preset ? preset.request.image : this.pad.image;
  }

  async walk() {
    const mine = ++this.walks;
    const names = this.ends.map((end) => end.selectedOptions[0].textContent);
    this.walkBox.setAttribute("aria-busy", "true");
    let path;
    try {
      path = await postJson(this.urls.between, { a: this.drawingOf(this.ends[0]), b: this.drawingOf(this.ends[1]), steps: WALK_STEPS });
    } catch (error) {
      if (mine === this.walks) this.walkBox.replaceChildren(el("p", { class: "notice" }, `The walk failed: ${error.message}`));
      return;
    } finally {
      if (mine === this.walks) this.walkBox.removeAttribute("aria-busy");
    }
    if (mine !== this.walks) return;
    const last = path.images.length - 1;
    this.walkBox.replaceChildren(
      el("p", { class: "fine", id: "walk-said" }, `From ${names[0]} (z = ${path.ends[0].map((z) => sig(z, 3)).join(", ")}) to ${names[1]} (z = ${path.ends[1].map((z) => sig(z, 3)).join(", ")}) in ${path.images.length} codes:`),
      el("div", { class: "code-path", tabindex: 0, role: "region", "aria-label": "The walk's codes, decoded" }, ...path.images.map((image, k) => this.image(image,
        `Step ${k} of ${last}: decoded at ${codeText(path.codes[k])}`, `t = ${(k / last).toFixed(2)}`, 64))));
  }
}
