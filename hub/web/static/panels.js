// @ts-check
/**
 * The side panels of a session: status, controls, plan, permissions, people, queue, settings,
 * usage and commands. Each panel is redrawn whole when its dirty key comes up (`state`,
 * `plans`, `permissions`, `presence`, `queue`, `config`, `usage`, `commands`, plus `agent`,
 * `lease`, `policy` and `closed` for the status and controls panels); a panel with nothing to
 * show is hidden. The controls follow the page's role: drivers take and release the prompt
 * lease, owners also give it to someone, set the session's policies, close and delete it
 * (after a confirmation in the page). The hub checks every action again.
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
 *   lease: (action: 'request' | 'release' | 'grant', clientId?: string) => Promise<void>,
 *   setPolicy: (policy: {prompt?: string, permission?: string}) => Promise<void>,
 *   close: (remove: boolean) => Promise<void>,
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

const PROMPT_POLICIES = [
  ['queue', 'Queue prompts while the agent works'],
  ['reject', 'Refuse prompts while the agent works'],
  ['lease', 'Only the lease holder prompts'],
];
const PERMISSION_POLICIES = [
  ['first', 'The first approver to answer'],
  ['owner', 'Owners only'],
  ['lease', 'The lease holder and owners'],
];

/**
 * What an agent status means for the people watching, in words.
 * @param {any} agent the `_hub_agent` record
 * @returns {string}
 */
export function agentStatusText(agent) {
  const name = String(agent?.agent ?? 'The agent');
  switch (agent?.status) {
    case 'started':
      return `${name} is running.`;
    case 'exited': {
      const how = agent.signal ? `was stopped by ${agent.signal}` : agent.exitCode != null ? `exited with code ${agent.exitCode}` : 'exited';
      return `${name} ${how}. It starts again with the next prompt, and this session continues if the agent can take it back.`;
    }
    case 'restarted':
      return `${name} was restarted and took this session back: the conversation continues.`;
    case 'lost':
      return `${name} restarted but could not take this session back. Its history stays readable here; it cannot be prompted any more.`;
    case 'logged_in':
      return `${name} is logged in${agent.methodId ? ` (${agent.methodId})` : ''}.`;
    case 'logged_out':
      return `${name} was logged out: it needs a login by an owner before new sessions.`;
    case 'login_failed':
      return `${name} could not log in${agent.message ? `: ${agent.message}` : '.'}`;
    default:
      return `${name}: ${labelize(agent?.status)}`;
  }
}

/**
 * A button that asks in the page before it acts: a first press shows the question with a
 * confirm and a keep button (focus on keep); only the confirm button acts.
 * @param {string} label
 * @param {string} question
 * @param {string} confirmLabel
 * @param {() => Promise<void>} act
 * @param {(error: unknown) => void} report
 * @returns {HTMLElement}
 */
function confirmed(label, question, confirmLabel, act, report) {
  const box = el('div', 'confirm');
  const start = button(label, () => {
    start.hidden = true;
    ask.hidden = false;
    keep.focus();
  }, 'danger');
  const ask = el('div', 'confirm-ask');
  ask.setAttribute('role', 'group');
  ask.setAttribute('aria-label', question);
  ask.hidden = true;
  const yes = button(confirmLabel, () => {
    yes.disabled = true;
    act().catch((error) => {
      yes.disabled = false;
      report(error);
    });
  }, 'danger confirm-yes');
  const keep = button('Keep it', () => {
    ask.hidden = true;
    start.hidden = false;
    start.focus();
  }, 'confirm-no');
  ask.append(el('p', 'confirm-question', question), yes, keep);
  box.append(start, ask);
  return box;
}

/**
 * A labelled select whose change calls `onChange`.
 * @param {string} id
 * @param {string} text
 * @param {string[][]} choices [value, label] pairs
 * @param {string | undefined} current
 * @param {(value: string) => void} onChange
 * @returns {HTMLElement}
 */
function choice(id, text, choices, current, onChange) {
  const row = el('div', 'form-row');
  const label = /** @type {HTMLLabelElement} */ (el('label', '', text));
  label.htmlFor = id;
  const select = /** @type {HTMLSelectElement} */ (el('select'));
  select.id = id;
  for (const [value, name] of choices) {
    const option = /** @type {HTMLOptionElement} */ (el('option', '', name));
    option.value = value;
    option.selected = value === current;
    select.append(option);
  }
  select.addEventListener('change', () => onChange(select.value));
  row.append(label, select);
  return row;
}

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

