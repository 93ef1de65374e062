// Words a newcomer may not know (app/domain/glossary.py, handed over in the page): the first time each appears in
// a section, it is marked, and its definition shows on hover and on keyboard focus. Text drawn later (a lab's
// answer, a What if? outcome, a verification report) is marked as it arrives.

const SKIP = "code, pre, script, style, svg, button, select, option, textarea, input, a, summary, .term, [data-raw]";
const TIP = "term-tip"; // one tip for the page, outside its text: a definition is never part of what a section says
const SCOPE = ".tour-step, section, figure, details, .case, .lab-results, .wide-results, .verify-report";

let terms = null; // [{ term, definition, pattern }]
let any = null; // one pattern for every term: most text (numbers, names) holds none

function escapeRe(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The page's glossary, longest terms first (so "logit lens" is found before "logit"). */
function load() {
  const source = document.querySelector("[data-glossary]");
  if (!source) return [];
  return Object.entries(JSON.parse(source.dataset.glossary)).sort((a, b) => b[0].length - a[0].length).map(([term, definition]) => ({
    term, definition,
    // A term with capitals (ELBO, KL) is matched as written, others in any case; a plural s is allowed. A term
    // inside a name (word_embeddings) is not the term.
    pattern: new RegExp(`(?<![\\p{L}\\p{N}_])${escapeRe(term)}s?(?![\\p{L}\\p{N}_])`, `u${term === term.toLowerCase() ? "i" : ""}`),
  }));
}

function mark(text, { term }) {
  const dfn = Object.assign(document.createElement("dfn"), { className: "term", tabIndex: 0, textContent: text });
  dfn.dataset.term = term;
  dfn.setAttribute("aria-describedby", TIP); // the one tip, which says this term's definition while it is shown
  return dfn;
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

/** Show a term's definition just below it, inside the window. */
function show(tip, term) {
  tip.textContent = terms.find((t) => t.term === term.dataset.term)?.definition ?? "";
  tip.hidden = false;
  const at = term.getBoundingClientRect();
  const width = document.documentElement.clientWidth;
  tip.style.left = "0px";
  const left = Math.max(8, Math.min(at.left, width - 8 - tip.getBoundingClientRect().width));
  tip.style.left = `${left + window.scrollX}px`;
  tip.style.top = `${at.bottom + 6 + window.scrollY}px`;
}

/** Mark the page as it is, and whatever is drawn into it later. */
export function glossPage(root = document.querySelector("main")) {
  if (!root) return;
  const tip = Object.assign(document.createElement("div"), { id: TIP, className: "term-tip", hidden: true });
  tip.setAttribute("role", "tooltip");
  document.body.append(tip);
  const hide = () => { tip.hidden = true; };
  root.addEventListener("pointerover", (event) => {
    const term = event.target.closest?.(".term");
    if (term) show(tip, term);
  });
  root.addEventListener("pointerout", (event) => {
    if (event.target.closest?.(".term") && document.activeElement !== event.target) hide();
  });
  root.addEventListener("focusin", (event) => (event.target.matches(".term") ? show(tip, event.target) : hide()));
  root.addEventListener("focusout", hide);
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") hide(); });
  gloss(root);
  // Only what was added is walked again, once a frame: a lab that redraws at every edit costs a walk of its answer,
  // not of the page. Marking adds nodes too: the pass it causes finds their terms marked and changes nothing.
  const added = new Set();
  let pending = null;
  new MutationObserver((changes) => {
    for (const change of changes) {
      for (const node of change.addedNodes) added.add(node.nodeType === Node.ELEMENT_NODE ? node : node.parentElement);
    }
    pending ??= requestAnimationFrame(() => {
      pending = null;
      const nodes = [...added].filter((node) => node?.isConnected && !node.closest(".term"));
      added.clear();
      for (const node of nodes) gloss(node);
    });
  }).observe(root, { childList: true, subtree: true });
}
