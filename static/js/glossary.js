// Words a newcomer may not know (app/domain/glossary.py, handed over in the page): the first time each appears in
// a section, it is marked, and its definition shows on hover and on keyboard focus. Text drawn later (a lab's
// answer, a What if? outcome, a verification report) is marked as it arrives.

const SKIP = "code, pre, script, style, svg, button, select, option, textarea, input, a, summary, .term, .term-tip, [data-raw]";
const SCOPE = ".tour-step, section, figure, details, .case, .lab-results, .wide-results, .verify-report";

let terms = null; // [{ term, definition, pattern }]
let any = null; // one pattern for every term: most text (numbers, names) holds none
let count = 0;

function escapeRe(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The page's glossary, longest terms first (so "logit lens" is found before "logit"). */
function load() {
  const source = document.getElementById("glossary");
  if (!source) return [];
  return Object.entries(JSON.parse(source.textContent)).sort((a, b) => b[0].length - a[0].length).map(([term, definition]) => ({
    term, definition,
    // A term with capitals (ELBO, KL) is matched as written, others in any case; a plural s is allowed.
    pattern: new RegExp(`(?<![\\p{L}\\p{N}])${escapeRe(term)}s?(?![\\p{L}\\p{N}])`, `u${term === term.toLowerCase() ? "i" : ""}`),
  }));
}

function mark(text, { term, definition }) {
  const id = `term-tip-${++count}`;
  const dfn = Object.assign(document.createElement("dfn"), { className: "term", tabIndex: 0, textContent: text });
  dfn.dataset.term = term;
  dfn.setAttribute("aria-describedby", id);
  const tip = Object.assign(document.createElement("span"), { className: "term-tip", id, textContent: definition });
  tip.setAttribute("role", "tooltip");
  const wrap = Object.assign(document.createElement("span"), { className: "term-wrap" });
  wrap.append(dfn, tip);
  return wrap;
}

/** Mark, under `root`, the first appearance of each term in each section that has not marked it yet. */
export function gloss(root) {
  terms ??= load();
  if (!terms.length) return;
  any ??= new RegExp(terms.map((t) => escapeRe(t.term)).join("|"), "i");
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) => (node.parentElement && any.test(node.textContent) && !node.parentElement.closest(SKIP)
      ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT),
  });
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (let node of nodes) {
    const scope = node.parentElement.closest(SCOPE) ?? document.body;
    for (const entry of terms) {
      if (scope.querySelector(`.term[data-term="${CSS.escape(entry.term)}"]`)) continue;
      const found = entry.pattern.exec(node.textContent);
      if (!found) continue;
      const rest = node.splitText(found.index);
      const after = rest.splitText(found[0].length);
      rest.replaceWith(mark(found[0], entry));
      node = after; // the text after the term may hold other terms
    }
  }
}

/** A definition moved left as far as it must to stay inside the window (a term near the right edge). */
function place(term) {
  const tip = term.nextElementSibling;
  tip.style.left = "0px";
  const box = tip.getBoundingClientRect();
  const over = box.right - (document.documentElement.clientWidth - 8);
  if (over > 0) tip.style.left = `${-Math.min(over, box.left - 8)}px`;
}

/** Mark the page as it is, and whatever is drawn into it later. */
export function glossPage(root = document.querySelector("main")) {
  if (!root) return;
  for (const type of ["pointerover", "focusin"]) {
    root.addEventListener(type, (event) => {
      const term = event.target.closest?.(".term");
      if (!term) return;
      place(term); // shown by focus already; by hover, from the next frame
      requestAnimationFrame(() => place(term));
    });
  }
  gloss(root);
  let pending = null;
  // Marking adds nodes too: the pass it causes finds every term marked and changes nothing.
  new MutationObserver(() => {
    pending ??= requestAnimationFrame(() => {
      pending = null;
      gloss(root);
    });
  }).observe(root, { childList: true, subtree: true });
}