// Alike in shape only: a view keeps the model and the actions its constructor is given.
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
    /** @type {Map<string, string>} every client's name seen in presence, departed ones too */
    this.names = new Map();
    this.status = panel('Status');
    this.controls = panel('Controls');
    this.presence = panel('People');
    this.queue = panel('Queue');
    // The agent's own options, named as such: whatever the agent calls them, they are not
    // the hub's settings (those are under Controls).
    this.config = panel("The agent's settings");
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
      this.controls.box,
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
    if (['presence', 'closed', 'lease', 'policy', 'role'].some((key) => dirty.has(key))) this.drawControls();
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
      parts.push(el('p', `agent-status agent-${token(agent.status)}`, agentStatusText(agent)));
      if (agent.message) parts.push(el('p', 'agent-message', String(agent.message)));
    }
    if (this.model.policy) {
      parts.push(el('p', 'policy', `Prompts: ${labelize(this.model.policy.prompt)} · permissions: ${labelize(this.model.policy.permission)}`));
    }
    parts.push(el('p', 'lease', `Lease: ${this.leaseText()}`));
    const closed = this.model.closed;
    if (closed) {
      const by = typeof closed.by?.name === 'string' ? closed.by.name : closed.by ? this.nameOf(String(closed.by)) : null;
      const verb = closed.deleted ? 'deleted' : 'closed';
      parts.push(el('p', 'closed', by ? `This session was ${verb} by ${by}.` : `This session was ${verb}.`));
    }
    this.status.body.replaceChildren(...parts);
    this.status.box.hidden = false;
  }

  /**
   * The display name of an attached client, from presence.
   * @param {string} clientId
   * @returns {string}
   */
  nameOf(clientId) {
    if (clientId === this.viewer.clientId()) return 'you';
    return this.names.get(clientId) ?? clientId;
  }

  /** @returns {string} who holds the prompt lease, in words */
  leaseText() {
    const holder = this.model.lease?.holder;
    if (!holder) return 'nobody holds it';
    const you = holder.clientId === this.viewer.clientId() ? ' (you)' : '';
    let text = `${String(holder.name ?? holder.clientId)}${you}`;
    const expires = this.model.lease?.expiresAt;
    if (typeof expires === 'string' && !Number.isNaN(Date.parse(expires))) {
      text += `, until ${new Date(expires).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' })} without activity`;
    }
    return text;
  }

  /** The lease, policy and session controls the page's role allows. */
  drawControls() {
    const parts = [];
    const report = (/** @type {unknown} */ error) => this.viewer.announce(`Not done: ${errorText(error)}`);
    const closed = Boolean(this.model.closed);
    if (this.viewer.may('driver') && !closed) {
      const me = this.viewer.clientId();
      const holder = this.model.lease?.holder;
      const lease = el('div', 'lease-controls');
      lease.setAttribute('role', 'group');
      lease.setAttribute('aria-label', 'Prompt lease');
      lease.append(el('p', 'lease-holder', `Lease: ${this.leaseText()}`));
      const buttons = el('div', 'button-row');
      if (holder?.clientId !== me) {
        const take = button('Take the lease', () => this.actions.lease('request').catch(report), 'lease-request');
        take.disabled = Boolean(holder);
        if (holder) take.title = 'Someone else holds the lease';
        buttons.append(take);
      }
      if (holder && (holder.clientId === me || this.viewer.may('owner'))) {
        buttons.append(button(holder.clientId === me ? 'Release the lease' : 'Take the lease back', () => this.actions.lease('release').catch(report), 'lease-release'));
      }
      lease.append(buttons);
      if (this.viewer.may('owner')) {
        const drivers = this.model.presence.filter((c) => (c?.role === 'driver' || c?.role === 'owner') && c?.clientId !== holder?.clientId);
        if (drivers.length) {
          const row = el('div', 'form-row grant-row');
          const label = /** @type {HTMLLabelElement} */ (el('label', '', 'Give the lease to'));
          label.htmlFor = 'lease-grant-to';
          const select = /** @type {HTMLSelectElement} */ (el('select'));
          select.id = 'lease-grant-to';
          for (const client of drivers) {
            const option = /** @type {HTMLOptionElement} */ (el('option', '', `${String(client.name ?? client.clientId)} (${String(client.role)})${client.clientId === me ? ' — you' : ''}`));
            option.value = String(client.clientId);
            select.append(option);
          }
          const grant = button('Give', () => this.actions.lease('grant', select.value).catch(report), 'lease-grant');
          row.append(label, select, grant);
          lease.append(row);
        }
      }
      parts.push(lease);
    }
    if (this.viewer.may('owner') && !closed) {
      const policy = el('div', 'policy-controls');
      policy.setAttribute('role', 'group');
      policy.setAttribute('aria-label', 'Session policies');
      const current = this.model.policy ?? {};
      policy.append(
        choice('policy-prompt', 'Who may prompt', PROMPT_POLICIES, current.prompt, (value) => this.actions.setPolicy({ prompt: value }).catch(report)),
        choice('policy-permission', 'Whose answer to a permission counts', PERMISSION_POLICIES, current.permission, (value) => this.actions.setPolicy({ permission: value }).catch(report)),
      );
      const session = el('div', 'session-controls');
      session.setAttribute('role', 'group');
      session.setAttribute('aria-label', 'The session');
      session.append(
        confirmed('Close session', 'Close this session for everyone? The agent stops working on it.', 'Close it', () => this.actions.close(false), report),
        confirmed('Delete session', 'Delete this session for everyone, with its history at the agent?', 'Delete it', () => this.actions.close(true), report),
      );
      parts.push(policy, session);
    }
    this.controls.body.replaceChildren(...parts);
    this.controls.box.hidden = parts.length === 0;
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
      if (typeof client?.clientId === 'string' && typeof client?.name === 'string') this.names.set(client.clientId, client.name);
      const item = el('li', 'presence-client');
      const you = client?.clientId && client.clientId === this.viewer.clientId() ? ' (you)' : '';
      item.append(el('span', 'presence-name', `${String(client?.name ?? client?.clientId ?? '?')}${you}`), el('span', 'presence-role', String(client?.role ?? '')));
      // The client program (an editor, this page) is a detail, on hover.
      if (typeof client?.program === 'string' && client.program) item.title = `using ${client.program}`;
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
      const own = entry?.clientId === this.viewer.clientId();
      if ((own && this.viewer.may('driver')) || this.viewer.may('owner')) {
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
    form.append(el('p', 'field-hint', 'Offered by the agent, not by acp-hub.'));
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
