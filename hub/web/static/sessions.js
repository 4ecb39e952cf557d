// @ts-check
/**
 * The sessions page `/`: every session of the hub (`session/list`, with the hub's
 * `_meta["acp-hub"]` details), refreshed every few seconds, and for owners a form that starts
 * a new session (`session/new` on the chosen agent) and opens it.
 */

import { RpcConnection, hubMeta, hubSocketUrl } from './rpc.js';
import { initializeParams } from './session-app.js';
import { el } from './dom.js';

const REFRESH_MS = 4000;

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

const root = /** @type {HTMLElement} */ (document.getElementById('app'));
const header = el('header', 'app-header');
const title = el('h1', 'session-title', 'Sessions');
const connection = el('span', 'conn conn-connecting', 'connecting…');
connection.setAttribute('role', 'status');
const statusRow = el('div', 'status-row');
statusRow.append(connection);
header.append(title, statusRow);

const main = el('main', 'sessions-main');
const formBox = el('section', 'panel new-session');
formBox.hidden = true;
const listBox = el('section', 'panel session-list');
listBox.setAttribute('aria-live', 'polite');
listBox.append(el('h2', 'panel-title', 'All sessions'));
const listBody = el('div', 'panel-body');
listBody.append(el('p', 'empty', 'Loading…'));
listBox.append(listBody);
main.append(formBox, listBox);
root.replaceChildren(header, main);

/** @type {RpcConnection} */
// eslint-disable-next-line prefer-const
let rpc;
/** @type {ReturnType<typeof setTimeout> | null} */
let timer = null;

/**
 * @param {any[]} agents
 * @param {string | undefined} defaultAgent
 * @param {string} defaultCwd
 */
function drawForm(agents, defaultAgent, defaultCwd) {
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
  cwd.placeholder = '/absolute/path/to/project';
  cwd.value = defaultCwd;
  cwd.autocomplete = 'off';
  cwd.spellcheck = false;
  const submit = /** @type {HTMLButtonElement} */ (el('button', 'send', 'Start session'));
  submit.type = 'submit';
  const error = el('p', 'composer-error');
  error.setAttribute('role', 'alert');
  const agentRow = el('div', 'form-row');
  agentRow.append(agentLabel, select);
  const cwdRow = el('div', 'form-row');
  cwdRow.append(cwdLabel, cwd);
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
      error.textContent = failure instanceof Error ? failure.message : String(failure);
      submit.disabled = false;
    }
  });
  formBox.replaceChildren(el('h2', 'panel-title', 'New session'), form);
  formBox.hidden = false;
}

/** @param {any[]} sessions */
function drawList(sessions) {
  if (!sessions.length) {
    listBody.replaceChildren(el('p', 'empty', 'No sessions yet.'));
    return;
  }
  const table = el('table', 'sessions-table');
  const head = el('thead');
  const headRow = el('tr');
  for (const name of ['Session', 'Agent', 'State', 'Clients', 'Pending permissions', 'Directory']) {
    const th = el('th', '', name);
    th.setAttribute('scope', 'col');
    headRow.append(th);
  }
  head.append(headRow);
  const body = el('tbody');
  for (const info of sessions) {
    const meta = hubMeta(info);
    const row = el('tr', 'session-row');
    row.dataset.sessionId = String(info?.sessionId ?? '');
    const link = /** @type {HTMLAnchorElement} */ (el('a', '', String(info?.title || info?.sessionId)));
    link.href = sessionHref(String(info?.sessionId));
    const first = el('td');
    first.append(link);
    const state = String(meta.state ?? 'unknown');
    const stateText = meta.stopReason && state === 'idle' ? `idle · ${String(meta.stopReason).replace(/_/g, ' ')}` : state.replace(/_/g, ' ');
    const clients = Array.isArray(meta.clients) ? meta.clients.length : Number(meta.clients ?? 0);
    const pending = Array.isArray(meta.pendingPermissions) ? meta.pendingPermissions.length : Number(meta.pendingPermissions ?? 0);
    const stateCell = el('td');
    stateCell.append(el('span', `state-badge state-${state.replace(/[^a-z_]/gi, '')}`, stateText));
    const pendingCell = el('td', pending ? 'pending-some' : '', String(pending));
    row.append(first, el('td', '', String(meta.agent ?? '')), stateCell, el('td', '', String(clients)), pendingCell, el('td', 'cwd', String(info?.cwd ?? '')));
    body.append(row);
  }
  table.append(head, body);
  const wrap = el('div', 'md-table');
  wrap.append(table);
  listBody.replaceChildren(wrap);
}

async function refresh() {
  if (timer !== null) clearTimeout(timer);
  timer = null;
  try {
    /** @type {any[]} */
    const sessions = [];
    /** @type {string | undefined} */
    let next;
    for (let page = 0; page < 50; page++) {
      const result = await rpc.request('session/list', next ? { cursor: next } : {});
      sessions.push(...(Array.isArray(result?.sessions) ? result.sessions : []));
      next = result?.nextCursor ?? undefined;
      if (!next) break;
    }
    drawList(sessions);
  } catch (error) {
    console.warn('acp-hub: session/list failed', error);
  }
  if (rpc.status.state === 'ready' || rpc.status.state === 'open') timer = setTimeout(refresh, REFRESH_MS);
}

rpc = new RpcConnection(hubSocketUrl(), {
  async handshake(conn) {
    const init = await conn.request('initialize', initializeParams(query));
    const meta = hubMeta(init);
    if (meta.role === 'owner') {
      const agents = Array.isArray(meta.agents) ? meta.agents : [];
      drawForm(agents, meta.defaultAgent, String(meta.defaultCwd ?? meta.cwd ?? ''));
    } else {
      formBox.hidden = true;
    }
    await refresh();
  },
  onNotification() {},
  onRequest(id, method) {
    rpc.respondError(id, -32601, `method not supported by this page: ${method}`);
  },
});
rpc.addEventListener('status', (event) => {
  const status = /** @type {CustomEvent} */ (event).detail;
  const labels = { connecting: 'connecting…', open: 'connecting…', ready: 'live', waiting: 'reconnecting…', closed: status.code === 1008 ? 'not allowed (check the link or token)' : 'disconnected' };
  connection.textContent = labels[/** @type {keyof labels} */ (status.state)];
  connection.className = `conn conn-${status.state}`;
});
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && rpc.status.state === 'ready') refresh();
});
rpc.start();
