// @ts-check
/**
 * The team dashboard `/`: every session the viewer may see as a live card, through one
 * WebSocket (`_hub/subscribe_sessions` page by page, then `_hub/sessions_changed` notifications; see
 * docs/protocol.md), and for those allowed a form that starts a new session.
 *
 * Theory of operation: cards are kept by session id; a notification replaces the cards it
 * names and drops the removed ones, and the page redraws only those, once per animation
 * frame, so a hub with hundreds of sessions costs a few cards' work per change. A session
 * whose agent waits for a person (a pending permission request) stands out, sorts first, and
 * is counted in the tab title. An approver answers a pending request from its card: the page
 * attaches to that session on the same connection (`session/resume` without replay), answers
 * the `session/request_permission` the hub then offers it, and detaches. Browser notifications
 * of new waiting requests are off until the person turns them on (a click, never on load).
 */

import { connectionText } from './blocks.js';
import { CLOSE } from './close-codes.js';
import { button, el, errorText, labelize, token } from './dom.js';
import { identityBadge, renderRefusal } from './access.js';
import { plainText } from './markdown.js';
import { RpcConnection, hubMeta, hubSocketUrl } from './rpc.js';
import { guard, optionButtons, requestNodes } from './request.js';
import { pageToken, refusal, sharedToken } from './token.js';
import { initializeParams } from './session-app.js';
import { roleAtLeast } from './view.js';

/**
 * @typedef {{sessionId: string, cwd?: string, title?: string | null, agent?: string,
 *   state?: string, stopReason?: string | null, clients?: any[], queued?: number,
 *   turnStartedAt?: string | null, pendingPermissions?: any[], answer?: string}} Card
 */

/** How long an answer from a card may take before the page gives up on it (ms). */
const ANSWER_WAIT_MS = 15000;

const query = new URLSearchParams(location.search);
/** Query parameters carried to the session pages (the token goes by sessionStorage). */
const carried = new URLSearchParams();
for (const key of ['role', 'name']) {
  const value = query.get(key);
  if (value) carried.set(key, value);
}

/**
 * @param {string} sessionId
 * @returns {string}
 */
function sessionHref(sessionId) {
  const suffix = carried.toString();
  return `/s/${encodeURIComponent(sessionId)}${suffix ? `?${suffix}` : ''}`;
}

/**
 * A duration in words: `45 s`, `3 min 05 s`, `1 h 02 min`.
 * @param {number} ms
 * @returns {string}
 */
