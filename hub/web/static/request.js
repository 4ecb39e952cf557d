// @ts-check
/**
 * What a permission request asks, drawn so that what a person approves is what the agent will
 * do. Used wherever a request can be answered: the session page's dialogs (and so the widget)
 * and the dashboard's cards.
 *
 * The agent's words are untrusted, so the hub's own words frame them:
 *
 * - every option is labelled by its `kind` in the hub's words (Allow once, Always allow,
 *   Reject, Always reject), the agent's name for it only a secondary line; the hub always adds
 *   its own Decline (the request resolves `cancelled`);
 * - the subject (its kind, the command, each path, the raw input) is shown in full, each
 *   command and path in its own isolated left-to-right element, and a title that names
 *   another kind of action than the subject is flagged;
 * - bidirectional controls and invisible characters never reach the page as such: each is
 *   replaced by a visible marker (`[U+202E]`) and the request carries a warning;
 * - a command says how many lines it has, and long runs of blank lines or spaces are shown
 *   as markers, so that its tail cannot hide below the fold or off to the side.
 */

import { renderDiff } from './diff.js';
import { button, el, labelize } from './dom.js';

/** Bidirectional controls, zero-width and other invisible format characters. */
const HIDDEN = /[\u00AD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\u3164\uFE00-\uFE0F\uFEFF\uFFA0]/g;

/** Each option kind in the hub's own words. */
export const OPTION_LABELS = /** @type {Record<string, string>} */ ({
  allow_once: 'Allow once',
  allow_always: 'Always allow',
  reject_once: 'Reject',
  reject_always: 'Always reject',
});

/** What each tool kind does, in the hub's words. */
const KIND_LABELS = /** @type {Record<string, string>} */ ({
  read: 'Read',
  edit: 'Edit',
  delete: 'Delete',
  move: 'Move',
  search: 'Search',
  execute: 'Run a command',
  think: 'Think',
  fetch: 'Fetch',
  switch_mode: 'Switch mode',
  other: 'Other action',
});

/** The first words of a title that claim a kind of action. */
const TITLE_CLAIMS = /** @type {[string, RegExp][]} */ ([
  ['read', /^(read|view|open|show|cat|list|look)\b/i],
  ['edit', /^(edit|write|change|modify|update|create|patch|save)\b/i],
  ['delete', /^(delete|remove|rm)\b/i],
  ['move', /^(move|rename|mv)\b/i],
  ['search', /^(search|find|grep)\b/i],
  ['execute', /^(run|execute|exec)\b/i],
  ['fetch', /^(fetch|download|get)\b/i],
]);

/** Blank lines in a row beyond which a command shows a marker instead. */
const BLANK_RUN = 3;
/** Spaces or tabs in a row beyond which a command shows a marker instead. */
const SPACE_RUN = 16;

/**
 * A character's code point as `U+XXXX`.
 * @param {string} char
 * @returns {string}
 */
