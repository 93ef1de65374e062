// The graph as a picture of one input: what every node computed on the recorded case the page shows or on the
// lab's last input (POST .../activations), drawn in its node (feature maps as small images, a sequence as a
// heatmap, a vector as bars, token ids as text), every edge labelled with the tensor's shape, and a selected
// node's output drawn full size in its details, its numbers on hover. The server chooses and bounds every drawing
// (app/compute/activations.py); this module only draws what it is sent.

import { barsSvg, diverging, sig, svgEl, valueHeatmap } from "./charts.js";
import { el, readJson, requireData } from "./dom.js";

/** A tensor's shape as it is said beside an edge: the batch's leading 1s dropped, `16×8×8`. */
export function shapeText(shape) {
  const shown = [...shape];
  while (shown.length > 1 && shown[0] === 1) shown.shift();
  return shown.length ? shown.join("×") : "a number";
}

/** The drawing's values as rows of its 2-D shape (a heatmap, one map). */
function rows(values, [height, width], offset = 0) {
  return Array.from({ length: height }, (_, i) => values.slice(offset + i * width, offset + (i + 1) * width));
}

function limitOf(drawing) {
  return Math.max(Math.abs(drawing.low ?? 0), Math.abs(drawing.high ?? 0)) || 1;
}

/** A grid of values as one small image (a canvas's PNG): many nodes' cells stay a handful of elements. */
function gridImage(grid, { x, y, w, h }, limit) {
  const rowsN = grid.length;
  const cols = grid[0]?.length ?? 0;
  if (!rowsN || !cols) return null;
  const canvas = document.createElement("canvas");
  canvas.width = cols;
  canvas.height = rowsN;
  const context = canvas.getContext("2d");
  grid.forEach((row, i) => row.forEach((v, j) => {
    context.fillStyle = v === null ? "#999" : diverging(v, limit);
    context.fillRect(j, i, 1, 1);
  }));
  const scale = Math.min(w / cols, h / rowsN);
  return svgEl("image", {
    x: x + (w - cols * scale) / 2, y: y + (h - rowsN * scale) / 2, width: cols * scale, height: rowsN * scale,
    href: canvas.toDataURL("image/png"), preserveAspectRatio: "none", class: "g-picture",
  });
}

/** What a node computed, drawn small inside `box` of the graph: SVG elements; token ids by `names`, where given. */
export function thumbnail(drawing, box, names = null) {
  const limit = limitOf(drawing);
  const { kind, values } = drawing;
  if (kind === "maps") {
    const [count, height, width] = drawing.shape;
    const gap = 3;
    const side = Math.min(box.h, (box.w - gap * (count - 1)) / count);
    const across = count * side + gap * (count - 1);
    return Array.from({ length: count }, (_, c) => gridImage(rows(values, [height, width], c * height * width),
      { x: box.x + (box.w - across) / 2 + c * (side + gap), y: box.y, w: side, h: box.h }, limit)).filter(Boolean);
  }
  if (kind === "heatmap") return [gridImage(rows(values, drawing.shape), box, limit)].filter(Boolean);
  if (kind === "bars") {
    const n = values.length;
    const width = box.w / n;
    const middle = (drawing.low ?? 0) < 0 ? box.y + box.h / 2 : box.y + box.h;
    const reach = (drawing.low ?? 0) < 0 ? box.h / 2 : box.h;
    return [svgEl("line", { x1: box.x, x2: box.x + box.w, y1: middle, y2: middle, class: "g-baseline" }),
      ...values.map((v, i) => {
        const size = v === null ? 0 : Math.min(1, Math.abs(v) / limit) * reach;
        const bar = svgEl("rect", { x: box.x + i * width + 0.5, y: v < 0 ? middle : middle - size, width: Math.max(1, width - 1), height: size, class: "g-bar" });
        // Its colour on its style (the CSSOM, which the page's policy allows): the node's own box takes the
        // stylesheet's selection and hover colours, a bar never.
        bar.style.fill = diverging(v ?? 0, limit);
        return bar;
      })];
  }
  return [svgEl("text", { x: box.x + box.w / 2, y: box.y + box.h / 2 + 4, "text-anchor": "middle", class: "g-value" }, ` ${drawnText(drawing, names)}`)]; // the space parts it from the op above in the node's text
}

/** The text a node's drawing writes (token ids, each by its name where `names` holds the lab's vocabulary; a
 * number), which its name says too; null for a picture. */
