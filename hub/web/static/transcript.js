// @ts-check
/**
 * The transcript: the session's timeline (messages, tool calls, terminals no tool call shows)
 * drawn into a scrolling log.
 *
 * Theory of operation: the view hands every frame's dirty keys to {@link Transcript#render}.
 * New timeline entries are appended; an entity whose key is dirty is redrawn in place. When a
 * frame brings more entries than {@link WINDOW} (a long session opening), only the newest are
 * drawn and a button reveals the earlier ones on demand, so opening a session costs the same
 * whatever its length; while the reader follows the end, the drawn part stays bounded too.
 * A huge message still streaming is re-parsed at most a few times a second.
 */

import { fillTerminal, mergeText, permissionLine, renderBlock } from './blocks.js';
import { renderDiff } from './diff.js';
import { button, el, labelize, token } from './dom.js';
import { revealHidden } from './request.js';


/** @typedef {import('./fold.js').SessionModel} SessionModel */

/** Timeline entries drawn at most per reveal. */
export const WINDOW = 300;
/** Drawn transcripts longer than this many entries let the browser skip off-screen ones. */
const LONG_TRANSCRIPT = 100;
/** Messages longer than this (characters) are redrawn at most every 8 ms per KiB. */
const HEAVY_MESSAGE = 4 * 1024;
const HEAVY_MS_PER_KIB = 8;
const HEAVY_MAX_PAUSE_MS = 2000;
/** Text blocks longer than this (characters) are drawn as plain text, not markdown. */
const PLAIN_TEXT_OVER = 64 * 1024;

export class Transcript {
  /**
   * @param {SessionModel} model
   * @param {{agentName: () => string, schedule: () => void}} context
   */
  constructor(model, context) {
    this.model = model;
    this.context = context;
    /** @type {Map<string, HTMLElement>} */
    this.elements = new Map();
    /** @type {Map<string, HTMLElement[]>} terminal id -> drawn terminal boxes */
    this.terminalBoxes = new Map();
    /** @type {Map<string, number>} when a heavy message was last drawn */
    this.drawnAt = new Map();
    this.start = 0;
    this.end = 0;

    this.element = el('div', 'timeline');
    this.element.setAttribute('role', 'log');
    this.element.setAttribute('aria-live', 'polite');
    this.element.setAttribute('aria-label', 'Session transcript');
    // A scrolling region must be reachable with the keyboard.
    this.element.tabIndex = 0;
    this.earlier = button('Show earlier', () => this.revealEarlier(), 'earlier');
    this.earlier.hidden = true;
    this.empty = el('p', 'empty', 'Nothing here yet.');
    this.entries = el('div', 'entries');
    this.element.append(this.earlier, this.empty, this.entries);
    /** @type {HTMLElement[]} the elements that may scroll the transcript, innermost first */
    this.scrollers = [this.element];
  }

  /** Forget everything drawn (a reset). */
  clear() {
    this.entries.replaceChildren();
    this.elements.clear();
    this.terminalBoxes.clear();
    this.drawnAt.clear();
    this.start = 0;
    this.end = 0;
  }

  /**
   * The element that scrolls the transcript: the timeline itself in the desktop layout, the
   * main column on narrow screens, the document in the embed view.
   * @returns {Element | null}
   */
  scroller() {
    for (const candidate of this.scrollers) {
      const overflow = getComputedStyle(candidate).overflowY;
      if (overflow === 'auto' || overflow === 'scroll') return candidate;
    }
    return document.scrollingElement;
  }

  /** @returns {boolean} whether the reader is at (or near) the end */
  atBottom() {
    const scroller = this.scroller();
    return scroller ? scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120 : true;
  }

  scrollToEnd() {
    const scroller = this.scroller();
    if (scroller) scroller.scrollTop = scroller.scrollHeight;
  }

