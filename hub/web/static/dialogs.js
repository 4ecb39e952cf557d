// @ts-check
/**
 * Requests the hub sends to this page and that wait for a person: permission dialogs and
 * elicitation forms.
 *
 * A dialog lives as long as its request: answered here, withdrawn by the hub
 * (`$/cancel_request`), resolved elsewhere (the log shows the record no longer pending), or
 * dropped with the connection that carried it.
 *
 * A request never takes the focus: someone typing (here or in a page that embeds this one)
 * goes on typing, and an answer takes a deliberate act (a click, a tap, or a key pressed on a
 * button the person moved to). Escape never answers. When a dialog that had the focus goes,
 * the focus goes to the prompt box (never into the next request, where a second key press
 * would answer it). What a permission request shows is drawn by `request.js`.
 */

import { button, el, errorText, idPart } from './dom.js';
import { ElicitationForm } from './elicitation.js';
import { linkTarget, safeUrl } from './markdown.js';
import { guard, isolated, optionButtons, requestNodes } from './request.js';

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
   * @param {{announce: (text: string) => void, fallbackFocus: () => void}} page
   */
  constructor(model, actions, page) {
    this.model = model;
    this.actions = actions;
    this.page = page;
    /** @type {Map<string | number, {params: any, node: HTMLElement}>} */
    this.requests = new Map();
    this.element = el('div', 'dialogs');
  }

  /**
   * Add a dialog, without moving the focus (see the module comment).
   * @param {string | number} requestId
   * @param {any} params
   * @param {HTMLElement} dialog
   */
  open(requestId, params, dialog) {
    dialog.dataset.requestId = String(requestId);
    this.requests.set(requestId, { params, node: dialog });
    this.element.append(dialog);
  }

  /**
   * Show a `session/request_permission` the hub sent to this client.
   * @param {string | number} requestId
   * @param {any} params
   */
  addPermission(requestId, params) {
    const dialog = el('section', 'permission-dialog');
    dialog.setAttribute('role', 'group');
    const titleId = `perm-title-${idPart(requestId)}`;
    dialog.setAttribute('aria-labelledby', titleId);
    const known = this.model.tools.get(String(params?.subject?.toolCall?.toolCallId));
    dialog.append(...requestNodes(params, known, titleId));
    // The subject may scroll inside the dialog (a phone): reachable with the keyboard, never
    // focused by the page.
    const subject = dialog.querySelector('.request-subject');
    if (subject instanceof HTMLElement) {
      subject.tabIndex = 0;
      subject.setAttribute('role', 'region');
      subject.setAttribute('aria-label', 'What it will do');
    }
    dialog.append(
      optionButtons(params?.options, (optionId) => {
        this.actions.answer(requestId, optionId);
        this.remove(requestId);
      }),
    );
    guard(dialog);
    this.page.announce(`Permission requested: ${dialog.querySelector('.permission-title')?.textContent ?? ''}`);
    this.open(requestId, params, dialog);
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
    // The hub's frame first: whatever the agent titles its form, it is the agent asking.
    const kicker = el('p', 'permission-kicker', 'The agent asks for information (this form is not from acp-hub)');
    const heading = el('h2', 'elicitation-title');
    heading.append(isolated('request-title', String(params?.requestedSchema?.title || 'The agent asks for information')));
    heading.id = `${prefix}-title`;
    dialog.setAttribute('aria-labelledby', heading.id);
    const message = el('p', 'elicitation-message', String(params?.message ?? ''));
    message.id = `${prefix}-message`;
    dialog.setAttribute('aria-describedby', message.id);
    dialog.append(kicker, heading, message);
    const status = el('p', 'elicitation-status');
    status.setAttribute('role', 'alert');
    /** @param {'accept' | 'decline' | 'cancel'} action @param {Record<string, unknown>} [content] */
    const finish = (action, content) => {
      this.actions.elicit(requestId, content ? { action, content } : { action });
      this.remove(requestId);
      this.page.announce(`Form ${action === 'accept' ? 'sent' : action === 'decline' ? 'declined' : 'cancelled'}`);
    };
    const buttons = el('div', 'elicitation-buttons');
    if (params?.mode === 'url') {
      const href = safeUrl(String(params?.url ?? ''));
      const link = el('p', 'elicitation-url', href ? '' : `The agent gave an address this page will not open: ${String(params?.url ?? '')}`);
      if (href) {
        const a = /** @type {HTMLAnchorElement} */ (el('a', ''));
        a.append(isolated('request-url', href));
        a.href = href;
        a.rel = 'noopener noreferrer';
        a.target = '_blank';
        link.append('Open ', a, ` (on ${linkTarget(href)}) to continue.`);
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
    }
    buttons.append(
      button('Decline', () => finish('decline'), 'decline'),
      button('Cancel', () => finish('cancel'), 'cancel-elicitation'),
    );
    dialog.append(buttons, status);
    guard(dialog);
    // Escape answers nothing: it leaves the form (to the prompt box), which stays open.
    dialog.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        this.page.fallbackFocus();
      }
    });
    this.page.announce(`The agent asks: ${message.textContent}`);
    this.open(requestId, params, dialog);
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
    // Never into the next request: a second key press there would answer it.
    if (hadFocus) this.page.fallbackFocus();
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