export function drawnText(drawing, names = null) {
  if (!["ids", "value"].includes(drawing?.kind)) return null;
  const named = (id) => (names && names[id] !== undefined ? names[id] : String(id));
  const text = drawing.kind === "ids" ? drawing.values.map(named).join(" ") : sig(drawing.values[0], 3);
  return text.length > 18 ? `${text.slice(0, 17)}…` : text;
}

/** What a node computed, in words: "6 maps of 8×8, from −1.9 to 2.4" (its output, whatever the drawing holds). */
export function drawingInWords(entry) {
  const drawing = entry.drawing;
  const shape = shapeText(entry.shape);
  if (!drawing) return `an output of ${shape}`;
  const range = drawing.low !== undefined ? `, from ${sig(drawing.low, 3)} to ${sig(drawing.high, 3)}` : "";
  const calls = entry.calls > 1 ? ` (the last of its ${entry.calls} calls)` : "";
  if (drawing.kind === "maps") {
    const count = entry.shape.length >= 3 ? entry.shape.at(-3) : drawing.shape[0];
    return `${count} map${count === 1 ? "" : "s"} of ${entry.shape.at(-2)}×${entry.shape.at(-1)}${range}${calls}`;
  }
  if (drawing.kind === "heatmap") return `${shape}: a row per position${range}${calls}`;
  if (drawing.kind === "bars") return `a vector of ${shape}${range}${calls}`;
  if (drawing.kind === "ids") return `${shape} integers (ids): ${drawing.values.slice(0, 12).join(" ")}${drawing.values.length > 12 ? " …" : ""}${calls}`;
  return `the number ${sig(drawing.values[0])}${calls}`;
}

/** What a full-size drawing leaves out of the output, said under it ("the first 16 of 64 maps, each averaged down
 * to 32×32"); null where it is the output whole. */
export function drawnOf(entry) {
  const drawing = entry.drawing;
  if (!drawing || !["maps", "heatmap", "bars"].includes(drawing.kind)) return null;
  const parts = [];
  if (drawing.kind === "maps" && drawing.shape[0] < entry.shape.at(-3)) parts.push(`the first ${drawing.shape[0]} of ${entry.shape.at(-3)} maps`);
  if (drawing.pooled) parts.push(`averaged down to ${drawing.shape.slice(-2).join("×")} to draw`);
  return parts.length ? `Drawn: ${parts.join(", ")}.` : null;
}

/** A node's output drawn full size, for its details: each map, the heatmap or the bars with its numbers on hover. */
export function fullDrawing(id, entry) {
  const drawing = entry.drawing;
  if (!drawing) return el("p", { class: "fine" }, `Too large to draw within this answer's bound: ${shapeText(entry.shape)}.`);
  const limit = limitOf(drawing);
  const label = `${id} on this input`;
  if (drawing.kind === "maps") {
    const [count, height, width] = drawing.shape;
    return el("div", { class: "node-maps" }, ...Array.from({ length: count }, (_, c) => el("figure", { class: "node-map" },
      valueHeatmap(rows(drawing.values, [height, width], c * height * width), `${label}, channel ${c}`, null, { limit, cell: Math.max(4, Math.floor(160 / width)) }),
      el("figcaption", { class: "fine" }, `channel ${c}`)))); // counted from 0, as its cells' rows and columns are
  }
  if (drawing.kind === "heatmap") {
    return valueHeatmap(rows(drawing.values, drawing.shape), label, null, { limit, cell: Math.max(3, Math.floor(300 / drawing.shape[1])) });
  }
  if (drawing.kind === "bars") return barsSvg(drawing.values.map((v) => v ?? 0), limit, label);
  return el("p", { class: "node-value" }, drawing.kind === "ids" ? drawing.values.join(" ") : sig(drawing.values[0]));
}

/** Asks the server what every node computed on one subject ({case} or {request, endpoint}), and a node's
 * output large; the latest subject's answer wins. */
export class Activations {
  constructor(url) {
    this.url = url;
    this.asked = null;
    this.answer = null;
    this.large = new Map(); // node -> its large answer, for the subject answered
  }

  async post(body) {
    const response = await fetch(this.url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    return requireData(response, await readJson(response));
  }

  /** Every node's drawing on the subject; null when a later subject was asked meanwhile. */
  async of(subject) {
    const key = JSON.stringify(subject);
    this.asked = key;
    const answer = await this.post(subject);
    if (key !== this.asked) return null;
    this.answer = answer;
    this.large = new Map();
    this.subject = subject;
    return answer;
  }

  /** One node's output drawn large, on the subject last answered. */
  async node(id) {
    if (!this.subject) return null;
    if (!this.large.has(id)) this.large.set(id, this.post({ ...this.subject, node: id }).then((a) => a.nodes[id]));
    return this.large.get(id);
  }
}
