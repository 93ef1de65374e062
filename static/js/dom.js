// Small helpers shared by the page's modules: building HTML elements and reading JSON answers.

/** An HTML element with attributes and children; null, undefined and false children are skipped. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children.filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

/** The response's JSON body, or null when it has none. */
export async function readJson(response) {
  try {
    return await response.json();
  } catch {
    return null;
  }
}

/** The API's error message, or the status when the body says nothing. */
export function errorMessage(response, body) {
  return body?.error?.message || `the server answered ${response.status} ${response.statusText}`.trim();
}
