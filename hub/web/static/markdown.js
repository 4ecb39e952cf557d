// @ts-check
/**
 * Safe markdown: a small CommonMark/GFM subset rendered straight into DOM nodes.
 *
 * Agent text is never parsed as HTML: every piece of text becomes a Text node, and the only
 * elements created are the ones listed here (headings, paragraphs, emphasis, lists, block
 * quotes, rules, tables, inline code, fenced code blocks, links). A link is made only for an
 * absolute http, https or mailto URL, and always opens in a new browsing context without an
 * opener or referrer; anything else stays literal text. Images are shown as links (remote
 * images are never loaded).
 *
 * The parser is forgiving on purpose: it renders partial input (a message still streaming, an
 * unterminated fence) sensibly, and it never throws on any input.
 */

import { el } from './dom.js';

const SAFE_SCHEMES = new Set(['http:', 'https:', 'mailto:']);

/**
 * The normalised URL if it is an absolute http/https/mailto URL, else null.
 * @param {string} raw
 * @returns {string | null}
 */
export function safeUrl(raw) {
  const trimmed = raw.trim();
  // Control characters and whitespace inside a scheme are an obfuscation trick: refuse.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\s]/.test(trimmed)) return null;
  let url;
  try {
    url = new URL(trimmed);
  } catch {
    return null;
  }
  return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
}

/**
 * @param {string} href already checked by safeUrl
 * @param {Node[]} children
 * @returns {HTMLAnchorElement}
 */
function link(href, children) {
  const a = document.createElement('a');
  a.href = href;
  a.rel = 'noopener noreferrer';
  a.target = '_blank';
  a.append(...children);
  // No link inside a link (an address in the text is only text): unwrapped, its own host note
  // dropped.
  for (const inner of [...a.querySelectorAll('a')]) {
    for (const note of inner.querySelectorAll('.link-host')) note.remove();
    inner.replaceWith(...inner.childNodes);
  }
  // Link text can say anything: where it goes is shown beside it, unless the text is the
  // address itself.
  const shown = (a.textContent ?? '').trim();
  const where = linkTarget(href);
  if (shown !== href && shown !== href.replace(/\/$/, '') && shown !== where) {
    const host = document.createElement('span');
    host.className = 'link-host';
    host.textContent = ` (${where})`;
    a.append(host);
  }
  return a;
}

/**
 * Where a safe link goes, for people: its host (`example.com`), or a `mailto:` address.
 * @param {string} href already checked by safeUrl
 * @returns {string}
 */
export function linkTarget(href) {
  try {
    const url = new URL(href);
    return url.host || decodeURIComponent(url.pathname) || url.protocol;
  } catch {
    return href;
  }
}


// ---------------------------------------------------------------------------------------------
// Inline

const ESCAPABLE = '\\`*_{}[]()#+-.!|~<>"\'';

/**
 * Find the index of the closing `]` matching the `[` at `start`, or -1.
 * @param {string} text
 * @param {number} start
 */
function closingBracket(text, start) {
  let depth = 0;
  // Bounded scans keep pathological input (thousands of unmatched brackets) linear.
  const limit = Math.min(text.length, start + 2000);
  for (let i = start; i < limit; i++) {
    const c = text[i];
    if (c === '\\') i++;
    else if (c === '`') {
      const end = text.indexOf('`', i + 1);
      if (end === -1) return -1;
      i = end;
    } else if (c === '[') depth++;
    else if (c === ']') {
      depth--;
      if (depth === 0) return i;
    }
  }
  return -1;
}

/**
 * Parse `(url "title")` starting at `start` (the `(`); returns the url and the end index.
 * @param {string} text
 * @param {number} start
 * @returns {{url: string, end: number} | null}
 */
function linkDestination(text, start) {
  if (text[start] !== '(') return null;
  let i = start + 1;
  while (text[i] === ' ') i++;
  let url = '';
  if (text[i] === '<') {
    const end = text.indexOf('>', i);
    if (end === -1) return null;
    url = text.slice(i + 1, end);
    i = end + 1;
  } else {
    let depth = 0;
    const begin = i;
    for (; i < text.length; i++) {
      const c = text[i];
      if (c === '\\') i++;
      else if (c === '(') depth++;
      else if (c === ')') {
        if (depth === 0) break;
        depth--;
      } else if (c === ' ') break;
    }
    url = text.slice(begin, i);
  }
  while (text[i] === ' ') i++;
  if (text[i] === '"' || text[i] === "'") {
    const end = text.indexOf(text[i], i + 1);
    if (end === -1) return null;
    i = end + 1;
    while (text[i] === ' ') i++;
  }
  if (text[i] !== ')') return null;
  return { url, end: i + 1 };
}

/**
 * @param {string} c
 */
function isWordChar(c) {
  return c !== undefined && /[\p{L}\p{N}]/u.test(c);
}

