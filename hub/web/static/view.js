// @ts-check
/**
 * The session view: draws a {@link SessionModel} into the page.
 *
 * Theory of operation: the model is folded as soon as updates arrive; the view is told to
 * `schedule()`, and once per animation frame it takes the model's dirty keys and hands them to
 * its parts: the {@link Transcript} (messages, tool calls, terminals), the {@link SidePanels}
 * and the {@link Dialogs} (requests waiting for this person). The view itself owns the header
 * (title, state, connection) and the composer.
 *
 * Every piece of agent or client data reaches the DOM through textContent, the markdown,
 * ANSI and diff renderers (which do the same), or attribute setters on elements we created.
 */

import { connectionText } from './blocks.js';
import { Dialogs } from './dialogs.js';
import { button, el, errorText, labelize, token } from './dom.js';
import { SidePanels } from './panels.js';
import { Transcript } from './transcript.js';

export { WINDOW } from './transcript.js';

/** @typedef {import('./fold.js').SessionModel} SessionModel */
/** @typedef {import('./rpc.js').ConnectionStatus} ConnectionStatus */

/**
 * @typedef {{
 *   prompt: (text: string) => Promise<void>,
 *   cancel: () => void,
 * } & import('./panels.js').PanelActions & import('./dialogs.js').DialogActions} Actions
 */

const ROLE_RANK = /** @type {Record<string, number>} */ ({ viewer: 0, approver: 1, driver: 2, owner: 3 });

/** The media query of the one-column layout (the transcript, the panels behind a button). */
export const NARROW = '(max-width: 860px)';

const PLACEHOLDER = 'Message the agent (Enter sends, Shift+Enter new line)';

/** Every panel key: a reset redraws them all. */
const PANEL_KEYS = ['role', 'state', 'presence', 'queue', 'config', 'usage', 'info', 'agent', 'lease', 'policy', 'commands', 'closed', 'permissions', 'plans'];
/** The longest title the header shows (characters), as the hub clamps it. */
const TITLE_MAX = 200;

/**
 * Whether `role` includes `needed` (viewer < approver < driver < owner).
 * @param {string} role
 * @param {string} needed
 * @returns {boolean}
 */
export function roleAtLeast(role, needed) {
  return (ROLE_RANK[role] ?? 0) >= (ROLE_RANK[needed] ?? 9);
}

export class SessionView {
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
    this.frame = 0;
    this.stickToBottom = false;
    /** @type {HTMLButtonElement | null} the button of the details sheet (not in the embed view) */
    this.detailsButton = null;

    this.transcript = new Transcript(model, {
      agentName: () => this.agentName,
      schedule: () => this.schedule(),
    });
    this.panels = new SidePanels(model, actions, {
      clientId: () => this.clientId,
      may: (role) => this.may(role),
      announce: (text) => this.announce(text),
    });
    this.dialogs = new Dialogs(model, actions, {
      announce: (text) => this.announce(text),
      fallbackFocus: () => (this.composer.hidden ? this.transcript.element : this.input).focus(),
    });

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
    this.replay = el('div', 'replay');
    this.replay.hidden = true;
    this.replayBar = /** @type {HTMLProgressElement} */ (el('progress', 'replay-bar'));
    this.replayBar.setAttribute('aria-label', 'Loading the session');
    this.replayText = el('span', 'replay-text');
    this.replay.append(this.replayBar, this.replayText);
    const statusRow = el('div', 'status-row');
    statusRow.append(this.stateBadge, this.replay, this.connection);
    /** Who the page is and the Share button (filled by the controller): in the header on wide
     * screens, at the top of the details sheet on narrow ones. */
    this.account = el('div', 'account');
    this.header.append(titleRow, statusRow);

