// Charts drawn as standalone SVG (colours as attributes), so that each one can be downloaded as is.

import { saveFile } from "./dom.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const ZERO = [247, 247, 245]; // lightest colour, at zero
const MINT = [31, 138, 107]; // positive
const RUST = [180, 83, 42]; // negative
const FONT = "system-ui, 'DejaVu Sans', sans-serif";

export function svgEl(name, attrs = {}, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

/** Four significant digits, positional like the server's tables (0.00005626, 0.246). */
export function sig(value, digits = 4) {
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return "0";
  return String(Number(value.toPrecision(digits)));
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

/**
 * A heatmap with row/column indices and a legend.
 * `colour(value)` picks a cell's fill; `legend` is [[label, colour], ...] drawn under the grid.
 */
export function heatmapSvg(values, { label, colour, legend = [], cell = 40, describe = (v) => sig(v), indices = true }) {
  const rows = values.length;
  const cols = values[0].length;
  const left = indices ? 22 : 0;
  const top = indices ? 22 : 0;
  const width = left + cols * cell + 4;
  const height = top + rows * cell + (legend.length ? 34 : 6);
  const svg = svgEl("svg", {
    xmlns: SVG_NS, viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": label,
    "font-family": FONT, "font-size": 11,
  });
  svg.append(svgEl("title", {}, label));
  for (let j = 0; indices && j < cols; j++) {
    svg.append(svgEl("text", { x: left + j * cell + cell / 2, y: 14, "text-anchor": "middle", fill: "#4a5563" }, j));
  }
  values.forEach((row, i) => {
    if (indices) svg.append(svgEl("text", { x: 14, y: top + i * cell + cell / 2 + 4, "text-anchor": "middle", fill: "#4a5563" }, i));
    row.forEach((v, j) => {
      const rect = svgEl("rect", {
        x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1, fill: colour(v),
        "data-row": i, "data-col": j,
      });
      rect.append(svgEl("title", {}, `row ${i}, column ${j}: ${describe(v, i, j)}`));
      svg.append(rect);
    });
  });
  let x = left;
  const y = top + rows * cell + 10;
  for (const [text, fill] of legend) {
    svg.append(svgEl("rect", { x, y, width: 14, height: 14, fill, stroke: "#c8cfd6" }));
    const t = svgEl("text", { x: x + 18, y: y + 11, fill: "#1d2530" }, text);
    svg.append(t);
    x += 18 + text.length * 6.2 + 12;
  }
  return svg;
}

/** The recorded attention-style heatmap: symmetric diverging scale around zero, per heatmap. */
export function valueHeatmap(values, label) {
  const flat = values.flat();
  const limit = Math.max(...flat.map(Math.abs));
  const lo = Math.min(...flat);
  const hi = Math.max(...flat);
  const legend = [["0", diverging(0, limit)], [`max ${sig(hi)}`, diverging(hi, limit)]];
  if (lo < 0) legend.unshift([`min ${sig(lo)}`, diverging(lo, limit)]);
  return heatmapSvg(values, { label, colour: (v) => diverging(v, limit), legend });
}

/** A horizontal bar chart on a given shared scale (for download; the page shows HTML bars). */
export function barsSvg(values, max, label) {
  const row = 18;
  const width = 420;
  const barX = 34;
  const barW = 280;
  const height = 26 + values.length * row;
  const svg = svgEl("svg", {
    xmlns: SVG_NS, viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": label,
    "font-family": FONT, "font-size": 11,
  });
  svg.append(svgEl("title", {}, label));
  svg.append(svgEl("text", { x: 0, y: 14, "font-weight": 600, fill: "#1d2530" }, label));
  values.forEach((v, i) => {
    const y = 24 + i * row;
    svg.append(svgEl("text", { x: barX - 6, y: y + 11, "text-anchor": "end", fill: "#4a5563" }, i));
    svg.append(svgEl("rect", { x: barX, y, width: barW, height: row - 5, fill: "#eef1f3" }));
    svg.append(svgEl("rect", {
      x: barX, y, width: max > 0 ? (barW * Math.abs(v)) / max : 0, height: row - 5, fill: v < 0 ? "rgb(180, 83, 42)" : "rgb(31, 138, 107)",
    }));
    svg.append(svgEl("text", { x: barX + barW + 6, y: y + 11, fill: "#1d2530" }, sig(v)));
  });
  return svg;
}

export function downloadSvg(svg, filename) {
  const copy = svg.cloneNode(true);
  copy.setAttribute("xmlns", SVG_NS);
  saveFile(filename, `<?xml version="1.0" encoding="UTF-8"?>\n${new XMLSerializer().serializeToString(copy)}\n`, "image/svg+xml");
}

export function slugify(text) {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
}