function codePoint(char) {
  return `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * Whether `text` holds a bidirectional control or an invisible character.
 * @param {unknown} text
 * @returns {boolean}
 */
export function hasHidden(text) {
  HIDDEN.lastIndex = 0;
  return HIDDEN.test(String(text ?? ''));
}

/**
 * Replace, in every text node under `root`, each hidden character by a visible marker
 * element (`[U+202E]`). Returns how many it replaced.
 * @param {Node} root
 * @returns {number}
 */
export function revealHidden(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  /** @type {Text[]} */
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (hasHidden(node.nodeValue)) found.push(/** @type {Text} */ (node));
  }
  let count = 0;
  for (const node of found) {
    const text = node.nodeValue ?? '';
    const parts = document.createDocumentFragment();
    let at = 0;
    HIDDEN.lastIndex = 0;
    for (const match of text.matchAll(HIDDEN)) {
      const index = match.index ?? 0;
      if (index > at) parts.append(text.slice(at, index));
      const marker = el('span', 'hidden-char', `[${codePoint(match[0])}]`);
      marker.title = 'A hidden or bidirectional Unicode character';
      parts.append(marker);
      at = index + match[0].length;
      count++;
    }
    if (at < text.length) parts.append(text.slice(at));
    node.replaceWith(parts);
  }
  return count;
}

/**
 * Mark `root`'s hidden characters and, when it had any, put the warning first in it.
 * @param {HTMLElement} root
 * @returns {number} how many were marked
 */
export function guard(root) {
  const count = revealHidden(root);
  if (count) {
    const warning = el('p', 'hidden-warning', `This request contains hidden or bidirectional Unicode characters (${count}), shown as [U+…]: what you read may not be what runs.`);
    warning.setAttribute('role', 'alert');
    root.prepend(warning);
  }
  return count;
}

/**
 * A value shown on its own, isolated and left to right (a path, a name, an id).
 * @param {string} className
 * @param {unknown} value
 * @returns {HTMLElement}
 */
export function isolated(className, value) {
  const node = el('bdi', `verbatim ${className}`, String(value ?? ''));
  node.dir = 'ltr';
  return node;
}

/**
 * A command, whole: its line count, and its text with long runs of blank lines or spaces
 * shown as markers (so that nothing hides below the fold or off to the side).
 * @param {unknown} command
 * @returns {HTMLElement}
 */
export function commandBlock(command) {
  const text = String(command ?? '');
  const box = el('div', 'request-command');
  const lines = text.split(/\r\n|\r|\n/);
  const notes = [`${lines.length} ${lines.length === 1 ? 'line' : 'lines'}`, `${[...text].length} characters`];
  const pre = el('pre', 'permission-command verbatim');
  pre.dir = 'ltr';
  let blank = 0;
  let longest = 0;
  /** @param {number} count */
  const flushBlank = (count) => {
    if (count <= BLANK_RUN) {
      for (let i = 0; i < count; i++) pre.append('\n');
    } else {
      pre.append(el('span', 'run-marker', `[${count} blank lines]`), '\n');
    }
  };
  lines.forEach((line, index) => {
    if (!line.trim() && index < lines.length - 1) {
      blank++;
      return;
    }
    flushBlank(blank);
    blank = 0;
    let at = 0;
    for (const match of line.matchAll(/[ \t]+/g)) {
      const run = match[0];
      const start = match.index ?? 0;
      if (run.length < SPACE_RUN) continue;
      longest = Math.max(longest, run.length);
      pre.append(line.slice(at, start), el('span', 'run-marker', `[${run.length} spaces]`));
      at = start + run.length;
    }
    pre.append(line.slice(at));
    if (index < lines.length - 1) pre.append('\n');
  });
  if (longest) notes.push(`a run of ${longest} spaces`);
  const info = el('p', 'command-info', `Command: ${notes.join(' · ')}`);
  box.append(info, pre);
  return box;
}

/**
 * The kind a title claims by its first word (`Read README.md`: `read`), if any.
 * @param {unknown} title
 * @returns {string | null}
 */
function claimedKind(title) {
  const text = String(title ?? '').trim();
  for (const [kind, pattern] of TITLE_CLAIMS) if (pattern.test(text)) return kind;
  return null;
}

/**
 * Why a title does not describe its subject, or `null` when it does (as far as it can tell).
 * @param {unknown} title
 * @param {string | null} kind the subject's kind (`execute` for a command)
 * @param {string | null} command the command that runs, if any
 * @returns {string | null}
 */
export function titleMismatch(title, kind, command) {
  const claimed = claimedKind(title);
  if (kind && claimed && claimed !== kind && !(claimed === 'edit' && kind === 'delete')) {
    return `The title says "${labelize(claimed)}", but the request is to ${(KIND_LABELS[kind] ?? labelize(kind)).toLowerCase()}.`;
  }
  if (command && !claimed) {
    // A title written as a command (`pytest -q`, in backticks or not) must be the command, or
    // a part of it; a title in words ("Check the status") is left alone.
    const words = String(title ?? '').trim().replace(/^[`'"]+|[`'"]+$/g, '').trim();
    const looksLikeCommand = /^[a-z0-9._~/-]+(\s|$)/.test(words);
    if (looksLikeCommand && !command.replace(/\s+/g, ' ').includes(words.replace(/\s+/g, ' '))) {
      return 'The title does not match the command that will run.';
    }
  }
  return null;
}

/**
 * The raw input of a tool call, as JSON.
 * @param {unknown} rawInput
 * @returns {HTMLElement}
 */
function rawInputBlock(rawInput) {
  const box = el('div', 'request-raw');
  box.append(el('p', 'command-info', 'Raw input (what the agent passes to the tool):'));
  let text;
  try {
    text = JSON.stringify(rawInput, null, 2);
  } catch {
    text = String(rawInput);
  }
  const pre = el('pre', 'permission-raw verbatim', text ?? 'null');
  pre.dir = 'ltr';
  box.append(pre);
  return box;
}

/**
 * The request's subject: what will happen if it is allowed.
 * @param {any} params the v2 `session/request_permission` params (or a dashboard entry)
 * @param {any} [known] the tool call as the session knows it, merged under the subject's
 * @returns {{nodes: HTMLElement[], kind: string | null, command: string | null}}
 */