    this.main = el('main', 'layout');
    this.transcript.scrollers.push(this.main);
    if (this.embed) {
      const details = el('details', 'embed-details');
      details.append(el('summary', '', 'Details'), this.panels.element);
      this.main.append(details, this.transcript.element);
      statusRow.append(this.account);
    } else {
      this.main.append(this.transcript.element, this.panels.element);
      // Narrow screens show the transcript; the panels open over it from one header button.
      this.panels.element.id = 'session-details';
      this.panels.element.tabIndex = -1;
      this.detailsButton = button('Details', () => this.showDetails(!this.detailsOpen()), 'details-toggle');
      this.detailsButton.setAttribute('aria-controls', this.panels.element.id);
      this.detailsButton.setAttribute('aria-expanded', 'false');
      statusRow.append(this.detailsButton);
      this.panels.element.addEventListener('keydown', (event) => {
        if (event.key === 'Escape' && this.detailsOpen()) {
          event.preventDefault();
          this.showDetails(false);
        }
      });
    }
    // Whoever follows the end keeps following it when the transcript's box shrinks (a
    // permission dialog opening in the dock, the keyboard of a phone). The embed view grows
    // with its content instead.
    this.following = true;
    if (!this.embed) {
      this.transcript.element.addEventListener('scroll', () => {
        this.following = this.transcript.atBottom();
      }, { passive: true });
      new ResizeObserver(() => {
        if (this.following) this.transcript.scrollToEnd();
      }).observe(this.transcript.element);
    }

    this.dock = el('div', 'dock');
    this.composer = /** @type {HTMLFormElement} */ (el('form', 'composer'));
    this.composer.hidden = true;
    const label = el('label', 'visually-hidden', 'Message to the agent');
    label.setAttribute('for', 'prompt-input');
    this.input = /** @type {HTMLTextAreaElement} */ (el('textarea', 'prompt-input'));
    this.input.id = 'prompt-input';
    this.input.rows = 2;
    this.input.placeholder = PLACEHOLDER;
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
    this.dock.append(this.dialogs.element, this.composer);
    if (!this.embed) {
      const narrow = matchMedia(NARROW);
      const fit = () => this.fitWidth(narrow.matches, statusRow);
      narrow.addEventListener('change', fit);
      fit();
    }

    // What screen readers are told, politely: each message its own line, the last few kept,
    // so that one announcement does not overwrite another in the same moment.
    this.announcer = el('div', 'visually-hidden announcer');
    this.announcer.setAttribute('role', 'log');
    this.announcer.setAttribute('aria-live', 'polite');

