// Charts drawn as standalone SVG (colours as attributes), so that each one can be downloaded as is.

import { saveFile } from "./dom.js";
import { COLOUR, rgb } from "./palette.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const ZERO = rgb(COLOUR.zero); // lightest colour, at zero
const MINT = rgb(COLOUR.mint); // positive
const RUST = rgb(COLOUR.rust); // negative
const FONT = "system-ui, 'DejaVu Sans', sans-serif";

export function svgEl(name, attrs = {}, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

/**
 * Four significant digits, as the server's `sig` filter writes them: positional down to 1e-4 (0.246, 1234000,
 * 0.0001235) and scientific below it (5.626e-5, 1.2e-14), trailing zeros dropped. A test holds the two equal over
 * a table of values.
 */
export function sig(value, digits = 4) {
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return "0";
  const rounded = Number(value.toPrecision(digits));
  if (Math.abs(rounded) < 1e-4) {
    const [mantissa, exponent] = rounded.toExponential(digits - 1).split("e");
    return `${mantissa.replace(/\.?0+$/, "")}e${Number(exponent)}`;
  }
  const text = String(rounded);
  if (!text.includes("e")) return text;
  const magnitude = Math.floor(Math.log10(Math.abs(rounded)));
  if (magnitude < 0) return rounded.toFixed(Math.min(100, digits - 1 - magnitude)).replace(/\.?0+$/, "");
  return BigInt(Math.round(rounded)).toString();
}

/** A number as prose, bars and metric cards say it: sig(), except that one below 1e-4 (once rounded) is "about 0", as
 * the server's `prose` filter writes it (app/domain/numbers.py; a test holds the two equal). */
export function inProse(value, digits = 4) {
  const rounded = Number.isFinite(value) ? Number(value.toPrecision(digits)) : value;
  return rounded !== 0 && Math.abs(rounded) < 1e-4 ? "about 0" : sig(value, digits);
}

function mix(from, to, t) {
  const c = from.map((f, i) => Math.round(f + (to[i] - f) * t));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

/** Diverging scale: mint for positive, rust for negative, lightest at zero; `limit` maps to full colour. */
export function diverging(value, limit) {
  const t = limit > 0 ? Math.min(1, Math.abs(value) / limit) : 0;
  return mix(ZERO, value < 0 ? RUST : MINT, t);
}

/** Sequential scale for deviations: 0 is lightest; at or past 1 (the tolerance) it is rust. */
export function deviationColour(ratio) {
  if (!(ratio <= 1)) return mix(ZERO, RUST, 1);
  return mix(ZERO, MINT, Math.sqrt(ratio));
}

const LABEL_FONT = 12; // px: no chart text is drawn smaller, and charts are never scaled down (they scroll)
const CHAR = 7; // px: the width of one character at LABEL_FONT, near enough to size margins
// A grid of more cells than 20 x 20 is drawn as one image (rasterGrid), and its table is out of the page while closed.
export const LARGE_GRID = 400;
const LONGEST = 12; // characters of a token name shown on an axis; the full name is in the cell's title

function shorten(name) {
  return name.length > LONGEST ? `${name.slice(0, LONGEST - 1)}…` : name;
}

/** A cell's size: 34 px, smaller for wide matrices so that a phone scrolls less, never under 24. */
function cellSize(cols) {
  return Math.max(24, Math.min(34, Math.floor(300 / cols)));
}

/**
 * A heatmap with its axes and a legend. `axes` ({rows, columns}, each a list of {id, name}) labels rows and
 * columns with the tokens they stand for; without it, or without one of the two, they are numbered.
 * `colour(value)` picks a cell's fill; `legend` is [[label, colour], ...] drawn under the grid; `indices:
 * false` draws no axes at all.
 */
const PLANE = 480; // px across a declared plane's picture

export function heatmapSvg(values, { label, colour, legend = [], cell, describe = (v) => sig(v), indices: shown = true, axes = null, outlines = [] }) {
  const indices = shown && axes?.numbered !== false; // a picture of a plane has titles, no row and column numbers
  const rows = values.length;
  const cols = values[0].length;
  // A plane's picture is drawn at a picture's size (about 480 px), not at a size to read each cell's numbers by.
  const size = cell ?? (axes?.numbered === false ? Math.max(4, Math.floor(PLANE / Math.max(rows, cols))) : cellSize(cols));
  const rowText = (i) => (axes?.rows ? shorten(axes.rows[i].name) : String(i));
  const colText = (j) => (axes?.columns ? shorten(axes.columns[j].name) : String(j));
  const widest = (count, text) => Math.max(...Array.from({ length: count }, (_, k) => text(k).length)) * CHAR;
  const tilted = indices && widest(cols, colText) > size - 4; // column names that do not fit upright are tilted
  // Titled axes (an attention map's queries and keys) say what they are on a line each under the legend: below the
  // grid, they make a figure taller and never wider (two maps side by side stay so).
  const titles = shown && axes?.titles ? [`rows: ${axes.titles.rows}`, `columns: ${axes.titles.columns}`] : [];
  const left = indices ? widest(rows, rowText) + 12 : 0;
  const top = !indices ? 0 : tilted ? Math.ceil(widest(cols, colText) * 0.8) + 14 : 22;
  const right = tilted ? Math.ceil(colText(cols - 1).length * CHAR * 0.6) : 4; // the last tilted name leans right
  let width = left + cols * size + right;
  const height = top + rows * size + (legend.length ? 34 : 6) + titles.length * 16;
  const svg = svgEl("svg", {
    xmlns: SVG_NS, viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": label,
    "font-family": FONT, "font-size": LABEL_FONT,
  });
  svg.append(svgEl("title", {}, label));
  const named = (entry) => (entry.id === undefined ? entry.name : `${entry.name}, id ${entry.id}`);
  const where = (axis, list, k) => (list ? `${axis} ${k} (${named(list[k])})` : `${axis} ${k}`);
  for (let j = 0; indices && j < cols; j++) {
    const x = left + j * size + size / 2;
    svg.append(tilted
      ? svgEl("text", { x, y: top - 6, transform: `rotate(-50 ${x} ${top - 6})`, fill: COLOUR.inkSoft }, colText(j))
      : svgEl("text", { x, y: top - 8, "text-anchor": "middle", fill: COLOUR.inkSoft }, colText(j)));
  }
  const says = (i, j) => `${where("row", axes?.rows, i)}, ${where("column", axes?.columns, j)}: ${describe(values[i][j], i, j)}`;
  for (let i = 0; indices && i < rows; i++) {
    svg.append(svgEl("text", { x: left - 6, y: top + i * size + size / 2 + 4, "text-anchor": "end", fill: COLOUR.inkSoft }, rowText(i)));
  }
  if (rows * cols > LARGE_GRID) svg.append(rasterGrid(values, { x: left, y: top, size, colour, says }));
  else {
    values.forEach((row, i) => row.forEach((v, j) => {
      const rect = svgEl("rect", {
        x: left + j * size, y: top + i * size, width: size - 1, height: size - 1, fill: colour(v),
        "data-row": i, "data-col": j,
      });
      rect.append(svgEl("title", {}, says(i, j)));
      svg.append(rect);
    }));
  }
  // Cells a pattern names (a head's one-back diagonal, an induction stripe), outlined over the colours.
  for (const { cells, colour: stroke, dash, name } of outlines) {
    for (const [i, j] of cells) {
      svg.append(svgEl("rect", { x: left + j * size + 1, y: top + i * size + 1, width: size - 3, height: size - 3, fill: "none",
        stroke, "stroke-width": 2, "stroke-dasharray": dash, "pointer-events": "none", class: "cell-mark", "data-mark": name }));
    }
  }
  let x = left;
  const y = top + rows * size + 10;
  for (const [text, fill] of legend) {
    svg.append(svgEl("rect", { x, y, width: 14, height: 14, fill, stroke: COLOUR.cell }));
    svg.append(svgEl("text", { x: x + 18, y: y + 11, fill: COLOUR.ink }, text));
    x += 18 + text.length * CHAR + 12;
  }
  for (const { colour: stroke, dash, name } of outlines) {
    svg.append(svgEl("rect", { x: x + 1, y: y + 1, width: 12, height: 12, fill: "none", stroke, "stroke-width": 2, "stroke-dasharray": dash }));
    svg.append(svgEl("text", { x: x + 18, y: y + 11, fill: COLOUR.ink }, name));
    x += 18 + name.length * CHAR + 12;
  }
  width = Math.max(width, x); // the legend may be wider than a small grid
  titles.forEach((text, k) => {
    svg.append(svgEl("text", { x: left, y: y + (legend.length ? 24 : 0) + 14 + k * 16, fill: COLOUR.ink, class: "axis-title" }, text));
    width = Math.max(width, left + text.length * CHAR + 4);
  });
  svg.setAttribute("width", width);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  return svg;
}

/**
 * A large grid as one image, drawn as its cells' rectangles would be, whose title names the cell under the
 * pointer. A rectangle and a title per cell made a sampler's three 51 x 64 maps 20,000 elements, seconds of
 * layout for the browser and for a screen reader's tree; every value is in the table beside the chart.
 */
function rasterGrid(values, { x, y, size, colour, says }) {
  const rows = values.length;
  const cols = values[0].length;
  const canvas = document.createElement("canvas");
  const density = Math.min(2, Math.ceil(globalThis.devicePixelRatio || 1)); // sharp on a dense screen too
  canvas.width = cols * size * density;
  canvas.height = rows * size * density;
  const context = canvas.getContext("2d");
  context.scale(density, density);
  values.forEach((row, i) => row.forEach((v, j) => {
    context.fillStyle = colour(v);
    context.fillRect(j * size, i * size, size - 1, size - 1); // as a cell's rectangle is drawn, 1 px apart
  }));
  const image = svgEl("image", {
    x, y, width: cols * size, height: rows * size, href: canvas.toDataURL("image/png"), class: "raster-grid",
    "data-rows": rows, "data-cols": cols,
  });
  const title = svgEl("title", {}, says(0, 0));
  image.append(title);
  image.addEventListener("pointermove", (event) => {
    const box = image.getBoundingClientRect();
    const i = Math.min(rows - 1, Math.floor(((event.clientY - box.top) / box.height) * rows));
    const j = Math.min(cols - 1, Math.floor(((event.clientX - box.left) / box.width) * cols));
    title.textContent = says(Math.max(0, i), Math.max(0, j));
  });
  return image;
}

/** An image in greys, white at 0 and black at `max` (its largest value unless given), about `size` px wide. */
export function greySvg(image, { label, max = Math.max(...image.flat(), 1e-12), size = 72 }) {
  const rows = image.length;
  const cols = image[0].length;
  const pixel = Math.max(4, Math.floor(size / Math.max(rows, cols)));
  const svg = svgEl("svg", { xmlns: SVG_NS, viewBox: `0 0 ${cols * pixel} ${rows * pixel}`, width: cols * pixel, height: rows * pixel, role: "img", "aria-label": label });
  svg.append(svgEl("title", {}, label), ...greyPixels(image, { max, pixel }));
  return svg;
}

/** An image's pixels as squares of `pixel` px in greys (white at 0, black at `max`), from (x, y). */
export function greyPixels(image, { max, pixel, x = 0, y = 0 }) {
  return image.flatMap((row, i) => row.map((v, j) => {
    const grey = Math.round(255 * (1 - Math.min(1, Math.max(0, v) / max)));
    return svgEl("rect", { x: x + j * pixel, y: y + i * pixel, width: pixel, height: pixel, fill: `rgb(${grey}, ${grey}, ${grey})` });
  }));
}

/**
 * A coarse map drawn over the image it was computed from: the image in greys, and each cell of `values` laid
 * over the block of pixels it covers (the image's side divided by the map's), its colour the diverging
 * scale's at `limit`, half transparent at most so that the strokes show through.
 */
export function overlaySvg(image, values, { label, limit, size = 72 }) {
  const svg = greySvg(image, { label, size });
  const pixel = Number(svg.getAttribute("width")) / image[0].length;
  const blockRows = image.length / values.length;
  const blockCols = image[0].length / values[0].length;
  values.forEach((row, i) => row.forEach((v, j) => {
    const rect = svgEl("rect", {
      x: j * blockCols * pixel, y: i * blockRows * pixel, width: blockCols * pixel, height: blockRows * pixel,
      fill: diverging(v, limit), "fill-opacity": limit > 0 ? (0.75 * Math.min(1, Math.abs(v) / limit)).toFixed(3) : 0,
      stroke: COLOUR.cell, "stroke-width": 0.5, "data-row": i, "data-col": j,
    });
    rect.append(svgEl("title", {}, `row ${i}, column ${j}: ${sig(v)}`));
    svg.append(rect);
  }));
  return svg;
}

/** One of a group's small maps, on the group's `limit`: over the image `under` where given, else a heatmap
 * without axes (a map of any side drawn about `size` px wide). */
export function smallMap(values, { label, limit, under = null, size = 72, axes = null }) {
  if (under) return overlaySvg(under, values, { label, limit, size: size * 1.5 }); // larger: the drawing shows through
  // No axes drawn at this size; where the rows and columns have names, a cell's title says them.
  return heatmapSvg(values, { label, colour: (v) => diverging(v, limit), cell: Math.max(6, Math.round(size / values.length)), indices: false, axes });
}

/** The recorded attention-style heatmap: symmetric diverging scale around zero, per heatmap unless `limit` gives one
 * that several maps share (a map before and after a change); `axes` and `cell` as heatmapSvg's. */
export function valueHeatmap(values, label, axes = null, { limit = null, cell = undefined, outlines = [] } = {}) {
  const flat = values.flat().filter((v) => typeof v === "number");
  const scale = limit ?? Math.max(...flat.map(Math.abs));
  const lo = Math.min(...flat);
  const hi = Math.max(...flat);
  const legend = [["0", diverging(0, scale)], [`max ${sig(hi)}`, diverging(hi, scale)]];
  if (lo < 0) legend.unshift([`min ${sig(lo)}`, diverging(lo, scale)]);
  return heatmapSvg(values, { label, colour: (v) => diverging(v, scale), legend, axes, cell, outlines });
}

/** A horizontal bar chart on a given shared scale, its rows named by `names` where given, else numbered from `first`
 * (for download; the page shows HTML bars). */
export function barsSvg(values, max, label, { first = 0, names = null } = {}) {
  const row = 18;
  const barX = names ? Math.min(LONGEST, Math.max(...names.map((n) => n.length))) * CHAR + 12 : 34;
  const width = barX + 386;
  const barW = 280;
  const height = 26 + values.length * row;
  const svg = svgEl("svg", {
    xmlns: SVG_NS, viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": label,
    "font-family": FONT, "font-size": LABEL_FONT,
  });
  svg.append(svgEl("title", {}, label));
  svg.append(svgEl("text", { x: 0, y: 14, "font-weight": 600, fill: COLOUR.ink }, label));
  values.forEach((v, i) => {
    const y = 24 + i * row;
    svg.append(svgEl("text", { x: barX - 6, y: y + 11, "text-anchor": "end", fill: COLOUR.inkSoft }, names ? names[i].slice(0, LONGEST) : first + i));
    svg.append(svgEl("rect", { x: barX, y, width: barW, height: row - 5, fill: COLOUR.track }));
    svg.append(svgEl("rect", {
      x: barX, y, width: max > 0 ? (barW * Math.abs(v)) / max : 0, height: row - 5, fill: v < 0 ? COLOUR.rust : COLOUR.mint,
    }));
    svg.append(svgEl("text", { x: barX + barW + 6, y: y + 11, fill: COLOUR.ink }, inProse(v)));
  });
  return svg;
}

/** Round steps for an axis from `lo` to `hi`: about `count` of 1, 2 or 5 times a power of ten. */
function ticks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const found = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) found.push(Number(t.toPrecision(12)));
  return found;
}

