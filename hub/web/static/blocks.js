// @ts-check
/**
 * Renderers of single pieces of session data, shared by the transcript, the side panels and
 * the dialogs: content blocks, terminals, and permission records. Each takes plain folded
 * data and returns new DOM; none keeps state.
 */

import { renderAnsi } from './ansi.js';
import { CLOSE } from './close-codes.js';
import { el, labelize, token } from './dom.js';
import { linkTarget, renderMarkdown, safeUrl } from './markdown.js';
import { optionLabel, revealHidden } from './request.js';

/** Terminal output beyond this many bytes is trimmed from the start when drawn. */
const TERMINAL_TAIL = 256 * 1024;

/**
 * Describe a permission outcome using the request's option names.
 * @param {any} record
 * @returns {string}
 */
export function describeOutcome(record) {
  const outcome = record?.outcome;
  if (!outcome || typeof outcome !== 'object') return '';
  if (outcome.outcome === 'selected') return describeChoice(record, outcome.optionId, record?.optionKind);
  if (outcome.outcome === 'cancelled' && record?.status === 'resolved') return 'Declined';
  return labelize(outcome.outcome);
}

/**
 * An option chosen, by its kind in the hub's words, with the agent's name for it:
 * `Always allow ("Reject")`.
 * @param {any} record a permission record
 * @param {unknown} optionId
 * @param {unknown} [kind] the kind the hub recorded (`optionKind`), else the option's
 * @returns {string}
 */
export function describeChoice(record, optionId, kind) {
  const options = Array.isArray(record?.request?.options) ? record.request.options : [];
  const option = options.find((/** @type {any} */ o) => o?.optionId === optionId);
  const label = optionLabel(kind ?? option?.kind);
  const name = String(option?.name ?? optionId);
  return name === label ? label : `${label} ("${name}")`;
}

/**
 * Who did something, for people: the name, and the role when the record carries it.
 * @param {any} principal `{clientId, name?, role?}` as the hub reports it
 * @returns {string}
 */
export function describePrincipal(principal) {
  const name = String(principal?.name ?? principal?.clientId ?? 'someone');
  return typeof principal?.role === 'string' ? `${name} (${principal.role})` : name;
}

/**
 * Concatenate consecutive text blocks (chunks of one message) so markdown sees whole text.
 * @param {any[]} blocks
 * @returns {any[]}
 */
export function mergeText(blocks) {
  /** @type {any[]} */
  const merged = [];
  for (const block of blocks) {
    const last = merged[merged.length - 1];
    if (block?.type === 'text' && last?.type === 'text') last.text += String(block.text ?? '');
    else if (block?.type === 'text') merged.push({ type: 'text', text: String(block.text ?? '') });
    else merged.push(block);
  }
  return merged;
}

/**
 * One content block (message content or tool-call `content` item payload).
 * @param {any} block
 * @returns {Node}
 */
export function renderBlock(block) {
  switch (block?.type) {
    case 'text':
      return renderMarkdown(String(block.text ?? ''));
    case 'image': {
      const mime = String(block.mimeType ?? '');
      const data = String(block.data ?? '');
      if (/^image\/(png|jpeg|gif|webp)$/.test(mime) && /^[A-Za-z0-9+/=\s]*$/.test(data)) {
        // Framed as the agent's: an image can look like anything, the hub's own records too.
        const figure = el('figure', 'block-image-frame');
        const img = /** @type {HTMLImageElement} */ (el('img', 'block-image'));
        img.alt = 'image from the agent';
        img.src = `data:${mime};base64,${data.replace(/\s/g, '')}`;
        figure.append(el('figcaption', 'block-image-caption', 'Image from the agent'), img);
        return figure;
      }
      return el('p', 'block-other', `[image: ${mime}]`);
    }
    case 'resource_link': {
      const href = safeUrl(String(block.uri ?? ''));
      const label = String(block.title || block.name || block.uri || 'resource');
      if (!href) return el('p', 'block-link', `${label} (${String(block.uri ?? '')})`);
      const p = el('p', 'block-link');
      const a = /** @type {HTMLAnchorElement} */ (el('a', '', label));
      a.href = href;
      a.rel = 'noopener noreferrer';
      a.target = '_blank';
      p.append(a);
      if (label !== href) p.append(el('span', 'link-host', ` (${linkTarget(href)})`));
      return p;
    }
    case 'resource': {
      const resource = block.resource ?? {};
      const box = el('div', 'block-resource');
      box.append(el('div', 'block-resource-uri', String(resource.uri ?? 'resource')));
      if (typeof resource.text === 'string') box.append(el('pre', '', resource.text));
      return box;
    }
    default:
      return el('p', 'block-other', `[${String(block?.type ?? 'unknown')} content]`);
  }
}

/**
 * Decode a terminal's bytes (the tail, when huge) into text.
 * @param {import('./fold.js').Terminal} terminal
 * @returns {{text: string, trimmed: number}}
 */
