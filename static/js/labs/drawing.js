// The drawing pad the image labs share: a grid of grey levels drawn with the mouse, by touch or with the
// keyboard (one tab stop, arrow keys within), and the drawing as one character per cell in a link.

import { el } from "../dom.js";

const DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"; // a grey level as one character of a link
const LINKED_CELLS = 1024; // a drawing with more cells than this is too long for a link and stays out of it

export class DrawingPad {
  /** `section` holds #draw-grid, #ink, #ink-value and the draw/erase radios; `onEdit()` follows every change
   * the reader makes (not `show`). */
  constructor(section, { rows, cols, levels }, onEdit) {
    Object.assign(this, { section, rows, cols, levels, onEdit });
    this.grid = section.querySelector("#draw-grid");
    this.ink = section.querySelector("#ink");
    this.ink.addEventListener("input", () => { section.querySelector("#ink-value").value = this.ink.value; });
    this.linkable = rows * cols <= LINKED_CELLS && levels < DIGITS.length;
    this.image = this.blank();
    this.build();
  }

  blank() {
    return Array.from({ length: this.rows }, () => Array(this.cols).fill(0));
  }

  /** The drawing as one character per cell, rows separated by dots ("00a0.0g00"), or null where it is too large. */
  text() {
    return this.linkable ? this.image.map((row) => row.map((v) => DIGITS[v]).join("")).join(".") : null;
  }

  /** A drawing from its text (as `text` writes it); an Error says what is wrong with it. */
  parse(text) {
    const image = text.split(".").map((row) => [...row].map((ch) => DIGITS.indexOf(ch)));
    if (image.length !== this.rows || image.some((row) => row.length !== this.cols || row.some((v) => v < 0 || v > this.levels))) {
      throw new Error(`drawing must be ${this.rows} rows of ${this.cols} levels from 0 to ${DIGITS[this.levels]}`);
    }
    return image;
  }

  build() {
    this.grid.style.setProperty("--cols", String(this.cols));
    this.cells = [];
    for (let r = 0; r < this.rows; r++) {
      const row = el("div", { role: "row", class: "draw-row" });
      this.cells.push([]);
      for (let c = 0; c < this.cols; c++) {
        const cell = el("div", { role: "gridcell", class: "draw-cell", tabindex: r === 0 && c === 0 ? "0" : "-1", "data-row": r, "data-col": c });
        this.cells[r].push(cell);
        row.append(cell);
      }
      this.grid.append(row);
    }
    this.grid.addEventListener("pointerdown", (e) => {
      const cell = e.target.closest(".draw-cell");
      if (!cell || e.button > 0) return;
      e.preventDefault(); // no text selection or scrolling while drawing
      this.grid.setPointerCapture(e.pointerId);
      this.drawing = true;
      this.moveTo(Number(cell.dataset.row), Number(cell.dataset.col));
      this.paint(cell);
    });
    this.grid.addEventListener("pointermove", (e) => {
      if (!this.drawing) return;
      const cell = document.elementFromPoint(e.clientX, e.clientY)?.closest(".draw-cell");
      if (cell && this.grid.contains(cell)) this.paint(cell);
    });
    for (const end of ["pointerup", "pointercancel", "lostpointercapture"]) {
      this.grid.addEventListener(end, () => { this.drawing = false; });
    }
    this.grid.addEventListener("keydown", (e) => this.key(e));
    this.show();
  }

  /** Roving focus: the grid is one tab stop, and the arrow keys move within it. */
  moveTo(r, c, focus = false) {
    const cell = this.cells[r][c];
    for (const row of this.cells) for (const other of row) other.tabIndex = other === cell ? 0 : -1;
    if (focus) cell.focus();
  }

  key(e) {
    const cell = e.target.closest(".draw-cell");
    if (!cell) return;
    const r = Number(cell.dataset.row);
    const c = Number(cell.dataset.col);
    const moves = { ArrowUp: [r - 1, c], ArrowDown: [r + 1, c], ArrowLeft: [r, c - 1], ArrowRight: [r, c + 1], Home: [r, 0], End: [r, this.cols - 1] };
    const level = this.image[r][c];
    const ink = Number(this.ink.value);
    const levels = { " ": level === ink ? 0 : ink, Enter: level === ink ? 0 : ink, "+": level + 1, "=": level + 1, "-": level - 1, Delete: 0, Backspace: 0 };
    if (e.key in moves) {
      const [nr, nc] = moves[e.key];
      if (nr >= 0 && nr < this.rows && nc >= 0 && nc < this.cols) this.moveTo(nr, nc, true);
    } else if (e.key in levels) {
      this.set(r, c, Math.max(0, Math.min(this.levels, levels[e.key])));
    } else {
      return;
    }
    e.preventDefault();
  }

  paint(cell) {
    const erase = this.section.querySelector('input[name="draw-tool"]:checked').value === "erase";
    this.set(Number(cell.dataset.row), Number(cell.dataset.col), erase ? 0 : Number(this.ink.value));
  }

  set(r, c, level) {
    if (this.image[r][c] === level) return;
    this.image = this.image.map((row, i) => (i === r ? row.map((v, j) => (j === c ? level : v)) : row));
    this.show();
    this.onEdit();
  }

  /** A whole drawing, by the reader (Clear) or from elsewhere (a preset, a link): `edited` says which. */
  replace(image, edited) {
    this.image = image.map((row) => [...row]);
    this.show();
    if (edited) this.onEdit();
  }

  show() {
    this.cells.forEach((row, r) => row.forEach((cell, c) => {
      const level = this.image[r][c];
      cell.style.setProperty("--level", String(level / this.levels));
      cell.setAttribute("aria-label", `Row ${r + 1}, column ${c + 1}: level ${level}`);
      cell.classList.toggle("is-dark", level / this.levels > 0.5);
    }));
  }
}
