// Sideways scrolling, and the visible elements matching the selector whose text overflows
// their box or has a word broken across two lines (tests/web/layout.py).
(selector) => {
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > innerWidth) problems.push(`the page scrolls sideways (${root.scrollWidth} > ${innerWidth})`);
  for (const node of document.querySelectorAll(selector)) {
    if (!node.getClientRects().length || getComputedStyle(node).visibility === 'hidden') continue;
    if (node.closest('.visually-hidden')) continue;  // for screen readers only
    const name = `${node.tagName.toLowerCase()}.${[...node.classList].join('.')} "${node.textContent.trim().slice(0, 40)}"`;
    if (node.scrollWidth > node.clientWidth + 1) problems.push(`${name}: its text overflows (${node.scrollWidth} > ${node.clientWidth})`);
    const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      for (const word of (text.nodeValue ?? '').matchAll(/\S+/g)) {
        const range = document.createRange();
        range.setStart(text, word.index);
        range.setEnd(text, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (lines.size > 1) problems.push(`${name}: "${word[0]}" is broken across lines`);
      }
    }
  }
  return problems;
}
