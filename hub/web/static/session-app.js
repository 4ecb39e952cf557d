// @ts-check
/**
 * The live session controller shared by the session page and the embed view.
 *
 * Theory of operation: connect to `/acp`, `initialize` (ACP v2), then `session/resume` the
 * page's session. The first resume asks for the whole compacted replay (`{type: "start"}`);
 * every later one (after a reconnect) asks for the events after the cursor
 * (`{type: "_hub_after", epoch, seq}`). The cursor is the `seq`/`epoch` the hub puts in
 * `params._meta["acp-hub"]` of each update and in the resume response. Updates are folded
 * into the model at once; the view redraws what changed once per animation frame. An update
 * whose seq the page already holds is skipped; a seq that jumps past the next one means the
 * stream is inconsistent, and the page reconnects with its cursor to repair it. A
 * `_hub_reset` update clears the model; the snapshot that follows rebuilds it.
 */

import { CLOSE } from './close-codes.js';
import { SessionModel } from './fold.js';
import { ShareDialog, identityBadge, renderRefusal } from './access.js';
import { DownloadMenu } from './download.js';
import { RulesMenu } from './rules.js';
import { RpcConnection, RpcError, hubMeta, hubSocketUrl } from './rpc.js';
import { pageToken, refusal } from './token.js';
import { SessionView } from './view.js';

export const CLIENT_NAME = 'acp-hub web';
export const CLIENT_VERSION = '0.1.0';

/**
 * The display name this browser uses in presence: `?name=`, else the one saved earlier.
 * @param {URLSearchParams} query
 * @returns {string | null}
 */
export function displayName(query) {
  const fromQuery = query.get('name');
  if (fromQuery) return fromQuery.slice(0, 80);
  try {
    return localStorage.getItem('acp-hub.name');
  } catch {
    return null;
  }
}

/**
 * The `initialize` params of the web client.
 * @param {URLSearchParams} query
 * @returns {any}
 */
export function initializeParams(query) {
  // This client handles v2 batch frames, so replay may come in batches.
  /** @type {Record<string, unknown>} */
  const hub = { batches: true };
  const role = query.get('role');
  if (role) hub.role = role;
  const name = displayName(query);
  if (name) hub.name = name;
  return {
    protocolVersion: 2,
    info: { name: CLIENT_NAME, version: CLIENT_VERSION },
    // Forms and links the agent asks a person to fill or open (the page shows both).
    capabilities: { elicitation: { form: {}, url: {} } },
    _meta: { 'acp-hub': hub },
  };
}

/**
 * Mount a live session into `root`.
 * @param {HTMLElement} root
 * @param {{embed?: boolean}} [options]
 * @returns {{model: SessionModel, view: SessionView, connection: RpcConnection}}
 */
