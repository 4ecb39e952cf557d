// @ts-check
/**
 * Requests the hub sends to this page and that wait for a person: permission dialogs.
 *
 * A dialog lives as long as its request: answered here, withdrawn by the hub
 * (`$/cancel_request`), resolved elsewhere (the log shows the record no longer pending), or
 * dropped with the connection that carried it.
 */

import { renderDiff } from './diff.js';
import { button, el, idPart, labelize } from './dom.js';

/** @typedef {import('./fold.js').SessionModel} SessionModel */

/**
 * @typedef {{
 *   answer: (requestId: string | number, optionId: string | null) => void,
 * }} DialogActions
 */

export class Dialogs {
  /**
   * @param {SessionModel} model
   * @param {DialogActions} actions
   * @param {{announce: (text: string) => void, typing: () => boolean}} page
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
      }, `option option-${kind.startsWith('allow') ? 'allow' : kind.startsWith('reject') ? 'reject' : 'other'}`);
      options.append(choice);
    }
    dialog.append(options);
    this.requests.set(requestId, { params, node: dialog });
    this.element.append(dialog);
    this.page.announce(`Permission requested: ${heading.textContent}`);
    const first = options.querySelector('button');
    // Take focus only when the user is not typing a prompt.
    if (first && !this.page.typing()) first.focus();
  }

  /** @param {string | number} requestId */
  remove(requestId) {
    const entry = this.requests.get(requestId);
    if (!entry) return;
    this.requests.delete(requestId);
    entry.node.remove();
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