  /**
   * Draw new entries and redraw the dirty ones.
   * @param {Set<string>} dirty
   * @param {boolean} atBottom
   * @returns {boolean} whether anything moved (deferred redraws alone do not count)
   */
  render(dirty, atBottom) {
    const timeline = this.model.timeline;
    if (timeline.length - this.end > WINDOW) {
      // Too much at once (a long session opening): draw only the newest entries.
      this.entries.replaceChildren();
      this.elements.clear();
      this.terminalBoxes.clear();
      this.start = timeline.length - WINDOW;
      this.end = this.start;
    }
    const fresh = new Set();
    if (this.end < timeline.length) {
      const fragment = document.createDocumentFragment();
      for (; this.end < timeline.length; this.end++) {
        const entry = timeline[this.end];
        fragment.append(this.drawEntry(entry));
        fresh.add(entry.key);
      }
      this.entries.append(fragment);
    }
    const now = performance.now();
    let deferred = 0;
    for (const key of dirty) {
      if (fresh.has(key)) continue;
      if (key.startsWith('term:')) {
        this.redrawTerminal(key.slice(5));
        continue;
      }
      const node = this.elements.get(key);
      if (!node) continue;
      // A huge streaming message is re-parsed at most a few times a second, not per frame.
      const weight = key.startsWith('m:') ? this.messageSize(key.slice(2)) : 0;
      const last = this.drawnAt.get(key) ?? 0;
      // Redraw cost grows with the size, so the pause between redraws does too: the share
      // of the main thread a streaming message takes stays bounded.
      const pause = Math.min(HEAVY_MAX_PAUSE_MS, (weight / 1024) * HEAVY_MS_PER_KIB);
      if (weight > HEAVY_MESSAGE && now - last < pause) {
        this.model.dirty.add(key);
        this.context.schedule();
        deferred += 1;
        continue;
      }
      this.redrawEntry(key, node);
      if (weight > HEAVY_MESSAGE) this.drawnAt.set(key, now);
    }
    if (atBottom && this.end - this.start > 2 * WINDOW) this.trimOldest();
    this.updateEarlier();
    const long = this.end - this.start > LONG_TRANSCRIPT;
    if (this.entries.classList.contains('long') !== long) this.entries.classList.toggle('long', long);
    // Touch the DOM only on change: any write invalidates layout, and the next read of a
    // scroll position would lay the whole transcript out again.
    if (this.empty.hidden !== timeline.length > 0) this.empty.hidden = timeline.length > 0;
    return deferred !== dirty.size;
  }

  updateEarlier() {
    const hidden = this.start === 0;
    const label = `Show earlier (${this.start})`;
    if (this.earlier.hidden !== hidden) this.earlier.hidden = hidden;
    if (this.earlier.textContent !== label) this.earlier.textContent = label;
  }

  /**
   * The text size of a message (what a redraw has to parse).
   * @param {string} id
   * @returns {number}
   */
  messageSize(id) {
    let size = 0;
    for (const block of this.model.messages.get(id)?.blocks ?? []) size += block?.text?.length ?? 0;
    return size;
  }

  /** Keep the drawn transcript bounded while the reader follows the end of a long session. */
  trimOldest() {
    const keep = this.end - WINDOW;
    for (; this.start < keep; this.start++) {
      const key = this.model.timeline[this.start].key;
      this.elements.get(key)?.remove();
      this.elements.delete(key);
      this.drawnAt.delete(key);
    }
  }

  /** Reveal the previous window of entries above the drawn ones. */
  revealEarlier() {
    const scroller = this.scroller();
    const before = scroller ? scroller.scrollHeight : 0;
    const from = Math.max(0, this.start - WINDOW);
    const fragment = document.createDocumentFragment();
    for (let i = from; i < this.start; i++) fragment.append(this.drawEntry(this.model.timeline[i]));
    this.entries.prepend(fragment);
    this.start = from;
    this.updateEarlier();
    if (scroller) scroller.scrollTop += scroller.scrollHeight - before;
  }

  /**
   * @param {import('./fold.js').TimelineEntry} entry
   * @returns {HTMLElement}
   */
  drawEntry(entry) {
    const node = el(entry.kind === 'message' ? 'article' : 'section', `entry entry-${entry.kind}`);
    node.dataset.key = entry.key;
    this.elements.set(entry.key, node);
    this.redrawEntry(entry.key, node);
    return node;
  }

  /**
   * @param {string} key
   * @param {HTMLElement} node
   */
  redrawEntry(key, node) {
    const colon = key.indexOf(':');
    const kind = key.slice(0, colon);
    const id = key.slice(colon + 1);
    if (kind === 'm') this.drawMessage(node, id);
    else if (kind === 't') this.drawTool(node, id);
    else if (kind === 'term') this.drawStandaloneTerminal(node, id);
  }

  /**
   * @param {HTMLElement} node
   * @param {string} id
   */
  drawMessage(node, id) {
    const message = this.model.messages.get(id);
    if (!message) return;
    node.className = `entry entry-message msg msg-${message.role}`;
    node.dataset.messageId = id;
    const body = el('div', 'msg-body');
    for (const block of mergeText(message.blocks)) {
      if (block?.type === 'text' && block.text.length > PLAIN_TEXT_OVER) {
        // Markdown is for reading; a message this long is shown as plain text, its end first.
        const full = String(block.text);
        const pre = el('pre', 'msg-plain', full.slice(-PLAIN_TEXT_OVER));
        const note = el('p', 'msg-note', `A very long message (${full.length.toLocaleString()} characters): its end, as plain text. `);
        const all = button('Show all', () => {
          pre.textContent = full;
          all.remove();
        }, 'show-all');
        note.append(all);
        body.append(note, pre);
      } else {
        body.append(renderBlock(block));
      }
    }
    if (message.role === 'thought') {
      // Keep the reader's open/closed choice across redraws.
      let details = /** @type {HTMLDetailsElement | null} */ (node.querySelector(':scope > details'));
      if (!details) {
        details = /** @type {HTMLDetailsElement} */ (el('details', 'thought'));
        details.append(el('summary', 'msg-who', 'Thinking'));
        node.replaceChildren(details);
      }
      details.querySelector(':scope > .msg-body')?.remove();
      details.append(body);
      return;
    }
    const header = el('header', 'msg-who');
    if (message.role === 'user') {
      // A person's name only on what the hub saw that person send (`_hub_prompt`); any other
      // user message is the agent's word about what someone said.
      const sender = this.model.prompts.get(id);
      if (sender) {
        header.textContent = sender.name ? String(sender.name) : 'User';
        // The sender's role, when the hub's record carries it.
        if (typeof sender.role === 'string') header.append(el('span', 'msg-role', ` · ${sender.role}`));
      } else {
        header.textContent = `${this.context.agentName() || 'Agent'} (as a user message, not sent through acp-hub)`;
        node.classList.add('msg-unattributed');
      }
    } else {
      header.textContent = this.context.agentName() || 'Agent';
    }
    node.replaceChildren(header, body);
  }