/**
 * Find a closing emphasis delimiter `delim` after `from` that is not preceded by a space.
 * @param {string} text
 * @param {string} delim
 * @param {number} from
 */
function closingDelimiter(text, delim, from) {
  let i = from;
  const limit = Math.min(text.length, from + 2000);
  while (i < limit) {
    const c = text[i];
    if (c === '\\') {
      i += 2;
      continue;
    }
    if (c === '`') {
      const run = /^`+/.exec(text.slice(i))?.[0] ?? '`';
      const end = text.indexOf(run, i + run.length);
      i = end === -1 ? i + run.length : end + run.length;
      continue;
    }
    if (c === delim[0]) {
      // A run of the delimiter character: `**` inside `*...*` is its own strong emphasis and
      // is skipped whole; a run longer than the delimiter closes with its last characters
      // (`*a **b***`: the em closes after the strong).
      let run = 1;
      while (run < 3 && text[i + run] === c) run++;
      const skip = run < delim.length || (delim.length === 1 && run === 2);
      // Intraword underscores (snake_case) never close emphasis.
      const intraword = c === '_' && isWordChar(text[i + run]);
      if (!skip && !intraword && i > from && text[i - 1] !== ' ') return i + run - delim.length;
      i += run;
      continue;
    }
    i++;
  }
  return -1;
}

const BARE_URL = /^(?:https?:\/\/|mailto:)[^\s<>]*[^\s<>.,;:!?'")\]]/;

/**
 * Render inline markdown into nodes.
 * @param {string} text
 * @param {number} [depth]
 * @returns {Node[]}
 */
export function renderInline(text, depth = 0) {
  /** @type {Node[]} */
  const out = [];
  let buffer = '';
  const flush = () => {
    if (buffer) out.push(document.createTextNode(buffer));
    buffer = '';
  };
  const nested = (/** @type {string} */ inner) =>
    depth > 8 ? [document.createTextNode(inner)] : renderInline(inner, depth + 1);

  let i = 0;
  /** An autolink or a bare URL shown as itself, `length` characters of the text: pushed and
   * passed over when `url` is safe (whether it was). */
  const linked = (/** @type {string} */ url, /** @type {number} */ length) => {
    const href = safeUrl(url);
    if (!href) return false;
    flush();
    out.push(link(href, [document.createTextNode(url)]));
    i += length;
    return true;
  };
  while (i < text.length) {
    const c = text[i];

    if (c === '\\' && i + 1 < text.length && ESCAPABLE.includes(text[i + 1])) {
      buffer += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '\n') {
      // A hard break: two trailing spaces or a backslash; otherwise a soft break.
      if (buffer.endsWith('  ')) {
        buffer = buffer.replace(/ +$/, '');
        flush();
        out.push(el('br'));
      } else {
        buffer += '\n';
      }
      i++;
      continue;
    }
    if (c === '`') {
      const run = /^`+/.exec(text.slice(i, i + 64))?.[0] ?? '`';
      const end = text.indexOf(run, i + run.length);
      if (end !== -1 && text[end + run.length] !== '`') {
        flush();
        let code = text.slice(i + run.length, end).replace(/\n/g, ' ');
        if (/^ .* $/.test(code) && code.trim()) code = code.slice(1, -1);
        out.push(el('code', '', code));
        i = end + run.length;
        continue;
      }
      buffer += run;
      i += run.length;
      continue;
    }
    if (c === '!' && text[i + 1] === '[') {
      const close = closingBracket(text, i + 1);
      const dest = close === -1 ? null : linkDestination(text, close + 1);
      if (dest) {
        const alt = text.slice(i + 2, close);
        const href = safeUrl(dest.url);
        flush();
        if (href) out.push(link(href, [document.createTextNode(`image: ${alt || href}`)]));
        else out.push(document.createTextNode(text.slice(i, dest.end)));
        i = dest.end;
        continue;
      }
    }
    if (c === '[') {
      const close = closingBracket(text, i);
      const dest = close === -1 ? null : linkDestination(text, close + 1);
      if (dest) {
        const href = safeUrl(dest.url);
        flush();
        if (href) out.push(link(href, nested(text.slice(i + 1, close))));
        // An unsafe link stays exactly what the agent wrote: inert text.
        else out.push(document.createTextNode(text.slice(i, dest.end)));
        i = dest.end;
        continue;
      }
    }
    if (c === '<') {
      const auto = /^<((?:https?:\/\/|mailto:)[^\s<>]+)>/.exec(text.slice(i, i + 4096));
      if (auto && linked(auto[1], auto[0].length)) continue;
    }
    if ((c === 'h' || c === 'm') && !isWordChar(text[i - 1])) {
      const bare = BARE_URL.exec(text.slice(i, i + 4096));
      if (bare && linked(bare[0], bare[0].length)) continue;
    }
    if (c === '~' && text[i + 1] === '~' && text[i + 2] !== ' ') {
      const end = closingDelimiter(text, '~~', i + 2);
      if (end !== -1) {
        flush();
        const node = el('del');
        node.append(...nested(text.slice(i + 2, end)));
        out.push(node);
        i = end + 2;
        continue;
      }
    }
    if (c === '*' || c === '_') {
      const double = text[i + 1] === c;
      const delim = double ? c + c : c;
      const next = text[i + delim.length];
      const opens =
        next !== undefined && next !== ' ' && next !== '\n' && !(c === '_' && isWordChar(text[i - 1]));
      if (opens) {
        const end = closingDelimiter(text, delim, i + delim.length);
        if (end !== -1) {
          flush();
          const node = el(double ? 'strong' : 'em');
          node.append(...nested(text.slice(i + delim.length, end)));
          out.push(node);
          i = end + delim.length;
          continue;
        }
      }
      buffer += delim;
      i += delim.length;
      continue;
    }
    buffer += c;
    i++;
  }
  flush();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Blocks

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const LIST_ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])([ \t]+|$)(.*)$/;
const TABLE_SEPARATOR = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;

