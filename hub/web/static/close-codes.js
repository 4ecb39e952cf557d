// @ts-check
/**
 * Every WebSocket close code the web client reads or uses, in one table: the standard ones
 * (RFC 6455, section 7.4.1) named for what the hub means by them, and the client's own in
 * the private range 4000-4099. The hub's side of the table is `hub/server/close_codes.py`.
 */

export const CLOSE = Object.freeze({
  /** 1000: the connection ended as asked (the page stops it). */
  NORMAL: 1000,
  /** 1001: the hub shuts down; come back. */
  GOING_AWAY: 1001,
  /** 1003: the hub takes text frames only. */
  UNSUPPORTED_DATA: 1003,
  /** 1006: no close frame: the network failed, or the upgrade was refused (HTTP 401/403). */
  ABNORMAL: 1006,
  /** 1008: the credential does not (or no longer) admit the client: refused, revoked, expired. */
  POLICY: 1008,
  /** 1009: a frame over the hub's size limit. */
  TOO_BIG: 1009,
  /** 1011: the hub failed, or no keepalive ping was answered in time. */
  INTERNAL_ERROR: 1011,
  /** 1012: the hub restarts. */
  SERVICE_RESTART: 1012,
  /** 1013: a slow consumer; resume with the cursor. */
  SLOW_CONSUMER: 1013,
  /** The client's own close: reconnect at once and resume from the cursor. */
  RESYNC: 4000,
  /** The client's own close: its handshake (initialize, resume...) failed; reconnect. */
  HANDSHAKE_FAILED: 4001,
});

/**
 * Close codes after which a reconnect is attempted.
 * @type {ReadonlySet<number>}
 */
export const RETRY_CODES = new Set([
  CLOSE.GOING_AWAY,
  CLOSE.ABNORMAL,
  CLOSE.INTERNAL_ERROR,
  CLOSE.SERVICE_RESTART,
  CLOSE.SLOW_CONSUMER,
  CLOSE.RESYNC,
  CLOSE.HANDSHAKE_FAILED,
]);
