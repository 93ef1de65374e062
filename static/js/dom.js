// Small helpers shared by the page's modules: building HTML elements and reading JSON answers.

/** Rewrite this page's query where it stands (no new history entry): `edit(params)` changes it. */
export function editQuery(edit) {
  const url = new URL(window.location.href);
  edit(url.searchParams);
  if (url.href !== window.location.href) window.history.replaceState(window.history.state, "", url);
}

/** An HTML element with attributes and children; null, undefined and false children are skipped. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children.filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

// A box whose content is wider than it is marked `is-scrollable` (site.css then says that it scrolls), one taller
// than it `is-tall`.
let overflow = null;

/** Keep `box` marked `is-scrollable` while its content is wider than it, as the window changes. */
export function watchOverflow(box) {
  overflow ??= new ResizeObserver((entries) => {
    for (const { target } of entries) {
      target.classList.toggle("is-scrollable", target.scrollWidth > target.clientWidth + 1);
      target.classList.toggle("is-tall", target.scrollHeight > target.clientHeight + 1);
    }
  });
  overflow.observe(box);
  return box;
}

// On a phone a tall part of the page (the recorded case, a lab's answer, the about text) shows its top and a
// button that shows the rest: drawn whole, they made a page 10-15k px tall before anything was touched. site.css
// holds the height (`is-clamped`); a box is faded and its button shown only while its content is taller.
const PHONE = window.matchMedia("(max-width: 600px)");

/** Clamp `box` on a phone until its button (which names `box.dataset.clamp`) or a focus inside it opens it. */
export function clampOnPhone(box) {
  const button = el("button", { type: "button", class: "clamp-open", hidden: "" }, `Show ${box.dataset.clamp}`);
  box.after(button);
  let opened = false;
  const check = () => {
    box.classList.toggle("is-clamped", PHONE.matches && !opened);
    const cut = box.classList.contains("is-clamped") && box.scrollHeight > box.clientHeight + 1;
    box.classList.toggle("is-cut", cut);
    button.hidden = !cut;
  };
  const open = () => {
    opened = true;
    check();
  };
  button.addEventListener("click", () => {
    open(); // the button hides: focus goes to what it showed, not to the page's start
    box.setAttribute("tabindex", "-1");
    box.focus({ preventScroll: true });
  });
  // A keyboard that tabs to a control below the fold opens the box, so that nothing focused is hidden.
  box.addEventListener("focusin", (event) => {
    if (!box.classList.contains("is-cut") || event.target.getBoundingClientRect().bottom <= box.getBoundingClientRect().bottom) return;
    open();
    event.target.scrollIntoView({ block: "nearest" }); // where it is once the box is whole
  });
  new ResizeObserver(check).observe(box);
  new MutationObserver(check).observe(box, { childList: true, subtree: true, characterData: true });
  PHONE.addEventListener("change", check);
  check();
}

/** A table (or anything wider than a phone) in a box that scrolls sideways; focusable and named, so that a
 * keyboard can scroll it and a screen reader says what it holds. */
export function scrollBox(label, ...children) {
  return watchOverflow(el("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": label }, ...children));
}

/** A chart at its natural size (its text never scaled below 12 px) in a box that scrolls like scrollBox's. */
export function chartBox(label, chart) {
  return watchOverflow(el("div", { class: "chart-box", tabindex: 0, role: "region", "aria-label": label }, chart));
}

/** A promise that settles after `ms` milliseconds. */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A duration as people read it: "30 ms" under a second, "1.4 s" above. */
export function duration(ms) {
  return ms < 1000 ? `${Math.max(1, Math.round(ms))} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** The response's JSON body, or null when it has none. */
export async function readJson(response) {
  try {
    return await response.json();
  } catch {
    return null;
  }
}

/** Hand `text` to the browser as a file download. */
export function saveFile(filename, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el("a", { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** A JSON answer that must carry data: an Error with the server's message when it failed, or when its body is not
 * JSON (a proxy's page, a cut connection), so that no caller carries on with null. */
export function requireData(response, body) {
  if (!response.ok) throw new Error(errorMessage(response, body));
  if (body === null) throw new Error(`the server's answer (${response.status}) was not JSON`);
  return body;
}

/** The API's error message, or the status when the body says nothing. */
export function errorMessage(response, body) {
  return body?.error?.message || `the server answered ${response.status} ${response.statusText}`.trim();
}

/** The selector that finds a control again after its container is drawn anew: its id, else its data-* attributes. */
function sameControl(node) {
  if (node.id) return `#${CSS.escape(node.id)}`;
  const data = [...node.attributes].filter((a) => a.name.startsWith("data-"));
  return data.length ? node.tagName.toLowerCase() + data.map((a) => `[${a.name}="${CSS.escape(a.value)}"]`).join("") : null;
}

/** A status line's text; an error is marked (site.css draws it in the error colour). */
export function showStatus(node, text, isError = false) {
  node.textContent = text;
  node.classList.toggle("is-error", isError);
}

/** Draw `container` anew with `render()`, and give focus back to the control that had it (the one with the same id
 * or data-* attributes): a keyboard user stays where they were instead of falling back to the top of the page. */
export function keepingFocus(container, render) {
  const active = document.activeElement;
  const selector = active && active !== container && container.contains(active) ? sameControl(active) : null;
  const result = render();
  if (selector) container.querySelector(selector)?.focus();
  return result;
}

/** Enable or disable a button; one disabled while it has the focus hands the focus to `fallback` (a disabled
 * button would drop it to <body>). */
export function setDisabled(button, disabled, fallback) {
  const focused = document.activeElement === button;
  button.disabled = disabled;
  if (disabled && focused) fallback.focus();
}

/** Scroll `node` into view, without animation for those who asked their system for reduced motion. */
export function reveal(node, block = "nearest") {
  const reduced = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  node.scrollIntoView({ behavior: reduced ? "auto" : "smooth", block });
}

/** A comparison of keys by their place in `order` (the recording's order of a case's numbers), unknown keys last. */
export function inOrder(order) {
  const at = (key) => (order.includes(key) ? order.indexOf(key) : order.length);
  return (a, b) => at(a) - at(b);
}
