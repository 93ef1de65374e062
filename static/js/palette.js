// The colours charts draw with, read from site.css's custom properties (:root): the one place every colour of the
// page is set. Charts are standalone SVG (each downloadable as it is), so they carry the values, not var().

const style = getComputedStyle(document.documentElement);
const read = (name) => style.getPropertyValue(`--${name}`).trim();

export const COLOUR = Object.freeze({
  ink: read("ink"),
  inkSoft: read("ink-soft"),
  paper: read("paper"),
  mint: read("mint"),
  mintDeep: read("mint-deep"),
  rust: read("rust"),
  rustSoft: read("rust-soft"),
  rustDeep: read("rust-deep"),
  accent: read("accent"),
  zero: read("chart-zero"),
  grid: read("chart-grid"),
  axis: read("chart-axis"),
  cell: read("chart-cell"),
  track: read("chart-track"),
  // Ten hues told apart by most readers, for points that belong to different classes (a digit's codes).
  categories: Object.freeze(read("chart-categories").split(/\s+/)),
});

/** A "#rrggbb" colour as [r, g, b], for a scale that mixes two colours. */
export function rgb(hex) {
  const n = Number.parseInt(hex.slice(1), 16);
  return [n >> 16, (n >> 8) & 255, n & 255];
}