/**
 * Split a table row into its cells (pipes inside code spans or escaped do not split).
 * @param {string} line
 * @returns {string[]}
 */
function tableCells(line) {
  let row = line.trim();
  if (row.startsWith('|')) row = row.slice(1);
  if (row.endsWith('|') && !row.endsWith('\\|')) row = row.slice(0, -1);
  /** @type {string[]} */
  const cells = [];
  let cell = '';
  let inCode = false;
  for (let i = 0; i < row.length; i++) {
    const c = row[i];
    if (c === '\\' && row[i + 1] === '|') {
      cell += '|';
      i++;
    } else if (c === '`') {
      inCode = !inCode;
      cell += c;
    } else if (c === '|' && !inCode) {
      cells.push(cell.trim());
      cell = '';
    } else cell += c;
  }
  cells.push(cell.trim());
  return cells;
}

/**
 * @param {string} line
 */
function startsBlock(line) {
  return (
    FENCE.test(line) ||
    HEADING.test(line) ||
    RULE.test(line) ||
    QUOTE.test(line) ||
    LIST_ITEM.test(line)
  );
}

/**
 * Render block-level markdown.
 * @param {string} text
 * @param {number} [depth]
 * @returns {DocumentFragment}
 */
export function renderMarkdown(text, depth = 0) {
  const fragment = document.createDocumentFragment();
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1];
      const language = fence[2];
      const body = [];
      i++;
      const indent = /^ */.exec(line)?.[0].length ?? 0;
      while (i < lines.length) {
        const close = new RegExp(`^ {0,3}${marker[0]}{${marker.length},}\\s*$`);
        if (close.test(lines[i])) {
          i++;
          break;
        }
        body.push(lines[i].replace(new RegExp(`^ {0,${indent}}`), ''));
        i++;
      }
      const figure = el('div');
      figure.className = 'md-code';
      if (language) {
        const label = el('div', '', language);
        label.className = 'md-code-lang';
        figure.append(label);
      }
      const pre = el('pre');
      const code = el('code', '', body.join('\n'));
      if (language) code.dataset.language = language;
      pre.append(code);
      pre.tabIndex = 0;
      figure.append(pre);
      fragment.append(figure);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      const node = el(`h${Math.min(6, heading[1].length + 2)}`);
      node.className = `md-h md-h${heading[1].length}`;
      node.append(...renderInline(heading[2] ?? ''));
      fragment.append(node);
      i++;
      continue;
    }
    if (RULE.test(line)) {
      fragment.append(el('hr'));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && lines[i].trim()) {
        const quoted = QUOTE.exec(lines[i]);
        body.push(quoted ? quoted[1] : lines[i]);
        i++;
      }
      const node = el('blockquote');
      node.append(depth > 8 ? document.createTextNode(body.join('\n')) : renderMarkdown(body.join('\n'), depth + 1));
      fragment.append(node);
      continue;
    }
    const item = LIST_ITEM.exec(line);
    if (item) {
      const ordered = /\d/.test(item[2]);
      const list = el(ordered ? 'ol' : 'ul');
      if (ordered) {
        const start = parseInt(item[2], 10);
        if (start !== 1) /** @type {HTMLOListElement} */ (list).start = start;
      }
      let loose = false;
      while (i < lines.length) {
        const current = LIST_ITEM.exec(lines[i]);
        if (!current || /\d/.test(current[2]) !== ordered) break;
        const width = current[1].length + current[2].length + Math.max(1, current[3].length);
        const body = [current[4]];
        i++;
        while (i < lines.length) {
          const next = lines[i];
          if (!next.trim()) {
            // A blank line continues the item only if indented content follows.
            const following = lines[i + 1];
            if (following !== undefined && /^\s+\S/.test(following) && following.search(/\S/) >= 2) {
              body.push('');
              loose = true;
              i++;
              continue;
            }
            break;
          }
          const indent = next.search(/\S/);
          if (indent >= Math.min(width, 4) || (indent >= 2 && LIST_ITEM.test(next))) {
            body.push(next.slice(Math.min(indent, width)));
            i++;
            continue;
          }
          if (LIST_ITEM.test(next) || startsBlock(next)) break;
          // Lazy continuation of the item's paragraph.
          body.push(next.trim());
          i++;
        }
        const li = el('li');
        const content = body.join('\n');
        const simple = !content.includes('\n') || !body.slice(1).some((l) => startsBlock(l) || !l.trim());
        if (simple && !loose) li.append(...renderInline(content));
        else li.append(depth > 8 ? document.createTextNode(content) : renderMarkdown(content, depth + 1));
        list.append(li);
        if (i < lines.length && !lines[i].trim()) {
          // Blank line between items: keep going only if the next item continues the list.
          const after = lines[i + 1];
          if (after !== undefined && LIST_ITEM.test(after)) {
            i++;
            continue;
          }
          break;
        }
      }
      fragment.append(list);
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && TABLE_SEPARATOR.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      const header = tableCells(line);
      const aligns = tableCells(lines[i + 1]).map((cell) =>
        cell.startsWith(':') && cell.endsWith(':') ? 'center' : cell.endsWith(':') ? 'right' : cell.startsWith(':') ? 'left' : '',
      );
      i += 2;
      const wrap = el('div');
      wrap.className = 'md-table';
      const table = el('table');
      const thead = el('thead');
      const headRow = el('tr');
      header.forEach((cell, index) => {
        const th = el('th');
        if (aligns[index]) th.classList.add(`align-${aligns[index]}`);
        th.append(...renderInline(cell));
        headRow.append(th);
      });
      thead.append(headRow);
      const tbody = el('tbody');
      while (i < lines.length && lines[i].trim() && lines[i].includes('|')) {
        const cells = tableCells(lines[i]);
        const tr = el('tr');
        header.forEach((_, index) => {
          const td = el('td');
          if (aligns[index]) td.classList.add(`align-${aligns[index]}`);
          td.append(...renderInline(cells[index] ?? ''));
          tr.append(td);
        });
        tbody.append(tr);
        i++;
      }
      table.append(thead, tbody);
      wrap.append(table);
      wrap.tabIndex = 0;
      fragment.append(wrap);
      continue;
    }
    // A paragraph: consecutive lines up to a blank line or the start of another block.
    const body = [line];
    i++;
    while (i < lines.length && lines[i].trim() && !startsBlock(lines[i])) {
      if (lines[i].includes('|') && i + 1 < lines.length && TABLE_SEPARATOR.test(lines[i + 1])) break;
      body.push(lines[i]);
      i++;
    }
    const p = el('p');
    p.append(...renderInline(body.map((l) => l.replace(/^ +/, '')).join('\n')));
    fragment.append(p);
  }
  return fragment;
}