/**
 * A line chart of a vector declared a curve: its values against their numbers from `first` (epochs, timesteps),
 * axes titled `x` and `y`, the y axis logarithmic where `log` (values at or below 0 are then left out).
 * `series` adds lines drawn on the same axes ([{ values, label, dashed }]), as a What if? draws before and after;
 * `extent` holds the x axis to that many values, so that a curve still growing (a training heard live) fills it.
 */
export function curveSvg(values, { label, x: xTitle, y: yTitle, log = false, first = 0, series = [], extent = 0, mark = null }) {
  const lines = [{ values, label: yTitle, dashed: false }, ...series];
  const width = 560;
  const height = 260;
  const left = 70;
  const right = 16;
  const top = 14;
  const bottom = 52;
  const shown = (v) => Number.isFinite(v) && (!log || v > 0);
  const all = lines.flatMap((line) => line.values.filter(shown));
  if (!all.length) all.push(log ? 1 : 0); // nothing heard yet: empty axes
  const scale = (v) => (log ? Math.log10(v) : v);
  let lo = Math.min(...all.map(scale));
  let hi = Math.max(...all.map(scale));
  if (!(hi > lo)) { lo -= 1; hi += 1; }
  const count = Math.max(extent, ...lines.map((line) => line.values.length));
  const px = (i) => left + (count > 1 ? (i / (count - 1)) * (width - left - right) : (width - left - right) / 2);
  const py = (v) => top + (1 - (scale(v) - lo) / (hi - lo)) * (height - top - bottom);
  const svg = svgEl("svg", {
    xmlns: SVG_NS, viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": label,
    "font-family": FONT, "font-size": LABEL_FONT,
  });
  svg.append(svgEl("title", {}, label));
  svg.append(svgEl("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, stroke: COLOUR.axis }));
  svg.append(svgEl("line", { x1: left, y1: top, x2: left, y2: height - bottom, stroke: COLOUR.axis }));
  for (const t of ticks(lo, hi, 4)) {
    const y = top + (1 - (t - lo) / (hi - lo)) * (height - top - bottom);
    svg.append(svgEl("line", { x1: left - 4, y1: y, x2: width - right, y2: y, stroke: COLOUR.grid }));
    svg.append(svgEl("text", { x: left - 6, y: y + 4, "text-anchor": "end", fill: COLOUR.inkSoft }, sig(log ? 10 ** t : t, 3)));
  }
  for (const t of ticks(0, count - 1, 6).filter((i) => Number.isInteger(i))) {
    svg.append(svgEl("text", { x: px(t), y: height - bottom + 16, "text-anchor": "middle", fill: COLOUR.inkSoft }, first + t));
  }
  svg.append(svgEl("text", { x: (left + width - right) / 2, y: height - 10, "text-anchor": "middle", fill: COLOUR.ink }, xTitle));
  svg.append(svgEl("text", {
    x: 14, y: (top + height - bottom) / 2, "text-anchor": "middle", fill: COLOUR.ink,
    transform: `rotate(-90 14 ${(top + height - bottom) / 2})`,
  }, log ? `${yTitle} (log scale)` : yTitle));
  const colours = [COLOUR.mint, COLOUR.rust, COLOUR.accent];
  lines.forEach((line, k) => {
    const points = line.values.map((v, i) => [i, v]).filter(([, v]) => shown(v));
    const path = svgEl("polyline", {
      points: points.map(([i, v]) => `${px(i).toFixed(1)},${py(v).toFixed(1)}`).join(" "), fill: "none",
      stroke: colours[k % colours.length], "stroke-width": 2, ...(line.dashed ? { "stroke-dasharray": "5 4" } : {}),
    });
    path.append(svgEl("title", {}, line.label));
    svg.append(path);
    if (points.length <= 60) {
      for (const [i, v] of points) {
        const dot = svgEl("circle", { cx: px(i), cy: py(v), r: 2.5, fill: colours[k % colours.length] });
        dot.append(svgEl("title", {}, `${xTitle} ${first + i}: ${sig(v)}`));
        svg.append(dot);
      }
    }
  });
  if (mark !== null) { // one point of the x axis marked: a lab's chosen round
    svg.append(svgEl("line", { x1: px(mark), y1: top, x2: px(mark), y2: height - bottom, stroke: COLOUR.accent, "stroke-width": 2, class: "curve-mark" }));
  }
  return svg;
}

/** Points, one per row of `points` ([x, y]), each coloured by its row and named by `names` (else its number), on
 * titled axes with round ticks; every point's title gives its values. */
export function scatterSvg(points, { label, x: xTitle, y: yTitle, names = null, arrows = false }) {
  // Arrows are directions: drawn from the origin on equal axes (a right angle looks like one) with the unit circle.
  const width = 420;
  const [left, right, top, bottom] = [64, arrows ? 72 : 20, 14, 48]; // room for a name beyond a tip at the right
  const height = arrows ? top + bottom + width - left - right : 360; // arrows: a square plot, one scale both ways
  const span = (values) => {
    let [lo, hi] = [Math.min(...values), Math.max(...values)];
    if (!(hi > lo)) [lo, hi] = [lo - 1, hi + 1];
    const pad = (hi - lo) * 0.08;
    return [lo - pad, hi + pad];
  };
  const reach = 1.15 * Math.max(1, ...points.flat().map(Math.abs)); // the unit circle and every arrow's tip
  const [xlo, xhi] = arrows ? [-reach, reach] : span(points.map((p) => p[0]));
  const [ylo, yhi] = arrows ? [-reach, reach] : span(points.map((p) => p[1]));
  const px = (v) => left + ((v - xlo) / (xhi - xlo)) * (width - left - right);
  const py = (v) => top + (1 - (v - ylo) / (yhi - ylo)) * (height - top - bottom);
  const svg = svgEl("svg", {
    xmlns: SVG_NS, viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": label,
    "font-family": FONT, "font-size": LABEL_FONT,
  });
  svg.append(svgEl("title", {}, label));
  for (const t of ticks(xlo, xhi, 5)) {
    svg.append(svgEl("line", { x1: px(t), y1: top, x2: px(t), y2: height - bottom, stroke: COLOUR.grid }));
    svg.append(svgEl("text", { x: px(t), y: height - bottom + 16, "text-anchor": "middle", fill: COLOUR.inkSoft }, sig(t, 3)));
  }
  for (const t of ticks(ylo, yhi, 5)) {
    svg.append(svgEl("line", { x1: left, y1: py(t), x2: width - right, y2: py(t), stroke: COLOUR.grid }));
    svg.append(svgEl("text", { x: left - 6, y: py(t) + 4, "text-anchor": "end", fill: COLOUR.inkSoft }, sig(t, 3)));
  }
  svg.append(svgEl("text", { x: (left + width - right) / 2, y: height - 10, "text-anchor": "middle", fill: COLOUR.ink, class: "axis-title" }, xTitle));
  const middle = (top + height - bottom) / 2;
  svg.append(svgEl("text", { x: 14, y: middle, "text-anchor": "middle", fill: COLOUR.ink, transform: `rotate(-90 14 ${middle})`, class: "axis-title" }, yTitle));
  if (arrows) {
    const r = px(1) - px(0);
    svg.append(svgEl("circle", { cx: px(0), cy: py(0), r, fill: "none", stroke: COLOUR.axis, "stroke-dasharray": "4 3", class: "unit-circle" }));
    points.forEach(([x, y], i) => {
      svg.append(svgEl("line", { x1: px(0), y1: py(0), x2: px(x), y2: py(y), stroke: COLOUR.categories[i % COLOUR.categories.length], "stroke-width": 3, class: "scatter-arrow" }));
    });
  }
  points.forEach(([x, y], i) => {
    const name = names ? names[i] : String(i);
    const colour = COLOUR.categories[i % COLOUR.categories.length];
    const point = svgEl("g", { class: "scatter-point", "data-row": i });
    if (arrows) { // the tip, its name just beyond it, away from the origin (one at the origin is named below)
      const along = Math.hypot(x, y);
      point.append(svgEl("circle", { cx: px(x), cy: py(y), r: 5, fill: colour }));
      if (along >= SHORT * reach) {
        point.append(svgEl("text", { x: px(x) + (14 * x) / along, y: py(y) - (14 * y) / along + 4, "text-anchor": x < 0 ? "end" : "start", fill: COLOUR.ink }, name));
      }
    } else {
      point.append(svgEl("circle", { cx: px(x), cy: py(y), r: 9, fill: colour, "fill-opacity": 0.85 }),
        svgEl("text", { x: px(x), y: py(y) + 4, "text-anchor": "middle", fill: COLOUR.paper, "font-weight": 700 }, name));
    }
    point.append(svgEl("title", {}, `${name}: ${xTitle} ${sig(x)}, ${yTitle} ${sig(y)}`));
    svg.append(point);
  });
  const short = arrows ? points.map(([x, y], i) => [Math.hypot(x, y), names ? names[i] : String(i)]).filter(([along]) => along < SHORT * reach) : [];
  if (short.length) {
    svg.append(svgEl("text", { x: left + 4, y: height - bottom - 6, fill: COLOUR.inkSoft, class: "scatter-short" }, `at the origin: ${short.map(([, name]) => name).join(", ")}`));
  }
  return svg;
}

const SHORT = 0.12; // an arrow this short of the plot's reach is a point at the origin: named in one line, not at its tip

export function downloadSvg(svg, filename) {
  const copy = svg.cloneNode(true);
  copy.setAttribute("xmlns", SVG_NS);
  saveFile(filename, `<?xml version="1.0" encoding="UTF-8"?>\n${new XMLSerializer().serializeToString(copy)}\n`, "image/svg+xml");
}

export function slugify(text) {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
}