export function subjectNodes(params, known) {
  const subject = params?.subject;
  /** @type {HTMLElement[]} */
  const nodes = [];
  if (subject?.type === 'command') {
    const command = String(subject.command ?? '');
    nodes.push(el('p', 'request-kind', KIND_LABELS.execute));
    nodes.push(commandBlock(command));
    if (subject.cwd) {
      const cwd = el('p', 'permission-cwd', 'in ');
      cwd.append(isolated('request-path', subject.cwd));
      nodes.push(cwd);
    }
    return { nodes, kind: 'execute', command };
  }
  if (subject?.type === 'tool_call' && subject.toolCall) {
    const tool = { ...(known ?? {}), ...subject.toolCall };
    const kind = typeof tool.kind === 'string' ? tool.kind : null;
    const line = el('p', 'permission-subject request-kind');
    line.append(el('span', 'tool-kind', kind ? (KIND_LABELS[kind] ?? labelize(kind)) : 'Tool call (kind not given)'));
    if (tool.title) line.append(' ', isolated('request-tool-title', tool.title));
    nodes.push(line);
    const raw = tool.rawInput;
    const command = raw && typeof raw === 'object' && typeof raw.command === 'string' ? raw.command : null;
    if (command !== null) nodes.push(commandBlock(command));
    const locations = Array.isArray(tool.locations) ? tool.locations : [];
    if (locations.length) {
      const list = el('ul', 'request-paths');
      for (const location of locations) {
        const item = el('li', '');
        item.append(isolated('request-path', location?.path ?? ''));
        if (typeof location?.line === 'number') item.append(` line ${location.line}`);
        list.append(item);
      }
      nodes.push(list);
    }
    for (const item of Array.isArray(tool.content) ? tool.content : []) {
      if (item?.type === 'diff') nodes.push(renderDiff(item));
    }
    if (raw !== undefined && raw !== null) nodes.push(rawInputBlock(raw));
    return { nodes, kind, command };
  }
  if (subject) {
    nodes.push(el('p', 'request-kind', `Something this page does not know (${labelize(subject?.type ?? 'no type')})`));
    nodes.push(rawInputBlock(subject));
  } else {
    nodes.push(el('p', 'request-kind', 'The agent did not say what it will do.'));
  }
  return { nodes, kind: null, command: null };
}

/**
 * The body of a request, for a dialog or a card: the hub's kicker, the agent's title and
 * description, the subject, and a flag when the title does not match it.
 * @param {any} params
 * @param {any} [known]
 * @param {string} [titleId]
 * @returns {HTMLElement[]}
 */
export function requestNodes(params, known, titleId) {
  const title = String(params?.title ?? params?.toolCall?.title ?? 'Permission requested');
  const heading = el('h2', 'permission-title');
  heading.append(isolated('request-title', title));
  if (titleId) heading.id = titleId;
  const nodes = [el('p', 'permission-kicker', 'The agent asks for permission'), heading];
  if (params?.description) nodes.push(el('p', 'permission-description', String(params.description)));
  const { nodes: subject, kind, command } = subjectNodes(params, known);
  const what = el('div', 'request-subject');
  what.append(el('p', 'request-what', 'What it will do:'), ...subject);
  nodes.push(what);
  const mismatch = titleMismatch(title, kind, command);
  if (mismatch) {
    const flag = el('p', 'title-mismatch', mismatch);
    flag.setAttribute('role', 'alert');
    nodes.push(flag);
  }
  return nodes;
}

/**
 * The buttons of a request: one per option, labelled by its kind, and the hub's Decline.
 * @param {any[]} options
 * @param {(optionId: string | null) => void} choose `null`: declined
 * @returns {HTMLElement}
 */
export function optionButtons(options, choose) {
  const box = el('div', 'permission-options');
  for (const option of Array.isArray(options) ? options : []) {
    const kind = String(option?.kind ?? '');
    const label = OPTION_LABELS[kind] ?? 'Unknown choice';
    const name = String(option?.name ?? option?.optionId ?? '');
    const choice = button('', () => choose(String(option?.optionId)), `option option-${kind.startsWith('allow') ? 'allow' : kind.startsWith('reject') ? 'reject' : 'other'}`);
    choice.dataset.kind = kind;
    const secondary = el('span', 'option-name', 'the agent calls it ');
    secondary.append(isolated('option-agent-name', name));
    // The accessible name is the visible text: the kind first.
    choice.append(el('span', 'option-kind', label), ' ', secondary);
    box.append(choice);
  }
  const decline = button('', () => choose(null), 'option option-decline');
  decline.dataset.kind = 'decline';
  decline.append(el('span', 'option-kind', 'Decline'), ' ', el('span', 'option-name', 'the agent is told: cancelled'));
  box.append(decline);
  return box;
}

/**
 * An option kind in the hub's words (`allow_always`: `Always allow`).
 * @param {unknown} kind
 * @returns {string}
 */
export function optionLabel(kind) {
  return OPTION_LABELS[String(kind ?? '')] ?? 'Unknown choice';
}
