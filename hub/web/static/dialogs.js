// @ts-check
/**
 * Requests the hub sends to this page and that wait for a person: permission dialogs and
 * elicitation forms.
 *
 * A dialog lives as long as its request: answered here, withdrawn by the hub
 * (`$/cancel_request`), resolved elsewhere (the log shows the record no longer pending), or
 * dropped with the connection that carried it. Focus moves into a new dialog (unless the
 * person is typing a prompt) and, when the dialog goes, back to where it was.
 */

import { optionClass } from './blocks.js';
import { renderDiff } from './diff.js';
import { button, el, errorText, idPart, labelize } from './dom.js';
import { ElicitationForm } from './elicitation.js';
import { safeUrl } from './markdown.js';

/** @typedef {import('./fold.js').SessionModel} SessionModel */

/**
 * @typedef {{
 *   answer: (requestId: string | number, optionId: string | null) => void,
 *   elicit: (requestId: string | number, result: {action: 'accept' | 'decline' | 'cancel',
 *     content?: Record<string, unknown>}) => void,
 * }} DialogActions
 */

export class Dialogs {
  /**
   * @param {SessionModel} model
   * @param {DialogActions} actions
   * @param {{announce: (text: string) => void, typing: () => boolean,
   *   fallbackFocus: () => void}} page
   */
  constructor(model, actions, page) {
    this.model = model;
    this.actions = actions;
    this.page = page;
    /** @type {Map<string | number, {params: any, node: HTMLElement}>} */
    this.requests = new Map();
    this.element = el('div', 'dialogs');
    /** @type {HTMLElement | null} where focus was before a dialog took it */
    this.returnFocus = null;
  }

  /**
   * Add a dialog and move focus into it (unless the person is typing a prompt).
   * @param {string | number} requestId
   * @param {any} params
   * @param {HTMLElement} dialog
   * @param {HTMLElement | null} target
   */
  open(requestId, params, dialog, target) {
    dialog.dataset.requestId = String(requestId);
    this.requests.set(requestId, { params, node: dialog });
    this.element.append(dialog);
    if (!target || this.page.typing()) return;
    const active = document.activeElement;
    if (active instanceof HTMLElement && active !== document.body && !this.element.contains(active)) this.returnFocus = active;
    target.focus();
  }

