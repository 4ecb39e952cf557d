// @ts-check
/**
 * The session view: draws a {@link SessionModel} into the page.
 *
 * Theory of operation: the model is folded as soon as updates arrive; the view is told to
 * `schedule()`, and once per animation frame it takes the model's dirty keys and redraws only
 * those entities (a message, a tool call, a terminal, a plan, a permission record, a side
 * panel). New timeline entries are appended; when a frame brings more entries than
 * {@link WINDOW} (a long session opening), only the newest are drawn and a button reveals the
 * earlier ones on demand, so opening a session costs the same whatever its length.
 *
 * Every piece of agent or client data reaches the DOM through textContent, the markdown,
 * ANSI and diff renderers (which do the same), or attribute setters on elements we created.
 */

import { renderAnsi } from './ansi.js';
import { renderDiff } from './diff.js';
import { renderMarkdown, safeUrl } from './markdown.js';

/** @typedef {import('./fold.js').SessionModel} SessionModel */
/** @typedef {import('./rpc.js').ConnectionStatus} ConnectionStatus */

/** @typedef {{box: HTMLElement, body: HTMLElement}} Panel */

/**
 * @typedef {{
 *   prompt: (text: string) => Promise<void>,
 *   cancel: () => void,
 *   setConfig: (configId: string, type: 'id' | 'boolean', value: string | boolean) => Promise<void>,
 *   withdraw: (queueId: string) => Promise<void>,
 *   answer: (requestId: string | number, optionId: string | null) => void,
 * }} Actions
 */

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
/** Terminal output beyond this many bytes is trimmed from the start when drawn. */
const TERMINAL_TAIL = 256 * 1024;

const PLAN_GLYPHS = /** @type {Record<string, string>} */ ({ completed: '✓', in_progress: '▶', pending: '○' });

const ROLE_RANK = { viewer: 0, approver: 1, driver: 2, owner: 3 };

/**
 * @param {string} tag
 * @param {string} [className]
 * @param {string} [text]
 * @returns {HTMLElement}
 */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * @param {string} text
 * @param {() => void} onClick
 * @param {string} [className]
 * @returns {HTMLButtonElement}
 */
function button(text, onClick, className) {
  const node = /** @type {HTMLButtonElement} */ (el('button', className, text));
  node.type = 'button';
  node.addEventListener('click', onClick);
  return node;
}

/**
 * @param {unknown} value
 * @returns {string}
 */
function labelize(value) {
  return String(value ?? '').replace(/_/g, ' ');
}

/**
 * Describe a permission outcome using the request's option names.
 * @param {any} record
 * @returns {string}
 */
export function describeOutcome(record) {
  const outcome = record?.outcome;
  if (!outcome || typeof outcome !== 'object') return '';
  if (outcome.outcome === 'selected') {
    const options = Array.isArray(record?.request?.options) ? record.request.options : [];
    const option = options.find((/** @type {any} */ o) => o?.optionId === outcome.optionId);
    return option ? `${option.name}` : String(outcome.optionId);
  }
  return labelize(outcome.outcome);
}

/**
 * Concatenate consecutive text blocks (chunks of one message) so markdown sees whole text.
 * @param {any[]} blocks
 * @returns {any[]}
 */