export function mountSession(root, options = {}) {
  const query = new URLSearchParams(location.search);
  const parts = location.pathname.split('/').filter(Boolean);
  const sessionId = decodeURIComponent(parts[parts.length - 1] ?? '');
  const model = new SessionModel();

  /** @type {{epoch: unknown, seq: number} | null} */
  let cursor = null;
  /** @type {string | null} */
  let cwd = null;
  let resumed = false;
  /** updates received during the current catch-up, or null outside one */
  /** @type {number | null} */
  let replaying = null;
  let expected = 0;

  /** @type {RpcConnection} */
  // eslint-disable-next-line prefer-const
  let connection;

  const view = new SessionView(
    root,
    model,
    {
      async prompt(text) {
        await connection.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] });
      },
      cancel() {
        connection.notify('session/cancel', { sessionId });
      },
      async setConfig(configId, type, value) {
        const result = await connection.request('session/set_config_option', { sessionId, configId, type, value });
        if (result && Array.isArray(result.configOptions)) {
          model.setConfigOptions(result.configOptions);
          view.schedule();
        }
      },
      async withdraw(queueId) {
        await connection.request('_hub/queue/withdraw', { sessionId, queueId });
      },
      async lease(action, clientId) {
        await connection.request(`_hub/lease/${action}`, clientId ? { sessionId, clientId } : { sessionId });
      },
      async setPolicy(policy) {
        await connection.request('_hub/set_policy', { sessionId, ...policy });
      },
      async close(remove) {
        await connection.request(remove ? 'session/delete' : 'session/close', { sessionId });
      },
      answer(requestId, optionId) {
        const outcome = optionId === null ? { outcome: 'cancelled' } : { outcome: 'selected', optionId };
        connection.respond(requestId, { outcome });
      },
      elicit(requestId, result) {
        connection.respond(requestId, result);
      },
    },
    { embed: options.embed, sessionId },
  );

  /**
   * Find the session's working directory (session/resume requires one).
   * @returns {Promise<string | null>}
   */
  async function lookupSession() {
    /** @type {string | null | undefined} */
    let next = undefined;
    for (let page = 0; page < 50; page++) {
      /** @type {any} */
      const result = await connection.request('session/list', next ? { cursor: next } : {});
      for (const info of Array.isArray(result?.sessions) ? result.sessions : []) {
        if (info?.sessionId === sessionId) {
          const summary = hubMeta(info);
          if (typeof summary.agent === 'string') view.setAgentName(summary.agent);
          if (typeof summary.seq === 'number') expected = summary.seq;
          if (info.title && !model.info.title) {
            model.info.title = info.title;
            model.dirty.add('info');
          }
          return typeof info.cwd === 'string' ? info.cwd : null;
        }
      }
      next = result?.nextCursor;
      if (!next) return null;
    }
    return null;
  }

  async function handshake() {
    const init = await connection.request('initialize', initializeParams(query));
    const meta = hubMeta(init);
    view.setRole(String(meta.role ?? 'viewer'), String(meta.clientId ?? meta.connectionId ?? ''));
    showIdentity(meta);
    if (cwd === null) cwd = await lookupSession();
    /** @type {any} */
    const params = { sessionId, cwd: cwd ?? '/' };
    if (cursor && resumed) {
      params.replayFrom = { type: '_hub_after', epoch: cursor.epoch, seq: cursor.seq };
    } else {
      model.clear();
      cursor = null;
      params.replayFrom = { type: 'start' };
      replaying = 0;
      view.setReplay(0, expected);
    }
    let result;
    try {
      result = await connection.request('session/resume', params);
    } catch (error) {
      replaying = null;
      view.setReplay(null);
      if (error instanceof RpcError && error.code !== -32000) {
        view.showError(`Could not open session ${sessionId}: ${error.message}`);
        connection.stop();
      }
      throw error;
    }
    const resumeMeta = hubMeta(result);
    if (typeof resumeMeta.seq === 'number') cursor = { epoch: resumeMeta.epoch, seq: resumeMeta.seq };
    resumed = true;
    replaying = null;
    view.setReplay(null);
    view.schedule();
  }

  /** @param {any} params */
  function onUpdate(params) {
    if (params?.sessionId !== undefined && params.sessionId !== sessionId) return;
    const update = params?.update;
    const meta = hubMeta(params);
    if (replaying !== null && meta.replay === true) {
      replaying += 1;
      // The text is cheap to set; once per frame's worth of updates is plenty.
      if (replaying % 500 === 0) view.setReplay(replaying, expected);
    }
    if (update?.sessionUpdate === '_hub_reset') {
      model.apply(update);
      cursor = null;
      view.clearRequests();
      view.schedule();
      return;
    }
    if (typeof meta.seq === 'number') {
      if (cursor && meta.epoch === cursor.epoch) {
        if (meta.seq <= cursor.seq) return; // already held: a duplicate
        if (meta.seq > cursor.seq + 1) {
          console.warn(`acp-hub: gap in the stream (${cursor.seq} -> ${meta.seq}); resyncing`);
          connection.restart();
          return;
        }
      }
      cursor = { epoch: meta.epoch, seq: meta.seq };
    }
    model.apply(update);
    if (update?.sessionUpdate === '_hub_rules' && rules) rules.show(Array.isArray(update.rules) ? update.rules : []);
    view.schedule();
  }

  /** @type {HTMLElement | null} */
  let identity = null;
  /** @type {ShareDialog | null} */
  let share = null;
  /** @type {DownloadMenu | null} */
  let download = null;
  /** @type {RulesMenu | null} */
  let rules = null;
  /** @param {Record<string, any>} meta */
  function showIdentity(meta) {
    const row = view.account;
    const badge = identityBadge(meta);
    if (identity) identity.replaceWith(badge);
    else row.append(badge);
    identity = badge;
    // A share link does not manage links, whatever its role (the hub refuses it too).
    if (meta.role === 'owner' && !meta.link && !options.embed && !share) {
      share = new ShareDialog(connection, sessionId);
      row.append(share.button);
    }
    if (meta.role === 'owner' && !options.embed && !rules) {
      rules = new RulesMenu(connection, sessionId, view.dialogs.element, (id) =>
        [...view.dialogs.requests].find(([key]) => String(key) === id)?.[1]?.params);
      row.append(rules.element);
    }
    if (!options.embed && !download) {
      download = new DownloadMenu(connection, sessionId);
      row.append(download.element);
    }
  }

  connection = new RpcConnection(hubSocketUrl(), {
    handshake,
    onNotification(method, params) {
      switch (method) {
        case 'session/update':
          onUpdate(params);
          break;
        case '$/cancel_request':
          view.removeRequest(params?.requestId);
          break;
        case 'elicitation/complete':
          view.dialogs.completeElicitation(params?.elicitationId);
          break;
        case '_hub/session_closed':
          if (params?.sessionId !== sessionId) break;
          // The session is gone from the hub: nothing to resume, so no reconnecting.
          model.closed = { deleted: Boolean(params?.deleted), by: params?.by ?? null };
          model.dirty.add('closed');
          view.schedule();
          view.announce(`This session was ${params?.deleted ? 'deleted' : 'closed'}`);
          connection.stop();
          break;
        case '_hub/answer_refused':
          view.announce(`Your answer was refused: ${String(params?.error?.message ?? 'unknown reason')}`);
          break;
        default:
          console.debug('acp-hub: notification ignored', method);
      }
    },
    onRequest(id, method, params) {
      switch (method) {
        case 'session/request_permission':
          if (params?.sessionId === sessionId) view.addRequest(id, params);
          else connection.respondError(id, -32002, 'session not shown here');
          break;
        case 'elicitation/create':
          if (params?.sessionId === sessionId) view.dialogs.addElicitation(id, params);
          else connection.respondError(id, -32002, 'session not shown here');
          break;
        default:
          connection.respondError(id, -32601, `method not supported by this client: ${method}`);
      }
    },
    onClose() {
      view.clearRequests();
    },
  });
  connection.addEventListener('status', (event) => {
    const status = /** @type {CustomEvent} */ (event).detail;
    view.setConnection(status);
    if (status.state === 'closed' && (status.refused || status.code === CLOSE.POLICY)) {
      // The hub refused the credential or withdrew it (a revoked link): say which, from the
      // hub's own answer, instead of a dead session.
      refusal(pageToken()).then((refused) => {
        renderRefusal(root, refused ?? { error: status.refused ?? 'refused', message: String(status.reason || 'Access refused') });
      });
    }
  });
  window.addEventListener('online', () => {
    connection.retryNow();
  });
  connection.start();
  return { model, view, connection };
}