export function duration(ms) {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${String(seconds % 60).padStart(2, '0')} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/**
 * A card's state for people: `waiting for permission` beats the agent's own word.
 * @param {Card} card
 * @returns {{key: string, text: string}}
 */
export function cardState(card) {
  if (card.state === 'lost') return { key: 'lost', text: 'lost' };
  if (card.pendingPermissions?.length) return { key: 'waiting', text: 'waiting for permission' };
  if (card.state === 'running' || card.state === 'requires_action') return { key: 'running', text: 'running' };
  if (card.state === 'idle') return { key: 'idle', text: card.stopReason ? `idle · ${labelize(card.stopReason)}` : 'idle' };
  return { key: token(card.state) || 'unknown', text: labelize(card.state ?? 'unknown') };
}

const root = /** @type {HTMLElement} */ (document.getElementById('app'));
const header = el('header', 'app-header');
const title = el('h1', 'session-title', 'Sessions');
const tally = el('span', 'tally');
tally.setAttribute('role', 'status');
const connection = el('span', 'conn conn-connecting', 'connecting…');
connection.setAttribute('role', 'status');
const notifyButton = button('Notify me', () => enableNotifications(), 'notify');
notifyButton.hidden = true;
const statusRow = el('div', 'status-row');
statusRow.append(tally, notifyButton, connection);
header.append(title, statusRow);

const main = el('main', 'sessions-main');
const formBox = el('section', 'panel new-session');
formBox.hidden = true;
const listBox = el('section', 'session-list');
listBox.setAttribute('aria-labelledby', 'sessions-heading');
const listHeading = el('h2', 'panel-title', 'All sessions');
listHeading.id = 'sessions-heading';
const empty = el('p', 'empty', 'Loading…');
const grid = el('ul', 'cards');
listBox.append(listHeading, empty, grid);
const announcer = el('div', 'visually-hidden announcer');
announcer.setAttribute('role', 'log');
announcer.setAttribute('aria-live', 'polite');
main.append(formBox, listBox);
root.replaceChildren(header, main, announcer);

/** @type {Map<string, Card>} */
const cards = new Map();
/** @type {Map<string, HTMLElement>} */
const nodes = new Map();
/** @type {Set<string>} cards to redraw at the next frame */
const dirty = new Set();
/** @type {Set<string>} permission ids seen pending (for notifications) */
const seenPending = new Set();
let frame = 0;
let role = 'viewer';
/** @type {Set<unknown> | null} the sessions heard of while the pages of a subscription come */
let subscribing = null;

/**
 * Waiting answers from cards, by session id: the option the person chose.
 * @type {Map<string, {permissionId: string, optionId: string | null, resolve: () => void,
 *   reject: (error: Error) => void}>}
 */
const answering = new Map();

/** @param {string} text */
function announce(text) {
  announcer.append(el('p', '', text));
  while (announcer.childElementCount > 5) announcer.firstElementChild?.remove();
}

/** @type {RpcConnection} */
// eslint-disable-next-line prefer-const
let rpc;

/**
 * @param {any[]} agents
 * @param {string | undefined} defaultAgent
 * @param {string[]} roots
 */
function drawForm(agents, defaultAgent, roots) {
  const form = /** @type {HTMLFormElement} */ (el('form', 'new-session-form'));
  const agentLabel = /** @type {HTMLLabelElement} */ (el('label', '', 'Agent'));
  agentLabel.htmlFor = 'new-agent';
  const select = /** @type {HTMLSelectElement} */ (el('select'));
  select.id = 'new-agent';
  select.name = 'agent';
  for (const agent of agents) {
    const name = String(agent?.name ?? agent);
    const option = /** @type {HTMLOptionElement} */ (el('option', '', name));
    option.value = name;
    option.selected = name === defaultAgent || Boolean(agent?.default);
    select.append(option);
  }
  const cwdLabel = /** @type {HTMLLabelElement} */ (el('label', '', 'Working directory'));
  cwdLabel.htmlFor = 'new-cwd';
  const cwd = /** @type {HTMLInputElement} */ (el('input'));
  cwd.id = 'new-cwd';
  cwd.name = 'cwd';
  cwd.required = true;
  cwd.placeholder = roots[0] ?? '/absolute/path/to/project';
  cwd.value = roots[0] ?? '';
  cwd.autocomplete = 'off';
  cwd.spellcheck = false;
  const hint = el('p', 'field-hint', roots.length ? `Inside ${roots.join(', ')}` : 'An absolute path');
  hint.id = 'new-cwd-hint';
  cwd.setAttribute('aria-describedby', hint.id);
  if (roots.length) {
    // The allowed roots, offered as choices; any directory below one of them is accepted.
    const list = el('datalist');
    list.id = 'new-cwd-roots';
    for (const path of roots) {
      const option = /** @type {HTMLOptionElement} */ (el('option'));
      option.value = path;
      list.append(option);
    }
    cwd.setAttribute('list', list.id);
    form.append(list);
  }
  const submit = /** @type {HTMLButtonElement} */ (el('button', 'send', 'Start session'));
  submit.type = 'submit';
  const error = el('p', 'composer-error');
  error.setAttribute('role', 'alert');
  const agentRow = el('div', 'form-row');
  agentRow.append(agentLabel, select);
  const cwdRow = el('div', 'form-row');
  cwdRow.append(cwdLabel, cwd, hint);
  form.append(agentRow, cwdRow, submit, error);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const dir = cwd.value.trim();
    if (!dir.startsWith('/') && !/^[A-Za-z]:[\\/]/.test(dir)) {
      error.textContent = 'The working directory must be an absolute path.';
      cwd.focus();
      return;
    }
    submit.disabled = true;
    error.textContent = '';
    try {
      const result = await rpc.request('session/new', {
        cwd: dir,
        mcpServers: [],
        _meta: { 'acp-hub': { agent: select.value } },
      });
      location.assign(sessionHref(String(result.sessionId)));
    } catch (failure) {
      error.textContent = errorText(failure);
      submit.disabled = false;
    }
  });
  formBox.replaceChildren(el('h2', 'panel-title', 'New session'), form);
  formBox.hidden = false;
}