    root.replaceChildren(this.header, this.main, this.dock, this.announcer);
  }

  /**
   * Arrange the page for its width: on narrow screens who the page is and Share go into the
   * details sheet, and the one-line prompt box gets a placeholder that fits it.
   * @param {boolean} narrow
   * @param {HTMLElement} statusRow
   */
  fitWidth(narrow, statusRow) {
    if (narrow) this.panels.element.prepend(this.account);
    else statusRow.insertBefore(this.account, this.detailsButton);
    this.input.placeholder = narrow ? 'Message the agent' : PLACEHOLDER;
    if (!narrow) this.showDetails(false);
  }

  /** @returns {boolean} whether the details sheet is open (narrow screens) */
  detailsOpen() {
    return this.root.classList.contains('details-open');
  }

  /**
   * Open or close the details sheet of narrow screens; focus goes into it, and back to its
   * button.
   * @param {boolean} open
   */
  showDetails(open) {
    if (!this.detailsButton) return;
    this.root.classList.toggle('details-open', open);
    this.detailsButton.setAttribute('aria-expanded', String(open));
    this.detailsButton.textContent = open ? 'Transcript' : 'Details';
    if (open) {
      this.panels.element.scrollTop = 0;
      this.panels.element.focus({ preventScroll: true });
    } else if (this.panels.element.contains(document.activeElement)) {
      this.detailsButton.focus();
    }
  }

  /** @param {string} text */
  announce(text) {
    if (this.announcer.lastElementChild?.textContent === text) return;
    this.announcer.append(el('p', '', text));
    while (this.announcer.childElementCount > 5) this.announcer.firstElementChild?.remove();
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
    this.composer.hidden = !this.may('driver') || Boolean(this.model.closed);
    for (const key of ['queue', 'config', 'role']) this.model.dirty.add(key);
    this.schedule();
  }

  /**
   * Replay progress: `received` updates of a catch-up so far, of at most `expected` (the
   * session's seq: a compacted replay is shorter), or `null` when the catch-up is over.
   * @param {number | null} received
   * @param {number} [expected]
   */
  setReplay(received, expected) {
    if (received === null) {
      if (!this.replay.hidden) this.announce('Session loaded');
      this.replay.hidden = true;
      this.root.dataset.replay = 'done';
      return;
    }
    this.replay.hidden = false;
    this.root.dataset.replay = 'loading';
    // The compacted replay's length is not known in advance: the bar fills against the
    // session's length, a bound, and never claims to be done before the hub says so.
    if (expected && expected > 0) {
      this.replayBar.max = expected;
      this.replayBar.value = Math.min(received, expected * 0.99);
    } else {
      this.replayBar.removeAttribute('value');
    }
    this.replayText.textContent = `Loading the session: ${received.toLocaleString()} updates`;
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
    return roleAtLeast(this.role, needed);
  }

  /** @param {ConnectionStatus} status */
  setConnection(status) {
    this.connection.textContent = connectionText(status);
    this.connection.className = `conn conn-${status.state}`;
    this.root.dataset.connection = status.state;
  }

  /** @param {string} message */
  showError(message) {
    const note = el('p', 'fatal', message);
    note.setAttribute('role', 'alert');
    this.transcript.entries.before(note);
  }

  async submitPrompt() {
    const text = this.input.value;
    if (!text.trim()) return;
    this.sendButton.disabled = true;
    this.composerError.textContent = '';
    // Emptied at once: what the person types next, while the prompt goes out, is kept.
    this.input.value = '';
    try {
      await this.actions.prompt(text);
      this.stickToBottom = true;
    } catch (error) {
      if (!this.input.value) this.input.value = text;
      this.composerError.textContent = errorText(error);
    } finally {
      this.sendButton.disabled = false;
      this.input.focus();
    }
  }

  /**
   * Show a `session/request_permission` the hub sent to this client.
   * @param {string | number} requestId
   * @param {any} params
   */
  addRequest(requestId, params) {
    this.dialogs.addPermission(requestId, params);
  }

  /** @param {string | number} requestId */
  removeRequest(requestId) {
    this.dialogs.remove(requestId);
  }

  /** Every request dies with the connection that carried it. */
  clearRequests() {
    this.dialogs.clear();
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
    const atBottom = this.stickToBottom || this.transcript.atBottom();
    this.stickToBottom = false;
    if (dirty.has('reset')) {
      this.transcript.clear();
      for (const name of PANEL_KEYS) dirty.add(name);
    }
    const changed = this.transcript.render(dirty, atBottom);
    const badge = this.stateText();
    if (['state', 'agent', 'closed', 'lease', 'policy'].some((key) => dirty.has(key))) this.drawState(badge);
    if (dirty.has('closed') && this.model.closed) {
      this.composer.hidden = true;
      this.dialogs.clear();
    }
    this.panels.render(dirty, badge);
    if (dirty.has('info')) this.drawInfo();
    if (dirty.has('permissions')) this.dialogs.sync();
    if (atBottom && changed) this.transcript.scrollToEnd();
    this.root.dispatchEvent(new CustomEvent('rendered'));
  }

  /** @returns {string} the foreground state in words */
  stateText() {
    const fg = this.model.fg;
    if (this.model.closed) return 'closed';
    if (fg?.state === 'running') return 'running';
    if (fg?.state === 'requires_action') return 'requires action';
    if (fg) return fg.stopReason ? `idle · ${labelize(fg.stopReason)}` : labelize(fg.state);
    return 'no turn yet';
  }

  /** @param {string} badge */
  drawState(badge) {
    const fg = this.model.fg;
    this.stateBadge.textContent = badge;
    // No state yet (a reset, or a session that never ran): claim nothing.
    const state = this.model.closed ? 'closed' : fg?.state ?? 'unknown';
    this.stateBadge.className = `state-badge state-${token(state)}`;
    this.root.dataset.state = state;
    this.cancelButton.disabled = !(fg?.state === 'running' || fg?.state === 'requires_action');
    this.announce(`Agent ${badge}`);
  }

  drawInfo() {
    const title = this.model.info.title;
    // Clamped here too (the hub clamps at 200): a title never fills the page.
    const text = title ? String(title) : `Session ${this.sessionId}`;
    this.title.textContent = text.length > TITLE_MAX ? `${text.slice(0, TITLE_MAX - 1)}…` : text;
    this.title.title = text.slice(0, 1000);
    if (!this.embed) document.title = `${this.title.textContent} · acp-hub`;
  }
}
