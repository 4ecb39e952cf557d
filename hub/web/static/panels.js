// @ts-check
/**
 * The side panels of a session: status, plan, permissions, people, queue, settings, usage
 * and commands. Each panel is redrawn whole when its dirty key comes up (`state`, `plans`,
 * `permissions`, `presence`, `queue`, `config`, `usage`, `commands`, plus `agent`, `lease`,
 * `policy` and `closed` for the status panel); a panel with nothing to show is hidden.
 */

import { describeOutcome, permissionLine } from './blocks.js';
import { button, el, errorText, idPart, labelize, token } from './dom.js';

/** @typedef {import('./fold.js').SessionModel} SessionModel */
/** @typedef {{box: HTMLElement, body: HTMLElement, title: HTMLElement}} Panel */

/**
 * What the panels may ask of the session.
 * @typedef {{
 *   setConfig: (configId: string, type: 'id' | 'boolean', value: string | boolean) => Promise<void>,
 *   withdraw: (queueId: string) => Promise<void>,
 * }} PanelActions
 */

/**
 * Who is looking: the page's role and client id, and how to say things to a screen reader.
 * @typedef {{
 *   clientId: () => string,
 *   may: (role: string) => boolean,
 *   announce: (text: string) => void,
 * }} Viewer
 */

const PLAN_GLYPHS = /** @type {Record<string, string>} */ ({ completed: '✓', in_progress: '▶', pending: '○' });

/**
 * @param {string} name
 * @returns {Panel}
 */
function panel(name) {
  const box = el('section', `panel panel-${name.toLowerCase()}`);
  const title = el('h2', 'panel-title', name);
  const body = el('div', 'panel-body');
  box.append(title, body);
  box.hidden = true;
  return { box, body, title };
}

export class SidePanels {
  /**
   * @param {SessionModel} model
   * @param {PanelActions} actions
   * @param {Viewer} viewer
   */
  constructor(model, actions, viewer) {
    this.model = model;
    this.actions = actions;
    this.viewer = viewer;
    this.status = panel('Status');
    this.presence = panel('People');
    this.queue = panel('Queue');
    this.config = panel('Settings');
    this.usage = panel('Usage');
    this.plan = panel('Plan');
    this.permissions = panel('Permissions');
    this.commands = panel('Commands');
    this.element = el('aside', 'side');
    this.element.setAttribute('aria-label', 'Session details');
    this.element.append(
      this.status.box,
      this.plan.box,
      this.permissions.box,
      this.presence.box,
      this.queue.box,
      this.config.box,
      this.usage.box,
      this.commands.box,
    );
  }

  /**
   * Redraw the panels whose keys are dirty.
   * @param {Set<string>} dirty
   * @param {string} badge the foreground state in words
   */
  render(dirty, badge) {
    if (['state', 'agent', 'closed', 'lease', 'policy'].some((key) => dirty.has(key))) this.drawStatus(badge);
    if (dirty.has('presence')) this.drawPresence();
    if (dirty.has('queue')) this.drawQueue();
    if (dirty.has('config')) this.drawConfig();
    if (dirty.has('usage')) this.drawUsage();
    if (dirty.has('commands')) this.drawCommands();
    if (dirty.has('plans')) this.drawPlans();
    if (dirty.has('permissions')) this.drawPermissions();
  }