// ---------------------------------------------------------------------------------------------
// Cards

function schedule() {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    render();
  });
}

/**
 * Take in cards from the hub (the subscription's answer or a notification).
 * @param {any[]} changed
 * @param {any[]} removed
 */
function receive(changed, removed) {
  for (const card of changed) {
    if (typeof card?.sessionId !== 'string') continue;
    cards.set(card.sessionId, card);
    dirty.add(card.sessionId);
    for (const pending of card.pendingPermissions ?? []) {
      const id = `${card.sessionId}/${pending?.permissionId}`;
      if (!seenPending.has(id)) {
        seenPending.add(id);
        notifyWaiting(card, pending);
      }
    }
    // An answer under way for a request that is no longer pending: someone else answered.
    const waiting = answering.get(card.sessionId);
    if (waiting && !(card.pendingPermissions ?? []).some((/** @type {any} */ p) => p?.permissionId === waiting.permissionId)) {
      waiting.reject(new Error('already answered'));
    }
  }
  for (const sessionId of removed) {
    if (typeof sessionId !== 'string') continue;
    cards.delete(sessionId);
    dirty.add(sessionId);
  }
  schedule();
}

/** @param {Card} card */
function isWaiting(card) {
  return card.state !== 'lost' && Boolean(card.pendingPermissions?.length);
}

