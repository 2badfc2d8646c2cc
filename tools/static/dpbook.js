/*
 * The book's own script (added by tools/dpbook_sphinx.py).
 */

/*
 * On a narrow screen the theme shows the chapter menu and the page's contents in a modal
 * drawer (a <dialog>). Following a link to a section of the same page left the drawer open over
 * the section; close it, so the reader sees where the link led.
 */
document.addEventListener("click", (event) => {
  const link = event.target instanceof Element ? event.target.closest("a[href]") : null;
  const drawer = link ? link.closest("dialog[open]") : null;
  if (drawer && drawer.matches("#pst-primary-sidebar-modal, #pst-secondary-sidebar-modal")) {
    drawer.close();
  }
});

/*
 * Search ignores accents (the index and the query are folded: see dpbook_sphinx.py), so the
 * excerpt under each result must find "Rényi" in the page when the query was "Renyi". Sphinx's
 * searchtools.js looks for the search words in the page text as it is; this version looks in the
 * folded text and shows the page's own words around the place found.
 */
const dpbookFold = (text) => text.normalize("NFKD").replace(/\p{M}/gu, "");

// `text` in lower case and folded, and for each of its characters where it came from in `text`
// (null when they are one to one, as for é -> e).
const dpbookFoldWithPositions = (text) => {
  const folded = dpbookFold(text.toLowerCase());
  if (folded.length === text.length) return [folded, null];
  let out = "";
  const from = [];
  for (let i = 0; i < text.length; ) {
    const ch = String.fromCodePoint(text.codePointAt(i));
    const f = dpbookFold(ch.toLowerCase());
    for (let j = 0; j < f.length; j++) from.push(i);
    out += f;
    i += ch.length;
  }
  return [out, from];
};

const dpbookSearchSummary = (htmlText, keywords, anchor) => {
  const text = Search.htmlToText(htmlText, anchor);
  if (text === "") return null;
  const [folded, from] = dpbookFoldWithPositions(text);
  const found = [...keywords]
    .map((k) => folded.indexOf(dpbookFold(k.toLowerCase())))
    .filter((i) => i > -1)
    .slice(-1)[0];
  const position = found === undefined ? 0 : from ? from[found] : found;
  const start = Math.max(position - 120, 0);
  const summary = document.createElement("p");
  summary.classList.add("context");
  summary.textContent = (start === 0 ? "" : "...") + text.substr(start, 240).trim()
    + (start + 240 < text.length ? "..." : "");
  return summary;
};

// searchtools.js (the search page only) is loaded after this script: replace its excerpt
// maker once every script has run, before the search starts.
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search !== "undefined" && Search.makeSearchSummary) {
    Search.makeSearchSummary = dpbookSearchSummary;
  }
});
