// Audits markdown.js's output (tests/web/test_markdown.py): every element and attribute
// the renderer may create, and the link schemes it may use; returns the problems found.
(async (cases) => {
  const { renderMarkdown } = await import('/static/markdown.js');
  const tags = new Set([
    'P', 'STRONG', 'EM', 'DEL', 'CODE', 'PRE', 'A', 'BR', 'H3', 'H4', 'H5', 'H6', 'HR',
    'BLOCKQUOTE', 'UL', 'OL', 'LI', 'TABLE', 'THEAD', 'TBODY', 'TR', 'TH', 'TD', 'DIV', 'SPAN',
  ]);
  const attributes = new Set([
    'href', 'rel', 'target', 'class', 'tabindex', 'start', 'data-language',
  ]);
  const problems = [];
  cases.forEach((text, index) => {
    const box = document.createElement('div');
    box.append(renderMarkdown(text));
    for (const node of box.querySelectorAll('*')) {
      if (!tags.has(node.tagName)) problems.push(`${index}: element ${node.tagName}`);
      for (const attribute of node.attributes) {
        if (!attributes.has(attribute.name)) problems.push(`${index}: attribute ${attribute.name}`);
      }
      if (node.tagName === 'A') {
        const scheme = new URL(node.getAttribute('href')).protocol;
        if (!['http:', 'https:', 'mailto:'].includes(scheme)) {
          problems.push(`${index}: link ${scheme}`);
        }
        const rel = node.getAttribute('rel');
        if (rel !== 'noopener noreferrer' || node.getAttribute('target') !== '_blank') {
          problems.push(`${index}: link without noopener/_blank`);
        }
      }
    }
  });
  return problems;
})