  /** @param {string} badge */
  drawStatus(badge) {
    const parts = [el('p', '', `State: ${badge}`)];
    const agent = this.model.agent;
    if (agent) {
      let text = `Agent ${String(agent.agent ?? '')}: ${labelize(agent.status)}`;
      if (agent.exitCode != null) text += ` (exit ${agent.exitCode})`;
      if (agent.signal) text += ` (${agent.signal})`;
      parts.push(el('p', `agent-status agent-${token(agent.status)}`, text));
      if (agent.message) parts.push(el('p', 'agent-message', String(agent.message)));
    }
    if (this.model.policy) {
      parts.push(el('p', 'policy', `Prompts: ${labelize(this.model.policy.prompt)} · permissions: ${labelize(this.model.policy.permission)}`));
    }
    const lease = this.model.lease;
    if (lease && lease.holder) parts.push(el('p', 'lease', `Lease: ${String(lease.holder.name ?? lease.holder.clientId)}`));
    if (this.model.closed) parts.push(el('p', 'closed', 'This session is closed.'));
    this.status.body.replaceChildren(...parts);
    this.status.box.hidden = false;
  }

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
        const item = el('li', `plan-entry plan-${token(status)}`);
        const glyph = el('span', 'plan-glyph', PLAN_GLYPHS[status] ?? '•');
        glyph.setAttribute('aria-hidden', 'true');
        item.append(glyph, el('span', 'plan-content', String(entry?.content ?? '')), el('span', 'plan-status', labelize(status)));
        if (entry?.priority) item.append(el('span', 'plan-priority', String(entry.priority)));
        list.append(item);
      }
      parts.push(list);
    }
    this.plan.body.replaceChildren(...parts);
    this.plan.box.hidden = parts.length === 0;
  }

  drawPermissions() {
    const records = [...this.model.permissions.values()];
    const list = el('div', 'perm-list');
    for (const record of records) list.append(permissionLine(record));
    this.permissions.body.replaceChildren(list);
    this.permissions.box.hidden = records.length === 0;
    const last = records[records.length - 1];
    if (last && last.status !== 'pending') {
      this.viewer.announce(`Permission ${last.request?.title ?? ''}: ${describeOutcome(last) || labelize(last.status)}`);
    }
  }

  drawPresence() {
    const list = el('ul', 'presence');
    for (const client of this.model.presence) {
      const item = el('li', 'presence-client');
      const you = client?.clientId && client.clientId === this.viewer.clientId() ? ' (you)' : '';
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
    this.presence.body.replaceChildren(list);
    this.presence.box.hidden = total === 0;
    this.presence.title.textContent = `People (${total})`;
  }

  drawQueue() {
    const list = el('ol', 'queue');
    for (const entry of this.model.queue) {
      const item = el('li', 'queue-entry');
      item.append(el('span', 'queue-name', String(entry?.name ?? entry?.clientId ?? '')), el('span', 'queue-preview', String(entry?.preview ?? '')));
      if (entry?.clientId === this.viewer.clientId() && this.viewer.may('driver')) {
        const withdraw = button('Withdraw', () => {
          withdraw.disabled = true;
          this.actions.withdraw(String(entry.queueId)).catch((error) => {
            withdraw.disabled = false;
            this.viewer.announce(`Could not withdraw: ${errorText(error)}`);
          });
        }, 'withdraw');
        withdraw.setAttribute('aria-label', `Withdraw queued prompt: ${String(entry?.preview ?? '')}`);
        item.append(withdraw);
      }
      list.append(item);
    }
    this.queue.body.replaceChildren(list);
    this.queue.box.hidden = this.model.queue.length === 0;
  }

  drawConfig() {
    const form = el('div', 'config');
    const enabled = this.viewer.may('driver');
    for (const option of this.model.configOptions) {
      const id = `config-${idPart(option?.configId)}`;
      const row = el('div', 'config-row');
      const label = /** @type {HTMLLabelElement} */ (el('label', '', String(option?.name ?? option?.configId)));
      label.htmlFor = id;
      const report = (/** @type {unknown} */ error) => this.viewer.announce(errorText(error));
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
          this.actions.setConfig(String(option.configId), 'id', select.value).catch(report);
        });
        row.append(label, select);
      } else if (option?.type === 'boolean') {
        const box = /** @type {HTMLInputElement} */ (el('input'));
        box.type = 'checkbox';
        box.id = id;
        box.checked = Boolean(option.currentValue);
        box.disabled = !enabled;
        box.addEventListener('change', () => {
          this.actions.setConfig(String(option.configId), 'boolean', box.checked).catch(report);
        });
        row.append(box, label);
      } else {
        row.append(el('span', '', `${String(option?.name ?? option?.configId)}: ${JSON.stringify(option?.currentValue ?? null)}`));
      }
      if (option?.description) row.title = String(option.description);
      form.append(row);
    }
    this.config.body.replaceChildren(form);
    this.config.box.hidden = this.model.configOptions.length === 0;
  }

  drawUsage() {
    const usage = this.model.usage;
    if (!usage) {
      this.usage.box.hidden = true;
      return;
    }
    const used = Number(usage.used ?? 0);
    const size = Number(usage.size ?? 0);
    const meter = /** @type {HTMLMeterElement} */ (el('meter'));
    meter.min = 0;
    meter.max = size || 1;
    meter.value = used;
    meter.setAttribute('aria-label', 'Context window used');
    const parts = [meter, el('p', '', `${used.toLocaleString()} / ${size.toLocaleString()} tokens`)];
    if (usage.cost && typeof usage.cost.amount === 'number') {
      parts.push(el('p', 'cost', `${usage.cost.amount.toFixed(4)} ${String(usage.cost.currency ?? '')}`));
    }
    this.usage.body.replaceChildren(...parts);
    this.usage.box.hidden = false;
  }

  drawCommands() {
    const list = el('ul', 'commands');
    for (const command of this.model.commands) {
      const item = el('li');
      item.append(el('code', '', `/${String(command?.name ?? '')}`), document.createTextNode(` ${String(command?.description ?? '')}`));
      list.append(item);
    }
    this.commands.body.replaceChildren(list);
    this.commands.box.hidden = this.model.commands.length === 0;
  }
}
