// @ts-check
/**
 * Permission rules on the session page, for the session's owners: the Rules menu lists the
 * session's rules (who added each, when) with a Remove button, and each permission dialog
 * gets an "Always allow this kind here" button that adds the session rule
 * `{match: {kind}, answer: "allow"}` (docs/arbitration.md, *Permission rules*).
 *
 * The dialogs are decorated from outside (a MutationObserver on the dialogs' container), so
 * that how a permission request is shown stays in dialogs.js. The hub checks every
 * `_hub/rules/*` call again; `_hub_rules` updates keep the list current. DOM built with
 * textContent only.
 */

import { el } from './dom.js';

/** @param {unknown} error */
function errorText(error) {
  return error instanceof Error ? error.message : String(error);
}

export class RulesMenu {
  /**
   * @param {{request: (method: string, params: unknown) => Promise<any>}} rpc
   * @param {string} sessionId
   * @param {HTMLElement} dialogs the container permission dialogs are added to
   * @param {(requestId: string) => any} paramsOf the params of a permission request by id
   */
  constructor(rpc, sessionId, dialogs, paramsOf) {
    this.rpc = rpc;
    this.sessionId = sessionId;
    this.paramsOf = paramsOf;
    this.element = /** @type {HTMLDetailsElement} */ (el('details', 'rules-menu'));
    this.element.append(el('summary', 'rules-open', 'Rules'));
    this.list = el('ul', 'rules-list');
    this.status = el('p', 'rules-status');
    this.status.setAttribute('role', 'status');
    this.element.append(this.list, this.status);
    this.element.addEventListener('toggle', () => {
      if (this.element.open) this.refresh();
    });
    this.show([]);
    new MutationObserver(() => this.decorate(dialogs)).observe(dialogs, { childList: true });
    this.decorate(dialogs);
  }

  async refresh() {
    try {
      const answer = await this.rpc.request('_hub/rules/list', { sessionId: this.sessionId });
      this.show(Array.isArray(answer?.rules) ? answer.rules : []);
    } catch (error) {
      this.status.textContent = `Could not list the rules: ${errorText(error)}`;
    }
  }

  /** @param {any[]} rules the session's rules (a `_hub_rules` update or the list's answer) */
  show(rules) {
    this.list.replaceChildren(...rules.map((rule) => this.item(rule)));
    if (!rules.length) this.list.append(el('li', 'empty', 'No rules: every request goes to people.'));
  }

  /** @param {any} rule */
  item(rule) {
    const item = el('li', 'rules-item');
    item.dataset.ruleId = String(rule?.ruleId ?? '');
    const match = Object.entries(rule?.match ?? {}).map(([k, v]) => `${k} ${String(v)}`).join(', ') || 'every request';
    item.append(el('span', 'rules-text', `${String(rule?.answer)} ${match} · added by ${String(rule?.createdBy ?? '?')}`));
    const remove = /** @type {HTMLButtonElement} */ (el('button', 'rules-remove', 'Remove'));
    remove.type = 'button';
    remove.addEventListener('click', async () => {
      remove.disabled = true;
      try {
        await this.rpc.request('_hub/rules/remove', { sessionId: this.sessionId, ruleId: rule.ruleId });
        await this.refresh();
      } catch (error) {
        this.status.textContent = `Could not remove the rule: ${errorText(error)}`;
        remove.disabled = false;
      }
    });
    item.append(remove);
    return item;
  }

  /** @param {HTMLElement} dialogs */
  decorate(dialogs) {
    for (const dialog of dialogs.querySelectorAll('.permission-dialog')) {
      const node = /** @type {HTMLElement} */ (dialog);
      if (node.dataset.rulesOffered) continue;
      node.dataset.rulesOffered = '1';
      const params = this.paramsOf(String(node.dataset.requestId ?? ''));
      const kind = params?.subject?.toolCall?.kind ?? params?.toolCall?.kind;
      if (typeof kind !== 'string' || !kind) continue;
      const always = /** @type {HTMLButtonElement} */ (el('button', 'rules-always', `Always allow ${kind} here`));
      always.type = 'button';
      always.title = `Adds a rule to this session: every ${kind} request inside its folder is allowed without asking`;
      always.addEventListener('click', async () => {
        always.disabled = true;
        try {
          await this.rpc.request('_hub/rules/add', { sessionId: this.sessionId, match: { kind }, answer: 'allow' });
          always.textContent = `Rule added: ${kind} is allowed here from now on`;
        } catch (error) {
          always.textContent = `Could not add the rule: ${errorText(error)}`;
        }
      });
      node.append(always);
    }
  }
}