function mergeText(blocks) {
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
        const img = /** @type {HTMLImageElement} */ (el('img', 'block-image'));
        img.alt = 'image from the agent';
        img.src = `data:${mime};base64,${data.replace(/\s/g, '')}`;
        return img;
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
function terminalText(terminal) {
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

export class SessionView {
  // The page parts build() makes, declared here so that their types are known.
  /** @type {HTMLElement} */
  header;
  /** @type {HTMLElement} */
  title;
  /** @type {HTMLElement} */
  connection;
  /** @type {HTMLElement} */
  stateBadge;
  /** @type {HTMLElement} */
  main;
  /** @type {HTMLElement} */
  timeline;
  /** @type {HTMLButtonElement} */
  earlier;
  /** @type {HTMLElement} */
  empty;
  /** @type {HTMLElement} */
  entries;
  /** @type {HTMLElement} */
  aside;
  /** @type {Panel} */
  statePanel;
  /** @type {Panel} */
  presencePanel;
  /** @type {Panel} */
  queuePanel;
  /** @type {Panel} */
  configPanel;
  /** @type {Panel} */
  usagePanel;
  /** @type {Panel} */
  planPanel;
  /** @type {Panel} */
  permissionsPanel;
  /** @type {Panel} */
  commandsPanel;
  /** @type {HTMLElement} */
  dock;
  /** @type {HTMLElement} */
  dialogs;
  /** @type {HTMLFormElement} */
  composer;
  /** @type {HTMLTextAreaElement} */
  input;
  /** @type {HTMLButtonElement} */
  sendButton;
  /** @type {HTMLButtonElement} */
  cancelButton;
  /** @type {HTMLElement} */
  composerError;
  /** @type {HTMLElement} */
  announcer;

  /**
   * @param {HTMLElement} root
   * @param {SessionModel} model
   * @param {Actions} actions
   * @param {{embed?: boolean, sessionId: string}} options
   */
  constructor(root, model, actions, options) {
    this.root = root;
    this.model = model;
    this.actions = actions;
    this.embed = Boolean(options.embed);
    this.sessionId = options.sessionId;
    this.role = 'viewer';
    this.clientId = '';
    this.agentName = '';
    /** @type {Map<string, HTMLElement>} */
    this.elements = new Map();
    /** @type {Map<string, HTMLElement[]>} terminal id -> drawn terminal boxes */
    this.terminalBoxes = new Map();
    this.start = 0;
    this.end = 0;
    this.frame = 0;
    /** @type {Map<string | number, {params: any, node: HTMLElement}>} */
    this.requests = new Map();
    this.stickToBottom = false;
    /** @type {Map<string, number>} when a heavy message was last drawn */
    this.drawnAt = new Map();
    this.build();
  }

  build() {
    const root = this.root;
    root.classList.add('session-app');
    if (this.embed) root.classList.add('embed');

    this.header = el('header', 'app-header');
    this.title = el('h1', 'session-title', 'Session');
    this.connection = el('span', 'conn conn-connecting', 'connecting');
    this.connection.setAttribute('role', 'status');
    this.stateBadge = el('span', 'state-badge', '');
    const titleRow = el('div', 'title-row');
    if (!this.embed) {
      const back = /** @type {HTMLAnchorElement} */ (el('a', 'back', 'Sessions'));
      back.href = `/${location.search}`;
      titleRow.append(back);
    }
    titleRow.append(this.title);
    const statusRow = el('div', 'status-row');
    statusRow.append(this.stateBadge, this.connection);
    this.header.append(titleRow, statusRow);

    this.main = el('main', 'layout');
    this.timeline = el('div', 'timeline');
    this.timeline.setAttribute('role', 'log');
    this.timeline.setAttribute('aria-live', 'polite');
    this.timeline.setAttribute('aria-label', 'Session transcript');
    // A scrolling region must be reachable with the keyboard.
    this.timeline.tabIndex = 0;
    this.earlier = button('Show earlier', () => this.revealEarlier(), 'earlier');
    this.earlier.hidden = true;
    this.empty = el('p', 'empty', 'Nothing here yet.');
    this.entries = el('div', 'entries');
    this.timeline.append(this.earlier, this.empty, this.entries);

    this.aside = el('aside', 'side');
    this.aside.setAttribute('aria-label', 'Session details');
    this.statePanel = this.panel('Status');
    this.presencePanel = this.panel('People');
    this.queuePanel = this.panel('Queue');
    this.configPanel = this.panel('Settings');
    this.usagePanel = this.panel('Usage');
    this.planPanel = this.panel('Plan');
    this.permissionsPanel = this.panel('Permissions');
    this.commandsPanel = this.panel('Commands');
    this.aside.append(
      this.statePanel.box,
      this.planPanel.box,
      this.permissionsPanel.box,
      this.presencePanel.box,
      this.queuePanel.box,
      this.configPanel.box,
      this.usagePanel.box,
      this.commandsPanel.box,
    );
    if (this.embed) {
      const details = el('details', 'embed-details');
      const summary = el('summary', '', 'Details');
      details.append(summary, this.aside);
      this.main.append(details, this.timeline);
    } else {
      this.main.append(this.timeline, this.aside);
    }

    this.dock = el('div', 'dock');
    this.dialogs = el('div', 'dialogs');
    this.composer = /** @type {HTMLFormElement} */ (el('form', 'composer'));
    this.composer.hidden = true;
    const label = el('label', 'visually-hidden', 'Message to the agent');
    label.setAttribute('for', 'prompt-input');
    this.input = /** @type {HTMLTextAreaElement} */ (el('textarea', 'prompt-input'));
    this.input.id = 'prompt-input';
    this.input.rows = 2;
    this.input.placeholder = 'Message the agent (Enter sends, Shift+Enter new line)';
    this.input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.submitPrompt();
      }
    });
    this.sendButton = /** @type {HTMLButtonElement} */ (el('button', 'send', 'Send'));
    this.sendButton.type = 'submit';
    this.cancelButton = button('Stop', () => this.actions.cancel(), 'cancel');
    this.cancelButton.setAttribute('aria-label', 'Stop the agent (cancel the turn)');
    this.composerError = el('p', 'composer-error');
    this.composerError.setAttribute('role', 'alert');
    const buttons = el('div', 'composer-buttons');
    buttons.append(this.sendButton, this.cancelButton);
    this.composer.append(label, this.input, buttons, this.composerError);
    this.composer.addEventListener('submit', (event) => {
      event.preventDefault();
      this.submitPrompt();
    });
    this.dock.append(this.dialogs, this.composer);

    this.announcer = el('div', 'visually-hidden');
    this.announcer.setAttribute('role', 'status');
    this.announcer.setAttribute('aria-live', 'polite');

    root.replaceChildren(this.header, this.main, this.dock, this.announcer);
  }

  /**
   * @param {string} name
   * @returns {Panel}
   */
  panel(name) {
    const box = el('section', `panel panel-${name.toLowerCase()}`);
    const heading = el('h2', 'panel-title', name);
    const body = el('div', 'panel-body');
    box.append(heading, body);
    box.hidden = true;
    return { box, body };
  }

  /** @param {string} text */
  announce(text) {
    this.announcer.textContent = text;
  }

  // -------------------------------------------------------------------------------------------
  // Inputs from the page

  /**
   * @param {string} role
   * @param {string} clientId
   */
  setRole(role, clientId) {
    this.role = role;
    this.clientId = clientId;
    this.root.dataset.role = role;
    this.composer.hidden = !this.may('driver');
    this.model.dirty.add('queue');
    this.model.dirty.add('config');
    this.schedule();
  }

  /** @param {string} name */
  setAgentName(name) {
    this.agentName = name;
  }

  /**
   * @param {string} needed
   * @returns {boolean}
   */
  may(needed) {
    return (ROLE_RANK[/** @type {keyof ROLE_RANK} */ (this.role)] ?? 0) >= (ROLE_RANK[/** @type {keyof ROLE_RANK} */ (needed)] ?? 9);
  }

  /** @param {ConnectionStatus} status */
  setConnection(status) {
    const labels = {
      connecting: 'connecting…',
      open: 'connecting…',
      ready: 'live',
      waiting: `reconnecting in ${Math.ceil((status.retryInMs ?? 0) / 1000)} s`,
      closed: status.code === 1008 ? 'not allowed (check the link or token)' : 'disconnected',
    };
    this.connection.textContent = labels[status.state];
    this.connection.className = `conn conn-${status.state}`;
    this.root.dataset.connection = status.state;
  }

  /** @param {string} message */
  showError(message) {
    const note = el('p', 'fatal', message);
    note.setAttribute('role', 'alert');
    this.entries.before(note);
  }

  async submitPrompt() {
    const text = this.input.value;
    if (!text.trim()) return;
    this.sendButton.disabled = true;
    this.composerError.textContent = '';
    try {
      await this.actions.prompt(text);
      this.input.value = '';
      this.stickToBottom = true;
    } catch (error) {
      this.composerError.textContent = error instanceof Error ? error.message : String(error);
    } finally {
      this.sendButton.disabled = false;
      this.input.focus();
    }
  }

  // -------------------------------------------------------------------------------------------
  // Permission requests sent to this client

  /**
   * Show a `session/request_permission` the hub sent to this client.
   * @param {string | number} requestId
   * @param {any} params
   */
  addRequest(requestId, params) {
    const dialog = el('section', 'permission-dialog');
    dialog.setAttribute('role', 'alertdialog');
    const titleId = `perm-title-${String(requestId).replace(/[^A-Za-z0-9_-]/g, '_')}`;
    dialog.setAttribute('aria-labelledby', titleId);
    const heading = el('h2', 'permission-title', String(params?.title ?? params?.toolCall?.title ?? 'Permission requested'));
    heading.id = titleId;
    dialog.append(el('p', 'permission-kicker', 'The agent asks for permission'), heading);
    if (params?.description) dialog.append(el('p', 'permission-description', String(params.description)));
    const subject = params?.subject;
    if (subject?.type === 'command') {
      const pre = el('pre', 'permission-command', String(subject.command ?? ''));
      dialog.append(pre);
      if (subject.cwd) dialog.append(el('p', 'permission-cwd', `in ${String(subject.cwd)}`));
    } else if (subject?.type === 'tool_call' && subject.toolCall) {
      const known = this.model.tools.get(String(subject.toolCall.toolCallId));
      const tool = { ...known, ...subject.toolCall };
      const line = el('p', 'permission-subject');
      line.append(el('span', 'tool-kind', labelize(tool.kind ?? 'tool')), document.createTextNode(` ${String(tool.title ?? tool.toolCallId ?? '')}`));
      dialog.append(line);
      for (const item of Array.isArray(tool.content) ? tool.content : []) {
        if (item?.type === 'diff') dialog.append(renderDiff(item));
      }
    }
    const options = el('div', 'permission-options');
    for (const option of Array.isArray(params?.options) ? params.options : []) {
      const kind = String(option?.kind ?? '');
      const choice = button(String(option?.name ?? option?.optionId), () => {
        this.actions.answer(requestId, String(option.optionId));
        this.removeRequest(requestId);
      }, `option option-${kind.startsWith('allow') ? 'allow' : kind.startsWith('reject') ? 'reject' : 'other'}`);
      options.append(choice);
    }
    dialog.append(options);
    this.requests.set(requestId, { params, node: dialog });
    this.dialogs.append(dialog);
    this.announce(`Permission requested: ${heading.textContent}`);
    const first = options.querySelector('button');
    // Take focus only when the user is not typing a prompt.
    if (first && document.activeElement !== this.input) first.focus();
  }

  /** @param {string | number} requestId */
  removeRequest(requestId) {
    const entry = this.requests.get(requestId);
    if (!entry) return;
    this.requests.delete(requestId);
    entry.node.remove();
  }

  /** Every request dies with the connection that carried it. */
  clearRequests() {
    for (const id of [...this.requests.keys()]) this.removeRequest(id);
  }

  /** Drop dialogs whose permission the log shows as no longer pending. */
  syncRequests() {
    for (const [requestId, { params }] of this.requests) {
      const permissionId = params?._meta?.['acp-hub']?.permissionId;
      for (const record of this.model.permissions.values()) {
        if (record.status === 'pending') continue;
        const same =
          permissionId !== undefined
            ? record.permissionId === String(permissionId)
            : record.request && record.request.title === params?.title &&
              JSON.stringify(record.request.options) === JSON.stringify(params?.options);
        if (same) this.removeRequest(requestId);
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // Rendering

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  /** Draw everything the model marked dirty since the last frame. */
  render() {
    const dirty = this.model.takeDirty();
    if (dirty.size === 0) return;
    const scroller = this.scroller();
    const atBottom =
      this.stickToBottom ||
      (scroller ? scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120 : true);
    this.stickToBottom = false;

    if (dirty.has('reset')) {
      this.entries.replaceChildren();
      this.elements.clear();
      this.terminalBoxes.clear();
      this.drawnAt.clear();
      this.start = 0;
      this.end = 0;
      for (const name of ['state', 'presence', 'queue', 'config', 'usage', 'info', 'agent', 'lease', 'policy', 'commands', 'closed', 'permissions', 'plans']) {
        dirty.add(name);
      }
    }
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
    let changed = dirty.size > 0;
    if (this.end < timeline.length) {
      const fragment = document.createDocumentFragment();
      for (; this.end < timeline.length; this.end++) {
        const entry = timeline[this.end];
        const node = this.drawEntry(entry);
        fresh.add(entry.key);
        fragment.append(node);
      }
      this.entries.append(fragment);
    }
    const now = performance.now();
    let deferred = 0;
    for (const key of dirty) {
      if (fresh.has(key)) continue;
      if (key.startsWith('term:')) this.redrawTerminal(key.slice(5));
      else {
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
          this.schedule();
          deferred += 1;
          continue;
        }
        this.redrawEntry(key, node);
        if (weight > HEAVY_MESSAGE) this.drawnAt.set(key, now);
      }
    }
    if (atBottom && this.end - this.start > 2 * WINDOW) this.trimOldest();
    // Only deferred redraws this frame: nothing moved.
    if (deferred === dirty.size) changed = false;
    this.updateEarlier();
    const long = this.end - this.start > LONG_TRANSCRIPT;
    if (this.entries.classList.contains('long') !== long) this.entries.classList.toggle('long', long);
    // Touch the DOM only on change: any write invalidates layout, and the next read of a
    // scroll position would lay the whole transcript out again.
    if (this.empty.hidden !== timeline.length > 0) this.empty.hidden = timeline.length > 0;

    if (dirty.has('state') || dirty.has('agent') || dirty.has('closed') || dirty.has('lease') || dirty.has('policy')) this.drawState();
    if (dirty.has('presence')) this.drawPresence();
    if (dirty.has('queue')) this.drawQueue();
    if (dirty.has('config')) this.drawConfig();
    if (dirty.has('usage')) this.drawUsage();
    if (dirty.has('commands')) this.drawCommands();
    if (dirty.has('info')) this.drawInfo();
    if (dirty.has('plans')) this.drawPlans();
    if (dirty.has('permissions')) {
      this.drawPermissions();
      this.syncRequests();
    }

    if (atBottom && scroller && changed) scroller.scrollTop = scroller.scrollHeight;
    this.root.dispatchEvent(new CustomEvent('rendered'));
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

  /**
   * The element that scrolls the transcript: the timeline itself in the desktop layout, the
   * main column on narrow screens, the document in the embed view.
   * @returns {Element | null}
   */
  scroller() {
    for (const candidate of [this.timeline, this.main]) {
      const overflow = getComputedStyle(candidate).overflowY;
      if (overflow === 'auto' || overflow === 'scroll') return candidate;
    }
    return document.scrollingElement;
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
    let who;
    if (message.role === 'user') {
      const sender = this.model.prompts.get(id);
      who = sender?.name ? String(sender.name) : 'User';
    } else {
      who = this.agentName || 'Agent';
    }
    const header = el('header', 'msg-who', who);
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
    node.className = `entry entry-tool tool tool-${status.replace(/[^a-z_]/gi, '')}`;
    const header = el('header', 'tool-header');
    header.append(
      el('span', 'tool-kind', labelize(tool.kind ?? 'tool')),
      el('span', 'tool-title', String(tool.title ?? id)),
      el('span', `tool-status status-${status.replace(/[^a-z_]/gi, '')}`, labelize(status)),
    );
    const parts = [header];
    if (Array.isArray(tool.locations) && tool.locations.length) {
      const list = el('ul', 'tool-locations');
      for (const location of tool.locations) {
        const line = location?.line != null ? `:${location.line}` : '';
        list.append(el('li', '', `${String(location?.path ?? '')}${line}`));
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
    for (const record of this.model.permissionsFor(id)) parts.push(this.permissionLine(record));
    if (tool.rawInput !== undefined && !(Array.isArray(tool.content) && tool.content.length)) {
      const details = el('details', 'tool-raw');
      details.append(el('summary', '', 'Input'), el('pre', '', JSON.stringify(tool.rawInput, null, 2)));
      parts.push(details);
    }
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
    this.fillTerminal(box, terminalId);
    return box;
  }

  /** @param {string} terminalId */
  redrawTerminal(terminalId) {
    const standalone = this.elements.get(`term:${terminalId}`);
    if (standalone) this.drawStandaloneTerminal(standalone, terminalId);
    const boxes = this.terminalBoxes.get(terminalId) ?? [];
    for (const box of boxes) this.fillTerminal(box, terminalId);
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
    this.fillTerminal(box, terminalId);
  }

  /**
   * @param {HTMLElement} box
   * @param {string} terminalId
   */
  fillTerminal(box, terminalId) {
    const terminal = this.model.terminals.get(terminalId);
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
   * One line telling a permission request's fate.
   * @param {import('./fold.js').PermissionRecord} record
   * @returns {HTMLElement}
   */
  permissionLine(record) {
    const status = String(record.status).replace(/[^a-z_]/gi, '');
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
        const by = record.resolvedBy?.name ?? record.resolvedBy?.clientId ?? 'someone';
        text = `${describeOutcome(record) || 'answered'} by ${by}`;
        break;
      }
      case 'timed_out':
        text = 'timed out';
        break;
      default:
        text = labelize(record.status);
    }
    line.append(el('span', 'perm-result', text));
    return line;
  }

  // -------------------------------------------------------------------------------------------
  // Side panels

  drawPlans() {
    const parts = [];
    for (const plan of this.model.plans.values()) {
      if (plan.type !== 'items') {
        parts.push(el('p', 'block-other', `[${plan.type} plan]`));
        continue;
      }
      const list = el('ol', 'plan-entries');
      list.dataset.planId = plan.planId;
      for (const entry of plan.entries) {
        const status = String(entry?.status ?? 'pending');
        const item = el('li', `plan-entry plan-${status.replace(/[^a-z_]/gi, '')}`);
        const glyph = el('span', 'plan-glyph', PLAN_GLYPHS[status] ?? '•');
        glyph.setAttribute('aria-hidden', 'true');
        item.append(glyph, el('span', 'plan-content', String(entry?.content ?? '')), el('span', 'plan-status', labelize(status)));
        if (entry?.priority) item.append(el('span', 'plan-priority', String(entry.priority)));
        list.append(item);
      }
      parts.push(list);
    }
    this.planPanel.body.replaceChildren(...parts);
    this.planPanel.box.hidden = parts.length === 0;
  }

  drawPermissions() {
    const records = [...this.model.permissions.values()];
    const list = el('div', 'perm-list');
    for (const record of records) list.append(this.permissionLine(record));
    this.permissionsPanel.body.replaceChildren(list);
    this.permissionsPanel.box.hidden = records.length === 0;
    const last = records[records.length - 1];
    if (last && last.status !== 'pending') this.announce(`Permission ${last.request?.title ?? ''}: ${list.lastElementChild?.querySelector('.perm-result')?.textContent ?? ''}`);
  }

  drawState() {
    const fg = this.model.fg;
    const parts = [];
    let badge = 'no turn yet';
    if (this.model.closed) badge = 'closed';
    else if (fg?.state === 'running') badge = 'running';
    else if (fg?.state === 'requires_action') badge = 'requires action';
    else if (fg) badge = fg.stopReason ? `idle · ${labelize(fg.stopReason)}` : labelize(fg.state);
    this.stateBadge.textContent = badge;
    // No state yet (a reset, or a session that never ran): claim nothing.
    const state = this.model.closed ? 'closed' : fg?.state ?? 'unknown';
    this.stateBadge.className = `state-badge state-${state.replace(/[^a-z_]/gi, '')}`;
    this.root.dataset.state = state;
    this.cancelButton.disabled = !(fg?.state === 'running' || fg?.state === 'requires_action');
    parts.push(el('p', '', `State: ${badge}`));
    const agent = this.model.agent;
    if (agent) {
      let text = `Agent ${String(agent.agent ?? '')}: ${labelize(agent.status)}`;
      if (agent.exitCode != null) text += ` (exit ${agent.exitCode})`;
      if (agent.signal) text += ` (${agent.signal})`;
      parts.push(el('p', `agent-status agent-${String(agent.status).replace(/[^a-z_]/gi, '')}`, text));
      if (agent.message) parts.push(el('p', 'agent-message', String(agent.message)));
    }
    if (this.model.policy) {
      parts.push(el('p', 'policy', `Prompts: ${labelize(this.model.policy.prompt)} · permissions: ${labelize(this.model.policy.permission)}`));
    }
    const lease = this.model.lease;
    if (lease && lease.holder) parts.push(el('p', 'lease', `Lease: ${String(lease.holder.name ?? lease.holder.clientId)}`));
    if (this.model.closed) parts.push(el('p', 'closed', 'This session is closed.'));
    this.statePanel.body.replaceChildren(...parts);
    this.statePanel.box.hidden = false;
    this.announce(`Agent ${badge}`);
  }

  drawPresence() {
    const list = el('ul', 'presence');
    for (const client of this.model.presence) {
      const item = el('li', 'presence-client');
      const you = client?.clientId && client.clientId === this.clientId ? ' (you)' : '';
      item.append(el('span', 'presence-name', `${String(client?.name ?? client?.clientId ?? '?')}${you}`), el('span', 'presence-role', String(client?.role ?? '')));
      list.append(item);
    }
    const { count, viewers } = this.model.presenceCounts;
    const unlisted = viewers - this.model.presence.filter((c) => c?.role === 'viewer').length;
    if (unlisted > 0) {
      // The hub counts a large audience instead of listing it.
      list.append(el('li', 'presence-audience', `${unlisted} ${unlisted === 1 ? 'viewer' : 'viewers'}`));
    }
    const total = Math.max(count, this.model.presence.length);
    this.presencePanel.body.replaceChildren(list);
    this.presencePanel.box.hidden = total === 0;
    this.presencePanel.box.querySelector('.panel-title')?.replaceChildren(`People (${total})`);
  }

  drawQueue() {
    const list = el('ol', 'queue');
    for (const entry of this.model.queue) {
      const item = el('li', 'queue-entry');
      item.append(el('span', 'queue-name', String(entry?.name ?? entry?.clientId ?? '')), el('span', 'queue-preview', String(entry?.preview ?? '')));
      if (entry?.clientId === this.clientId && this.may('driver')) {
        const withdraw = button('Withdraw', () => {
          withdraw.disabled = true;
          this.actions.withdraw(String(entry.queueId)).catch((error) => {
            withdraw.disabled = false;
            this.announce(`Could not withdraw: ${error instanceof Error ? error.message : error}`);
          });
        }, 'withdraw');
        withdraw.setAttribute('aria-label', `Withdraw queued prompt: ${String(entry?.preview ?? '')}`);
        item.append(withdraw);
      }
      list.append(item);
    }
    this.queuePanel.body.replaceChildren(list);
    this.queuePanel.box.hidden = this.model.queue.length === 0;
  }

  drawConfig() {
    const form = el('div', 'config');
    const enabled = this.may('driver');
    for (const option of this.model.configOptions) {
      const id = `config-${String(option?.configId).replace(/[^A-Za-z0-9_-]/g, '_')}`;
      const row = el('div', 'config-row');
      const label = /** @type {HTMLLabelElement} */ (el('label', '', String(option?.name ?? option?.configId)));
      label.htmlFor = id;
      if (option?.type === 'select') {
        const select = /** @type {HTMLSelectElement} */ (el('select'));
        select.id = id;
        select.disabled = !enabled;
        const options = Array.isArray(option.options) ? option.options : [];
        /** @param {any} choice @param {HTMLElement} parent */
        const addChoice = (choice, parent) => {
          const opt = /** @type {HTMLOptionElement} */ (el('option', '', String(choice?.name ?? choice?.value)));
          opt.value = String(choice?.value);
          opt.selected = choice?.value === option.currentValue;
          parent.append(opt);
        };
        for (const entry of options) {
          if (Array.isArray(entry?.options)) {
            const group = /** @type {HTMLOptGroupElement} */ (el('optgroup'));
            group.label = String(entry.name ?? entry.groupId);
            for (const choice of entry.options) addChoice(choice, group);
            select.append(group);
          } else addChoice(entry, select);
        }
        select.addEventListener('change', () => {
          this.actions.setConfig(String(option.configId), 'id', select.value).catch((error) => this.announce(String(error?.message ?? error)));
        });
        row.append(label, select);
      } else if (option?.type === 'boolean') {
        const box = /** @type {HTMLInputElement} */ (el('input'));
        box.type = 'checkbox';
        box.id = id;
        box.checked = Boolean(option.currentValue);
        box.disabled = !enabled;
        box.addEventListener('change', () => {
          this.actions.setConfig(String(option.configId), 'boolean', box.checked).catch((error) => this.announce(String(error?.message ?? error)));
        });
        row.append(box, label);
      } else {
        row.append(el('span', '', `${String(option?.name ?? option?.configId)}: ${JSON.stringify(option?.currentValue ?? null)}`));
      }
      if (option?.description) row.title = String(option.description);
      form.append(row);
    }
    this.configPanel.body.replaceChildren(form);
    this.configPanel.box.hidden = this.model.configOptions.length === 0;
  }

  drawUsage() {
    const usage = this.model.usage;
    if (!usage) {
      this.usagePanel.box.hidden = true;
      return;
    }
    const used = Number(usage.used ?? 0);
    const size = Number(usage.size ?? 0);
    const parts = [];
    const meter = /** @type {HTMLMeterElement} */ (el('meter'));
    meter.min = 0;
    meter.max = size || 1;
    meter.value = used;
    meter.setAttribute('aria-label', 'Context window used');
    parts.push(meter, el('p', '', `${used.toLocaleString()} / ${size.toLocaleString()} tokens`));
    if (usage.cost && typeof usage.cost.amount === 'number') {
      parts.push(el('p', 'cost', `${usage.cost.amount.toFixed(4)} ${String(usage.cost.currency ?? '')}`));
    }
    this.usagePanel.body.replaceChildren(...parts);
    this.usagePanel.box.hidden = false;
  }

  drawCommands() {
    const list = el('ul', 'commands');
    for (const command of this.model.commands) {
      const item = el('li');
      item.append(el('code', '', `/${String(command?.name ?? '')}`), document.createTextNode(` ${String(command?.description ?? '')}`));
      list.append(item);
    }
    this.commandsPanel.body.replaceChildren(list);
    this.commandsPanel.box.hidden = this.model.commands.length === 0;
  }

  drawInfo() {
    const title = this.model.info.title;
    this.title.textContent = title ? String(title) : `Session ${this.sessionId}`;
    if (!this.embed) document.title = `${this.title.textContent} · acp-hub`;
  }
}