  /**
   * @param {HTMLElement} node
   * @param {string} id
   */
  drawTool(node, id) {
    const tool = this.model.tools.get(id);
    if (!tool) return;
    const status = String(tool.status ?? 'pending');
    node.className = `entry entry-tool tool tool-${token(status)}`;
    const header = el('header', 'tool-header');
    header.append(
      el('span', 'tool-kind', labelize(tool.kind ?? 'tool')),
      el('span', 'tool-title', String(tool.title ?? id)),
      el('span', `tool-status status-${token(status)}`, labelize(status)),
    );
    const parts = [header];
    // A location a diff of the content shows already (in its file header) is not repeated.
    const diffed = new Set();
    for (const item of Array.isArray(tool.content) ? tool.content : []) {
      if (item?.type !== 'diff') continue;
      if (typeof item.path === 'string') diffed.add(item.path);
      for (const change of Array.isArray(item.changes) ? item.changes : []) diffed.add(String(change?.path ?? ''));
    }
    const locations = Array.isArray(tool.locations) ? tool.locations.filter((l) => !diffed.has(String(l?.path ?? ''))) : [];
    if (locations.length) {
      const list = el('ul', 'tool-locations');
      for (const location of locations) {
        // Each path on its own, isolated: one path's characters cannot reorder another.
        const item = el('li', '');
        const path = el('bdi', 'verbatim', String(location?.path ?? ''));
        path.dir = 'ltr';
        item.append(path, location?.line != null ? `:${location.line}` : '');
        list.append(item);
      }
      parts.push(list);
    }
    const content = el('div', 'tool-content');
    for (const item of Array.isArray(tool.content) ? tool.content : []) {
      if (item?.type === 'content') content.append(renderBlock(item.content));
      else if (item?.type === 'diff') content.append(renderDiff(item));
      else if (item?.type === 'terminal') content.append(this.terminalBox(String(item.terminalId)));
      else content.append(el('p', 'block-other', `[${String(item?.type ?? 'unknown')} content]`));
    }
    parts.push(content);
    for (const record of this.model.permissionsFor(id)) parts.push(permissionLine(record));
    if (tool.rawInput !== undefined && !(Array.isArray(tool.content) && tool.content.length)) {
      const details = el('details', 'tool-raw');
      details.append(el('summary', '', 'Input'), el('pre', '', JSON.stringify(tool.rawInput, null, 2)));
      parts.push(details);
    }
    // The tool call a request may be about shows its words as the request did: hidden and
    // bidirectional characters marked (terminal output is left as the terminal wrote it).
    for (const part of parts) if (part !== content) revealHidden(part);
    for (const child of content.children) if (!child.classList.contains('terminal')) revealHidden(child);
    node.replaceChildren(...parts);
  }

  /**
   * A terminal box registered for redraws when its bytes change.
   * @param {string} terminalId
   * @returns {HTMLElement}
   */
  terminalBox(terminalId) {
    const box = el('div', 'terminal');
    box.dataset.terminalId = terminalId;
    const boxes = (this.terminalBoxes.get(terminalId) ?? []).filter((b) => b.isConnected);
    boxes.push(box);
    this.terminalBoxes.set(terminalId, boxes);
    fillTerminal(box, this.model.terminals.get(terminalId));
    return box;
  }

  /** @param {string} terminalId */
  redrawTerminal(terminalId) {
    const standalone = this.elements.get(`term:${terminalId}`);
    if (standalone) this.drawStandaloneTerminal(standalone, terminalId);
    for (const box of this.terminalBoxes.get(terminalId) ?? []) fillTerminal(box, this.model.terminals.get(terminalId));
  }

  /**
   * A terminal not shown inside any tool call gets its own timeline entry.
   * @param {HTMLElement} node
   * @param {string} terminalId
   */
  drawStandaloneTerminal(node, terminalId) {
    if (this.model.terminalRefs.has(terminalId)) {
      node.hidden = true;
      node.replaceChildren();
      return;
    }
    node.hidden = false;
    let box = /** @type {HTMLElement | null} */ (node.firstElementChild);
    if (!box) {
      box = el('div', 'terminal');
      node.append(box);
    }
    fillTerminal(box, this.model.terminals.get(terminalId));
  }
}