  /**
   * Show a `session/request_permission` the hub sent to this client.
   * @param {string | number} requestId
   * @param {any} params
   */
  addPermission(requestId, params) {
    const dialog = el('section', 'permission-dialog');
    dialog.setAttribute('role', 'alertdialog');
    const titleId = `perm-title-${idPart(requestId)}`;
    dialog.setAttribute('aria-labelledby', titleId);
    const heading = el('h2', 'permission-title', String(params?.title ?? params?.toolCall?.title ?? 'Permission requested'));
    heading.id = titleId;
    dialog.append(el('p', 'permission-kicker', 'The agent asks for permission'), heading);
    if (params?.description) dialog.append(el('p', 'permission-description', String(params.description)));
    const subject = params?.subject;
    if (subject?.type === 'command') {
      dialog.append(el('pre', 'permission-command', String(subject.command ?? '')));
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
        this.remove(requestId);
      }, optionClass(kind));
      options.append(choice);
    }
    dialog.append(options);
    this.page.announce(`Permission requested: ${heading.textContent}`);
    this.open(requestId, params, dialog, options.querySelector('button'));
  }

  /**
   * Show an `elicitation/create` the hub sent to this client: a form (form mode) or a link
   * to open (URL mode), with decline and cancel.
   * @param {string | number} requestId
   * @param {any} params
   */
  addElicitation(requestId, params) {
    const dialog = /** @type {HTMLFormElement} */ (el('form', 'elicitation-dialog'));
    dialog.noValidate = true;
    dialog.setAttribute('role', 'dialog');
    const prefix = `elicit-${idPart(requestId)}`;
    const heading = el('h2', 'elicitation-title', String(params?.requestedSchema?.title || 'The agent asks for information'));
    heading.id = `${prefix}-title`;
    dialog.setAttribute('aria-labelledby', heading.id);
    const message = el('p', 'elicitation-message', String(params?.message ?? ''));
    message.id = `${prefix}-message`;
    dialog.setAttribute('aria-describedby', message.id);
    dialog.append(heading, message);
    const status = el('p', 'elicitation-status');
    status.setAttribute('role', 'alert');
    /** @param {'accept' | 'decline' | 'cancel'} action @param {Record<string, unknown>} [content] */
    const finish = (action, content) => {
      this.actions.elicit(requestId, content ? { action, content } : { action });
      this.remove(requestId);
      this.page.announce(`Form ${action === 'accept' ? 'sent' : action === 'decline' ? 'declined' : 'cancelled'}`);
    };
    const buttons = el('div', 'elicitation-buttons');
    /** @type {HTMLElement | null} */
    let first = null;
    if (params?.mode === 'url') {
      const href = safeUrl(String(params?.url ?? ''));
      const link = el('p', 'elicitation-url', href ? '' : `The agent gave an address this page will not open: ${String(params?.url ?? '')}`);
      if (href) {
        const a = /** @type {HTMLAnchorElement} */ (el('a', '', href));
        a.href = href;
        a.rel = 'noopener noreferrer';
        a.target = '_blank';
        link.append('Open ', a, ' to continue.');
      }
      dialog.append(link);
      const accept = /** @type {HTMLButtonElement} */ (el('button', 'send', 'I opened it'));
      accept.type = 'submit';
      accept.disabled = !href;
      buttons.append(accept);
      dialog.addEventListener('submit', (event) => {
        event.preventDefault();
        finish('accept');
      });
      first = href ? accept : null;
    } else {
      const form = new ElicitationForm(params?.requestedSchema, prefix);
      dialog.append(form.element);
      const submit = /** @type {HTMLButtonElement} */ (el('button', 'send', 'Send'));
      submit.type = 'submit';
      submit.disabled = form.unsupported.length > 0;
      buttons.append(submit);
      dialog.addEventListener('submit', (event) => {
        event.preventDefault();
        try {
          const result = form.read();
          if ('errors' in result) {
            status.textContent = `${result.errors} ${result.errors === 1 ? 'field needs' : 'fields need'} attention.`;
            return;
          }
          finish('accept', result.content);
        } catch (error) {
          status.textContent = errorText(error);
        }
      });
      first = form.firstField();
    }
    buttons.append(
      button('Decline', () => finish('decline'), 'decline'),
      button('Cancel', () => finish('cancel'), 'cancel-elicitation'),
    );
    dialog.append(buttons, status);
    // Escape cancels, as it closes any dialog.
    dialog.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        finish('cancel');
      }
    });
    this.page.announce(`The agent asks: ${message.textContent}`);
    this.open(requestId, params, dialog, first ?? buttons.querySelector('button'));
  }

  /**
   * An `elicitation/complete` for a URL-mode request: its dialog goes.
   * @param {unknown} elicitationId
   */
  completeElicitation(elicitationId) {
    for (const [requestId, { params }] of this.requests) {
      if (params?.elicitationId !== undefined && params.elicitationId === elicitationId) this.remove(requestId);
    }
  }

  /** @param {string | number} requestId */
  remove(requestId) {
    const entry = this.requests.get(requestId);
    if (!entry) return;
    this.requests.delete(requestId);
    const hadFocus = entry.node.contains(document.activeElement);
    entry.node.remove();
    // Focus goes back where it was before the dialog took it.
    if (hadFocus || document.activeElement === document.body) {
      const next = this.element.querySelector('button, input, select');
      if (next instanceof HTMLElement) next.focus();
      else if (this.returnFocus?.isConnected) this.returnFocus.focus();
      else this.page.fallbackFocus();
      if (!this.requests.size) this.returnFocus = null;
    }
  }

  /** Every request dies with the connection that carried it. */
  clear() {
    for (const id of [...this.requests.keys()]) this.remove(id);
  }

  /** Drop dialogs whose permission the log shows as no longer pending. */
  sync() {
    for (const [requestId, { params }] of this.requests) {
      const permissionId = params?._meta?.['acp-hub']?.permissionId;
      if (permissionId === undefined) continue;
      const record = this.model.permissions.get(String(permissionId));
      if (record && record.status !== 'pending') this.remove(requestId);
    }
  }
}