export function terminalText(terminal) {
  const total = terminal.size;
  const keep = Math.min(total, TERMINAL_TAIL);
  const bytes = new Uint8Array(keep);
  let offset = keep;
  for (let i = terminal.chunks.length - 1; i >= 0 && offset > 0; i--) {
    const chunk = terminal.chunks[i];
    const take = Math.min(chunk.length, offset);
    bytes.set(chunk.subarray(chunk.length - take), offset - take);
    offset -= take;
  }
  return { text: new TextDecoder('utf-8', { fatal: false }).decode(bytes), trimmed: total - keep };
}

/**
 * Fill `box` with a terminal's header (command, cwd, exit) and its output.
 * @param {HTMLElement} box
 * @param {import('./fold.js').Terminal | undefined} terminal
 */
export function fillTerminal(box, terminal) {
  const header = el('header', 'terminal-header');
  if (!terminal) {
    header.append(el('span', 'terminal-command', 'terminal'), el('span', 'terminal-exit', 'waiting for output'));
    box.replaceChildren(header);
    return;
  }
  header.append(el('span', 'terminal-command', terminal.command ? `$ ${terminal.command}` : 'terminal'));
  if (terminal.cwd) header.append(el('span', 'terminal-cwd', terminal.cwd));
  const exit = terminal.exitStatus;
  if (exit) {
    const failed = (exit.exitCode ?? 0) !== 0 || Boolean(exit.signal);
    const text = exit.signal ? `killed by ${exit.signal}` : exit.exitCode != null ? `exit ${exit.exitCode}` : 'exited';
    header.append(el('span', `terminal-exit ${failed ? 'exit-failed' : 'exit-ok'}`, text));
  } else {
    header.append(el('span', 'terminal-exit exit-running', 'running'));
  }
  const { text, trimmed } = terminalText(terminal);
  const pre = el('pre', 'terminal-output');
  pre.tabIndex = 0;
  pre.setAttribute('aria-label', `Output of ${terminal.command ?? 'terminal'}`);
  if (trimmed > 0) pre.append(el('span', 'terminal-trimmed', `… ${trimmed} earlier bytes not shown\n`));
  pre.append(renderAnsi(text));
  box.replaceChildren(header, pre);
}

/**
 * One line telling a permission request's fate, and who decided it.
 * @param {import('./fold.js').PermissionRecord} record
 * @returns {HTMLElement}
 */
export function permissionLine(record) {
  const status = token(record.status);
  const line = el('p', `perm perm-${status}`);
  line.dataset.permissionId = record.permissionId;
  const title = String(record.request?.title ?? 'Permission');
  line.append(el('span', 'perm-label', 'Permission'), el('span', 'perm-title', title));
  let text;
  switch (record.status) {
    case 'pending':
      text = 'waiting for an answer';
      break;
    case 'resolved': {
      const by = record.resolvedBy;
      // Answered by a permission rule (docs/arbitration.md): which one, and who added it.
      const who = by?.rule ? `rule ${String(by.rule)} (added by ${String(by.createdBy ?? 'config')})` : describePrincipal(by);
      text = `${describeOutcome(record) || 'answered'} by ${who}`;
      break;
    }
    case 'timed_out':
      text = 'timed out';
      break;
    default:
      text = labelize(record.status);
  }
  line.append(el('span', 'perm-result', text));
  // Under consensus: who allowed so far, each with what the answer meant.
  const approvals = Array.isArray(record.approvals) ? record.approvals : [];
  if (approvals.length) {
    const votes = approvals.map((/** @type {any} */ a) => `${String(a?.name || a?.principal || 'someone')}: ${describeChoice(record, a?.optionId, a?.optionKind)}`);
    const needed = typeof record.needed === 'number' ? ` of ${record.needed} needed` : '';
    line.append(el('span', 'perm-votes', `${approvals.length}${needed} allowed (${votes.join('; ')})`));
  }
  // The request's words, marked as the request itself showed them.
  revealHidden(line);
  return line;
}

/**
 * The class of a permission option's button: allow, reject or other, from its `kind`.
 * @param {unknown} kind
 * @returns {string}
 */
export function optionClass(kind) {
  const text = String(kind ?? '');
  return `option option-${text.startsWith('allow') ? 'allow' : text.startsWith('reject') ? 'reject' : 'other'}`;
}

/**
 * A connection's state for people.
 * @param {import('./rpc.js').ConnectionStatus} status
 * @returns {string}
 */
export function connectionText(status) {
  switch (status.state) {
    case 'ready':
      return 'live';
    case 'waiting':
      return status.retryInMs === undefined ? 'reconnecting…' : `reconnecting in ${Math.ceil(status.retryInMs / 1000)} s`;
    case 'closed':
      return status.code === CLOSE.POLICY ? 'not allowed (check the link or token)' : 'disconnected';
    default:
      return 'connecting…';
  }
}
