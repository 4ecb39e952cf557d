// @ts-check
/**
 * ACP v2 diff content (`{type: "diff", changes, patch?}`) rendered as DOM.
 *
 * `changes` is authoritative for which files changed and how; the optional git patch gives the
 * lines. The patch is split per file (`diff --git` headers) and each part is shown under the
 * change whose path it names; a change without patch text (binary files, or no patch at all)
 * is still listed, with a note. The path shows once, in the file's header: the patch's own
 * file header lines are left out (`bodyLines`). Lines are classified by their first character
 * only and set with textContent.
 */

import { el } from './dom.js';

/**
 * Split a git patch into per-file sections with the paths they name.
 * @param {string} patch
 * @returns {{paths: string[], lines: string[]}[]}
 */
export function splitPatch(patch) {
  /** @type {{paths: string[], lines: string[]}[]} */
  const sections = [];
  /** @type {{paths: string[], lines: string[]} | null} */
  let current = null;
  let inHunk = false;
  for (const line of patch.replace(/\r\n/g, '\n').split('\n')) {
    const header = /^diff --git (?:"?a\/)?(.*?)"? (?:"?b\/)?(.*?)"?$/.exec(line);
    // A new file starts at a git header, or at a "--- " header after hunks (plain unified diff).
    if (header || !current || (inHunk && line.startsWith('--- ') && !header)) {
      current = { paths: [], lines: [] };
      sections.push(current);
      inHunk = false;
      if (header) current.paths.push(header[1], header[2]);
    }
    if (line.startsWith('@@')) inHunk = true;
    const fileLine = /^(?:---|\+\+\+) (?:[ab]\/)?(.*?)(?:\t.*)?$/.exec(line);
    if (fileLine && fileLine[1] !== '/dev/null' && !inHunk) current.paths.push(fileLine[1]);
    current.lines.push(line);
  }
  // Drop a trailing empty line left by the final newline.
  const last = sections[sections.length - 1];
  if (last && last.lines[last.lines.length - 1] === '') last.lines.pop();
  return sections.filter((section) => section.lines.some((l) => l !== ''));
}

/**
 * Does a patch path name this absolute path? Patches may use absolute or repository-relative
 * paths, so compare on whole trailing path components.
 * @param {string} absolute
 * @param {string} patchPath
 */
function samePath(absolute, patchPath) {
  const a = absolute.replace(/^\/+/, '');
  const b = patchPath.replace(/^\/+/, '');
  return a === b || a.endsWith(`/${b}`) || b.endsWith(`/${a}`);
}

/**
 * A section's lines without the file headers that only restate its path (`diff --git`,
 * `index`, `---`, `+++` before the first hunk): the section's header shows the path once.
 * @param {string[]} lines
 * @returns {string[]}
 */
export function bodyLines(lines) {
  const first = lines.findIndex((line) => line.startsWith('@@'));
  if (first < 0) return lines;
  const head = lines.slice(0, first).filter((line) => !/^(diff --git |index |--- |\+\+\+ )/.test(line));
  return [...head, ...lines.slice(first)];
}

/**
 * Render the lines of one patch section, numbering old/new lines from hunk headers.
 * @param {string[]} lines
 * @returns {HTMLElement}
 */
function renderLines(lines) {
  const body = el('div', 'diff-lines');
  body.setAttribute('role', 'table');
  // Long lines scroll sideways (on a phone, most do): reachable with the keyboard.
  body.tabIndex = 0;
  let oldLine = 0;
  let newLine = 0;
  for (const line of lines) {
    let kind = 'ctx';
    let oldNo = '';
    let newNo = '';
    const hunk = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (hunk) {
      kind = 'hunk';
      oldLine = Number(hunk[1]);
      newLine = Number(hunk[2]);
    } else if (/^(diff --git|index |--- |\+\+\+ |new file mode|deleted file mode|old mode|new mode|similarity index|rename from|rename to|copy from|copy to|Binary files|GIT binary patch)/.test(line)) {
      kind = 'meta';
    } else if (line.startsWith('+')) {
      kind = 'add';
      newNo = String(newLine++);
    } else if (line.startsWith('-')) {
      kind = 'del';
      oldNo = String(oldLine++);
    } else if (line.startsWith('\\')) {
      kind = 'meta';
    } else {
      oldNo = String(oldLine++);
      newNo = String(newLine++);
    }
    const row = el('div', `dl dl-${kind}`);
    row.setAttribute('role', 'row');
    // A table's rows hold cells (screen readers announce them by column).
    const cells = [];
    if (kind !== 'meta' && kind !== 'hunk') cells.push(el('span', 'dl-no', oldNo), el('span', 'dl-no', newNo));
    cells.push(el('span', 'dl-text', line || ' '));
    for (const cell of cells) cell.setAttribute('role', 'cell');
    row.append(...cells);
    if (kind === 'add') row.setAttribute('aria-label', `added: ${line.slice(1)}`);
    if (kind === 'del') row.setAttribute('aria-label', `removed: ${line.slice(1)}`);
    body.append(row);
  }
  return body;
}

/**
 * A path on its own, isolated and left to right: two paths never share one text node, so
 * bidirectional characters in one cannot reorder the other.
 * @param {unknown} path
 * @returns {HTMLElement}
 */
function pathElement(path) {
  const node = el('bdi', 'diff-path-part', String(path ?? ''));
  node.dir = 'ltr';
  return node;
}

/**
 * @param {any} change
 * @returns {HTMLElement}
 */
function changeLabel(change) {
  const op = String(change?.operation ?? 'change');
  const label = el('span', 'diff-path');
  if ((op === 'move' || op === 'copy') && change?.oldPath) label.append(pathElement(change.oldPath), ' → ');
  label.append(pathElement(change?.path ?? ''));
  return label;
}

/**
 * Render a v2 diff content item.
 * @param {any} diff
 * @returns {HTMLElement}
 */
export function renderDiff(diff) {
  const root = el('div', 'diff');
  const changes = Array.isArray(diff?.changes) ? diff.changes : [];
  const patchText =
    diff?.patch && typeof diff.patch.text === 'string' && (diff.patch.format ?? 'git_patch') === 'git_patch'
      ? diff.patch.text
      : '';
  const sections = patchText ? splitPatch(patchText) : [];
  const used = new Set();
  for (const change of changes) {
    const file = el('section', 'diff-file');
    const header = el('header', 'diff-file-header');
    const op = String(change?.operation ?? 'change');
    header.append(el('span', `diff-op diff-op-${op.replace(/[^a-z_]/gi, '')}`, op), changeLabel(change));
    if (change?.fileType && change.fileType !== 'text') header.append(el('span', 'diff-filetype', String(change.fileType)));
    file.append(header);
    const candidates = [String(change?.path ?? ''), String(change?.oldPath ?? '')].filter(Boolean);
    const matching = sections.filter((section, index) => !used.has(index) && section.paths.some((p) => candidates.some((c) => samePath(c, p))));
    for (const section of matching) {
      used.add(sections.indexOf(section));
      file.append(renderLines(bodyLines(section.lines)));
    }
    if (!matching.length) {
      const note = change?.fileType === 'binary' ? 'binary file: no textual diff' : 'no patch text for this change';
      file.append(el('p', 'diff-note', note));
    }
    root.append(file);
  }
  sections.forEach((section, index) => {
    if (used.has(index)) return;
    const file = el('section', 'diff-file');
    const header = el('header', 'diff-file-header');
    header.append(el('span', 'diff-op', 'patch'), el('span', 'diff-path', section.paths[section.paths.length - 1] ?? ''));
    file.append(header, renderLines(bodyLines(section.lines)));
    root.append(file);
  });
  if (diff?.patch && !patchText) {
    root.append(el('p', 'diff-note', `patch in an unsupported format: ${String(diff.patch.format)}`));
  }
  return root;
}
