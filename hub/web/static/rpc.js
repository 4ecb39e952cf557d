// @ts-check
/**
 * A JSON-RPC 2.0 connection over a WebSocket that reconnects by itself.
 *
 * Theory of operation: `start()` opens the socket and runs `handshake(conn)` (initialize,
 * resume...) once it is open; requests made before that are sent as soon as the socket is
 * open. When the socket closes with a code that means "try again" (`RETRY_CODES` of
 * close-codes.js: going away, abnormal, internal error, restart, slow consumer, and the
 * client's own resync and failed handshake) the connection waits a jittered, exponentially
 * growing delay and opens a new socket, running the handshake again. Any other close code
 * (normal, unsupported data, policy, too big) is final. A socket refused
 * before it opened (the hub answers a bad credential with HTTP 401/403, which a browser only
 * sees as 1006) is final too when `/auth/whoami` confirms the refusal: the status then says
 * `refused` with the hub's reason (`expired`, `revoked`, ...).
 *
 * Lifecycle is reported as a `status` DOM event whose detail is a {@link ConnectionStatus}.
 * Incoming frames may hold one message or (ACP v2) a batch array; each entry is dispatched
 * in order: responses settle the pending request, requests go to `onRequest`, notifications
 * to `onNotification`.
 */

import { CLOSE, RETRY_CODES } from './close-codes.js';
import { pageToken, refusal, tokenProtocols } from './token.js';

/**
 * @typedef {{code: number, message: string, data?: unknown}} RpcErrorObject
 * @typedef {{state: 'connecting' | 'open' | 'ready' | 'waiting' | 'closed', code?: number,
 *   reason?: string, retryInMs?: number, attempt?: number, refused?: string}} ConnectionStatus
 * @typedef {{
 *   handshake: (conn: RpcConnection) => Promise<void>,
 *   onNotification: (method: string, params: any) => void,
 *   onRequest: (id: string | number, method: string, params: any) => void,
 *   onClose?: () => void,
 * }} Handlers
 */

/** An error answered by the peer. */
export class RpcError extends Error {
  /** @param {RpcErrorObject} error */
  constructor(error) {
    super(typeof error?.message === 'string' ? error.message : 'error');
    this.code = typeof error?.code === 'number' ? error.code : -32603;
    this.data = error?.data;
  }
}

export class RpcConnection extends EventTarget {
  /**
   * @param {string} url the WebSocket URL
   * @param {Handlers} handlers
   * @param {{baseDelayMs?: number, maxDelayMs?: number, token?: string | null}} [options]
   *   `token`: the credential (default: the page's, see token.js)
   */
  constructor(url, handlers, options = {}) {
    super();
    this.url = url;
    this.token = options.token === undefined ? pageToken() : options.token;
    this.handlers = handlers;
    this.baseDelayMs = options.baseDelayMs ?? 400;
    this.maxDelayMs = options.maxDelayMs ?? 15000;
    /** @type {WebSocket | null} */
    this.socket = null;
    this.nextId = 1;
    /** @type {Map<number, {resolve: (v: any) => void, reject: (e: Error) => void}>} */
    this.pending = new Map();
    /** @type {string[]} frames waiting for the socket to open */
    this.outbox = [];
    this.attempt = 0;
    this.stopped = false;
    /** @type {ReturnType<typeof setTimeout> | null} */
    this.timer = null;
    /** @type {ConnectionStatus} */
    this.status = { state: 'closed' };
  }

  /** Open the connection (idempotent while one is open or pending). */
  start() {
    this.stopped = false;
    if (this.socket) return;
    this.open();
  }

  /** Close for good: no reconnect. */
  stop() {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.socket?.close(CLOSE.NORMAL, 'bye');
  }

  /** Drop the current socket and reconnect now (used when the stream looks inconsistent). */
  restart() {
    if (this.socket) this.socket.close(CLOSE.RESYNC, 'resync');
  }

  /** Skip the remaining backoff delay (the browser says it is back online). */
  retryNow() {
    if (this.timer === null || this.stopped) return;
    clearTimeout(this.timer);
    this.timer = null;
    this.open();
  }

  /** @param {ConnectionStatus} status */
  setStatus(status) {
    this.status = status;
    this.dispatchEvent(new CustomEvent('status', { detail: status }));
  }