// ---------------------------------------------------------------------------------------------
// Plain text

/**
 * The text of inline markdown, its markup gone (emphasis, code spans, links as their text).
 * @param {string} text
 * @returns {string}
 */
function inlineText(text) {
  return renderInline(text).map((node) => node.textContent ?? '').join('');
}

/**
 * Markdown as plain text, line by line, with its line breaks kept: what a dashboard card shows
 * of an answer (whose first lines may be missing). Fences, rules and table separators go; a
 * table row becomes its cells joined by ` · `; headings and quotes lose their marks, bullets
 * become `•`; inline markup becomes its text. Never throws.
 * @param {string} text
 * @returns {string}
 */
export function plainText(text) {
  /** @type {string[]} */
  const out = [];
  for (const raw of text.replace(/\r\n?/g, '\n').split('\n')) {
    if (FENCE.test(raw) || RULE.test(raw) || (raw.includes('-') && TABLE_SEPARATOR.test(raw))) continue;
    let line = raw;
    const heading = HEADING.exec(line);
    if (heading) {
      line = heading[2] ?? '';
    } else {
      for (let depth = 0; depth < 8; depth++) {
        const quote = QUOTE.exec(line);
        if (!quote) break;
        line = quote[1];
      }
      const item = LIST_ITEM.exec(line);
      if (item) {
        line = `${/\d/.test(item[2]) ? item[2] : '•'} ${item[4]}`;
      } else if (/^\s*\|.*\|\s*$/.test(line)) {
        out.push(tableCells(line).map((cell) => inlineText(cell.trim())).join(' · '));
        continue;
      }
    }
    out.push(inlineText(line));
  }
  return out.join('\n');
}