function render() {
  for (const sessionId of dirty) {
    const card = cards.get(sessionId);
    const node = nodes.get(sessionId);
    if (!card) {
      node?.remove();
      nodes.delete(sessionId);
      continue;
    }
    const fresh = node ?? el('li', 'card');
    // Keep focus (a permission button, a link) through a redraw of its own card.
    const focused = fresh.contains(document.activeElement) ? /** @type {HTMLElement} */ (document.activeElement).dataset.focusKey : undefined;
    drawCard(fresh, card);
    if (focused) /** @type {HTMLElement | null} */ (fresh.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`))?.focus();
    if (!node) {
      nodes.set(sessionId, fresh);
      grid.append(fresh);
    }
  }
  dirty.clear();
  // Waiting sessions first, each group in the order the page first saw the sessions; only
  // the cards out of place move.
  const all = [...cards.values()];
  const waiting = all.filter(isWaiting).map((c) => c.sessionId);
  const order = [...waiting, ...all.filter((c) => !isWaiting(c)).map((c) => c.sessionId)];
  order.forEach((sessionId, index) => {
    const node = nodes.get(sessionId);
    if (node && grid.children[index] !== node) grid.insertBefore(node, grid.children[index] ?? null);
  });
  empty.hidden = cards.size > 0;
  if (cards.size === 0) empty.textContent = 'No sessions yet.';
  const count = waiting.length;
  tally.textContent = `${cards.size} ${cards.size === 1 ? 'session' : 'sessions'}${count ? ` · ${count} waiting for permission` : ''}`;
  document.title = `${count ? `(${count} waiting) ` : ''}Sessions · acp-hub`;
  tick();
}

/**
 * @param {HTMLElement} node
 * @param {Card} card
 */
function drawCard(node, card) {
  const state = cardState(card);
  node.className = `card card-${state.key}`;
  node.dataset.sessionId = card.sessionId;
  node.dataset.state = state.key;
  // The head (the link to the session) stays the same element through redraws: a click
  // whose press and release straddle a redraw would otherwise land on two different links,
  // and the browser follows neither.
  const head = drawHead(node, card, state);

  const facts = el('p', 'card-facts');
  const clients = Array.isArray(card.clients) ? card.clients : [];
  facts.append(el('span', 'card-agent', String(card.agent ?? '')));
  // Who watches, by name (the first few; the rest counted); one person's several tabs once.
  /** @type {Map<string, number>} */
  const tabs = new Map();
  for (const c of clients) {
    const name = String(c?.name ?? c?.clientId);
    tabs.set(name, (tabs.get(name) ?? 0) + 1);
  }
  const names = [...tabs].slice(0, 3).map(([name, count]) => (count > 1 ? `${name} (${count})` : name));
  const more = tabs.size > names.length ? ` and ${tabs.size - names.length} more` : '';
  const watchers = el('span', 'card-watchers', `${clients.length} watching${names.length ? `: ${names.join(', ')}${more}` : ''}`);
  facts.append(watchers);
  const turn = el('span', 'card-turn');
  if (card.turnStartedAt) turn.dataset.since = card.turnStartedAt;
  facts.append(turn);
  if (card.queued) facts.append(el('span', 'card-queued', `${card.queued} queued`));
  facts.append(el('span', 'card-cwd', String(card.cwd ?? '')));

  const body = drawBody(node, card);
  if (node.firstElementChild === head) {
    // Everything between the head and the body is drawn anew; both of those are kept.
    while (head.nextSibling && head.nextSibling !== body) head.nextSibling.remove();
    node.insertBefore(facts, body.parentNode === node ? body : null);
    if (body.parentNode !== node) node.append(body);
  } else {
    node.replaceChildren(head, facts, body);
  }
}

/**
 * A card's body: while a request waits, what it asks (in place of the answer, which is the
 * previous turn's); else the last lines of the answer, as plain text. The body, each pending
 * request's box (its buttons) and the answer stay the same elements through redraws, as the
 * head does: a card is drawn again whenever its session changes (someone attaches, the
 * answer grows, the dashboard attaches to answer), and a click whose press and release
 * straddled a redraw landed on two different buttons and answered nothing; an answer under
 * way lost its disabled buttons.
 * @param {HTMLElement} node
 * @param {Card} card
 * @returns {HTMLElement}
 */
function drawBody(node, card) {
  const body = /** @type {HTMLElement} */ (node.querySelector(':scope > .card-body') ?? el('div', 'card-body'));
  /** @type {HTMLElement[]} */
  let children;
  if (isWaiting(card)) {
    body.dataset.shows = 'request';
    /** @type {Map<string, HTMLElement>} */
    const kept = new Map();
    for (const box of body.querySelectorAll(':scope > .card-permission')) {
      const element = /** @type {HTMLElement} */ (box);
      // Drawn for another role (the page reconnected with other rights): drawn again.
      if (element.dataset.role === role) kept.set(String(element.dataset.permissionId), element);
    }
    children = (card.pendingPermissions ?? []).map(
      (/** @type {any} */ pending) => kept.get(String(pending?.permissionId)) ?? drawPending(card, pending),
    );
  } else if (card.answer) {
    body.dataset.shows = 'answer';
    let answer = /** @type {HTMLElement | null} */ (body.querySelector(':scope > .card-answer'));
    if (!answer) {
      answer = el('div', 'card-answer');
      answer.setAttribute('role', 'region');
      // It may scroll: reachable with the keyboard.
      answer.tabIndex = 0;
    }
    answer.setAttribute('aria-label', `Latest answer of ${String(card.agent ?? 'the agent')}`);
    const text = plainText(card.answer);
    if (answer.textContent !== text) answer.textContent = text;
    children = [answer];
  } else {
    delete body.dataset.shows;
    children = [];
  }
  if (children.length !== body.children.length || children.some((child, i) => body.children[i] !== child)) {
    body.replaceChildren(...children);
  }
  return body;
}

/**
 * A card's head: the link to the session and the state badge, updated in place once drawn.
 * @param {HTMLElement} node
 * @param {Card} card
 * @param {{ key: string, text: string }} state
 * @returns {HTMLElement}
 */
function drawHead(node, card, state) {
  let head = /** @type {HTMLElement | null} */ (node.querySelector(':scope > .card-head'));
  if (!head) {
    head = el('div', 'card-head');
    const link = el('a', 'card-title');
    link.dataset.focusKey = 'link';
    const heading = el('h3', 'card-heading');
    heading.append(link);
    head.append(heading, el('span'));
  }
  const link = /** @type {HTMLAnchorElement} */ (head.querySelector('a.card-title'));
  const title = String(card.title || card.sessionId);
  if (link.textContent !== title) link.textContent = title;
  const href = sessionHref(card.sessionId);
  if (link.getAttribute('href') !== href) link.href = href;
  const badge = /** @type {HTMLElement} */ (head.lastElementChild);
  badge.className = `state-badge state-${state.key}`;
  if (badge.textContent !== state.text) badge.textContent = state.text;
  return head;
}

/**
 * A pending permission request on a card, with its options for those who may answer.
 * @param {Card} card
 * @param {any} pending
 * @returns {HTMLElement}
 */
function drawPending(card, pending) {
  const box = el('div', 'card-permission');
  box.dataset.permissionId = String(pending?.permissionId);
  box.dataset.role = role;
  box.setAttribute('role', 'group');
  const title = String(pending?.title ?? 'the agent asks');
  box.setAttribute('aria-label', `Permission: ${title}`);
  // What it asks in full (the subject, not only its title), as the session page shows it.
  box.append(...requestNodes(pending, pending?.tool));
  if (!roleAtLeast(role, 'approver')) {
    box.append(el('p', 'field-hint', 'An approver can answer it.'));
    guard(box);
    return box;
  }
  const status = el('p', 'composer-error');
  status.setAttribute('role', 'alert');
  const options = optionButtons(pending?.options, (optionId) => {
    for (const other of options.querySelectorAll('button')) /** @type {HTMLButtonElement} */ (other).disabled = true;
    answerFromCard(card, String(pending.permissionId), optionId).catch((error) => {
      for (const other of options.querySelectorAll('button')) /** @type {HTMLButtonElement} */ (other).disabled = false;
      announce(`Not answered: ${errorText(error)}`);
      status.textContent = `Not answered: ${errorText(error)}`;
    });
  });
  for (const choice of options.querySelectorAll('button')) {
    const node = /** @type {HTMLElement} */ (choice);
    node.dataset.focusKey = `${pending.permissionId}/${node.dataset.kind}/${[...options.children].indexOf(node)}`;
  }
  box.append(options, status);
  guard(box);
  return box;
}

/**
 * Answer a pending request from its card: attach, answer the copy the hub offers, detach.
 * @param {Card} card
 * @param {string} permissionId
 * @param {string | null} optionId `null`: declined (the request resolves `cancelled`)
 */
async function answerFromCard(card, permissionId, optionId) {
  const sessionId = card.sessionId;
  if (answering.has(sessionId)) throw new Error('an answer to this session is under way');
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const answered = new Promise((resolve, reject) => {
    answering.set(sessionId, { permissionId, optionId, resolve: () => resolve(undefined), reject });
    timer = setTimeout(() => reject(new Error('the hub did not offer the request (is it still waiting, and may you answer it?)')), ANSWER_WAIT_MS);
  });
  try {
    await rpc.request('session/resume', { sessionId, cwd: card.cwd ?? '/' });
    await answered;
    announce(`Answered: ${String(card.agent ?? '')}`);
  } finally {
    clearTimeout(timer);
    answering.delete(sessionId);
    rpc.request('session/detach', { sessionId }).catch(() => {});
  }
}

/** Update the running turns' durations (once a second). */
function tick() {
  const now = Date.now();
  for (const node of grid.querySelectorAll('.card-turn')) {
    const span = /** @type {HTMLElement} */ (node);
    const since = span.dataset.since ? Date.parse(span.dataset.since) : NaN;
    const text = Number.isNaN(since) ? '' : `turn: ${duration(now - since)}`;
    if (span.textContent !== text) span.textContent = text;
  }
}
setInterval(tick, 1000);

// ---------------------------------------------------------------------------------------------
// Browser notifications (asked for on a click only)

function notificationsSupported() {
  return typeof Notification !== 'undefined';
}

function drawNotifyButton() {
  if (!notificationsSupported() || !roleAtLeast(role, 'approver')) {
    notifyButton.hidden = true;
    return;
  }
  notifyButton.hidden = false;
  const state = Notification.permission;
  notifyButton.textContent = state === 'granted' ? 'Notifications on' : state === 'denied' ? 'Notifications blocked' : 'Notify me of waiting permissions';
  notifyButton.disabled = state !== 'default';
}

async function enableNotifications() {
  if (!notificationsSupported()) return;
  await Notification.requestPermission();
  drawNotifyButton();
}

/**
 * A browser notification for a newly waiting request, when the person turned them on.
 * @param {Card} card
 * @param {any} pending
 */
function notifyWaiting(card, pending) {
  if (!notificationsSupported() || Notification.permission !== 'granted' || !roleAtLeast(role, 'approver')) return;
  const note = new Notification(`${String(card.agent ?? 'An agent')} waits for permission`, {
    body: String(pending?.title ?? ''),
    tag: `${card.sessionId}/${pending?.permissionId}`,
  });
  note.addEventListener('click', () => {
    window.focus();
    nodes.get(card.sessionId)?.querySelector('button')?.focus();
  });
}

// ---------------------------------------------------------------------------------------------
// The connection

// A tab opened without a token takes the one another tab of this origin has (token.js).
await sharedToken();
rpc = new RpcConnection(hubSocketUrl(), {
  async handshake(conn) {
    const init = await conn.request('initialize', initializeParams(query));
    const meta = hubMeta(init);
    statusRow.querySelector('.identity')?.remove();
    statusRow.append(identityBadge(meta));
    role = String(meta.role ?? 'viewer');
    root.dataset.role = role;
    // The hub sends workspace roots to those who may start sessions: an owner of the whole
    // hub, not a share link or a token for some sessions.
    if (roleAtLeast(role, 'owner') && Array.isArray(meta.workspaceRoots)) {
      const agents = Array.isArray(meta.agents) ? meta.agents : [];
      const roots = Array.isArray(meta.workspaceRoots) ? meta.workspaceRoots.map(String) : [];
      drawForm(agents, meta.defaultAgent, roots);
    } else {
      formBox.hidden = true;
    }
    drawNotifyButton();
    // A (re)subscription is the whole picture, in pages (each card as new as the page that
    // brought it, notifications in between included): forget cards the hub no longer has.
    const current = new Set();
    subscribing = current;
    try {
      /** @type {Record<string, unknown>} */
      let params = {};
      for (;;) {
        const result = await conn.request('_hub/subscribe_sessions', params);
        const sessions = Array.isArray(result?.sessions) ? result.sessions : [];
        for (const c of sessions) current.add(c?.sessionId);
        receive(sessions, []);
        if (typeof result?.nextCursor !== 'string') break;
        params = { cursor: result.nextCursor };
      }
    } finally {
      subscribing = null;
    }
    receive([], [...cards.keys()].filter((id) => !current.has(id)));
  },
  onNotification(method, params) {
    if (method === '_hub/sessions_changed') {
      const changed = Array.isArray(params?.sessions) ? params.sessions : [];
      for (const c of changed) subscribing?.add(c?.sessionId);
      receive(changed, Array.isArray(params?.removed) ? params.removed : []);
    } else if (method === '_hub/answer_refused') {
      for (const waiting of answering.values()) waiting.reject(new Error(String(params?.error?.message ?? 'refused')));
    }
    // session/update and presence of a session attached to answer a request: not shown here.
  },
  onRequest(id, method, params) {
    const waiting = answering.get(String(params?.sessionId));
    if (method === 'session/request_permission' && waiting && hubMeta(params).permissionId === waiting.permissionId) {
      rpc.respond(id, { outcome: waiting.optionId === null ? { outcome: 'cancelled' } : { outcome: 'selected', optionId: waiting.optionId } });
      waiting.resolve();
      return;
    }
    // Another request of a session attached for a moment: left to the people on its page
    // (detaching withdraws this copy).
    if (method === 'session/request_permission') return;
    rpc.respondError(id, -32601, `method not supported by this page: ${method}`);
  },
});
rpc.addEventListener('status', (event) => {
  const status = /** @type {CustomEvent} */ (event).detail;
  connection.textContent = connectionText(status);
  connection.className = `conn conn-${status.state}`;
  root.dataset.connection = status.state;
  if (status.state === 'closed' && (status.refused || status.code === CLOSE.POLICY)) {
    // The hub refused the page's credential: say why, from the hub's own answer.
    refusal(pageToken()).then((refused) => {
      renderRefusal(root, refused ?? { error: status.refused ?? 'refused', message: String(status.reason || 'Access refused') });
    });
  }
});
window.addEventListener('online', () => rpc.retryNow());
rpc.start();