  open() {
    this.setStatus({ state: 'connecting', attempt: this.attempt });
    const socket = new WebSocket(this.url, tokenProtocols(this.token));
    this.socket = socket;
    let opened = false;
    socket.addEventListener('open', () => {
      if (this.socket !== socket) return;
      opened = true;
      this.setStatus({ state: 'open' });
      for (const frame of this.outbox.splice(0)) socket.send(frame);
      this.handlers.handshake(this).then(
        () => {
          if (this.socket !== socket) return;
          this.attempt = 0;
          this.setStatus({ state: 'ready' });
        },
        (error) => {
          console.warn('acp-hub: handshake failed', error);
          if (this.socket === socket) socket.close(CLOSE.HANDSHAKE_FAILED, 'handshake failed');
        },
      );
    });
    socket.addEventListener('message', (event) => {
      if (this.socket !== socket || typeof event.data !== 'string') return;
      let message;
      try {
        message = JSON.parse(event.data);
      } catch {
        console.warn('acp-hub: unparseable frame');
        return;
      }
      if (Array.isArray(message)) {
        for (const entry of message) this.dispatch(entry);
      } else {
        this.dispatch(message);
      }
    });
    socket.addEventListener('close', (event) => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.outbox.length = 0;
      for (const entry of this.pending.values()) {
        entry.reject(new RpcError({ code: -32000, message: 'connection closed' }));
      }
      this.pending.clear();
      this.handlers.onClose?.();
      if (!opened && event.code === CLOSE.ABNORMAL && !this.stopped) {
        this.checkRefusal(event);
        return;
      }
      this.afterClose(event);
    });
  }

  /**
   * A socket that never opened: ask the hub whether the credential is refused (final) or
   * the network failed (retry).
   * @param {CloseEvent} event
   */
  checkRefusal(event) {
    this.setStatus({ state: 'waiting', code: event.code, reason: event.reason, retryInMs: 0 });
    refusal(this.token).then((refused) => {
      if (this.stopped || this.socket) return;
      if (refused) {
        this.stopped = true;
        this.setStatus({ state: 'closed', code: CLOSE.POLICY, reason: refused.message, refused: refused.error });
        return;
      }
      this.afterClose(event);
    });
  }

  /** @param {CloseEvent | {code: number, reason: string}} event */
  afterClose(event) {
    const retry = RETRY_CODES.has(event.code);
    if (this.stopped || !retry) {
      this.setStatus({ state: 'closed', code: event.code, reason: event.reason });
      return;
    }
    const ceiling = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** this.attempt);
    const delay = Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
    this.attempt += 1;
    this.setStatus({ state: 'waiting', code: event.code, reason: event.reason, retryInMs: delay });
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.stopped) this.open();
    }, delay);
  }

  /** @param {any} message */
  dispatch(message) {
    if (message === null || typeof message !== 'object') return;
    const hasId = 'id' in message && message.id !== null && message.id !== undefined;
    if (typeof message.method === 'string') {
      if (hasId) {
        this.handlers.onRequest(message.id, message.method, message.params ?? {});
      } else {
        this.handlers.onNotification(message.method, message.params ?? {});
      }
      return;
    }
    if (!hasId) {
      if (message.error) console.warn('acp-hub: error without id', message.error);
      return;
    }
    const entry = this.pending.get(message.id);
    if (!entry) return;
    this.pending.delete(message.id);
    if (message.error) entry.reject(new RpcError(message.error));
    else entry.resolve(message.result);
  }

  /** @param {unknown} payload */
  send(payload) {
    const frame = JSON.stringify(payload);
    if (this.socket && this.socket.readyState === WebSocket.OPEN) this.socket.send(frame);
    else this.outbox.push(frame);
  }

  /**
   * Send a request; resolves with its result, rejects with an {@link RpcError}.
   * @param {string} method
   * @param {unknown} params
   * @returns {Promise<any>}
   */
  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }

  /**
   * @param {string} method
   * @param {unknown} params
   */
  notify(method, params) {
    this.send({ jsonrpc: '2.0', method, params });
  }

  /**
   * Answer a request the peer sent.
   * @param {string | number} id
   * @param {unknown} result
   */
  respond(id, result) {
    this.send({ jsonrpc: '2.0', id, result });
  }

  /**
   * @param {string | number} id
   * @param {number} code
   * @param {string} message
   */
  respondError(id, code, message) {
    this.send({ jsonrpc: '2.0', id, error: { code, message } });
  }
}

/**
 * The hub's WebSocket URL for the page's own origin (the credential travels as a
 * subprotocol entry, see token.js, never in the URL).
 * @returns {string}
 */
export function hubSocketUrl() {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return new URL(`${scheme}//${location.host}/acp`).href;
}

/**
 * The `_meta["acp-hub"]` object of a result or params, or an empty object.
 * @param {any} value
 * @returns {Record<string, any>}
 */
export function hubMeta(value) {
  const meta = value && typeof value === 'object' ? value._meta : null;
  const hub = meta && typeof meta === 'object' ? meta['acp-hub'] : null;
  return hub && typeof hub === 'object' ? hub : {};
}
