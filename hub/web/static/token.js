// @ts-check
/**
 * The page's credential.
 *
 * A link carries its token in the fragment (`#token=…`, never sent to any server) or the
 * query (`?token=…`). `pageToken()` takes it from there once, keeps it in `sessionStorage`
 * (this tab only, gone when the tab closes) and removes it from the address bar, so it does
 * not stay in the history, a bookmark or a screenshot. Later pages of the same tab read it
 * back from `sessionStorage`.
 *
 * A tab opened without a token (the hub's address typed in, a session opened in a new tab)
 * asks the other tabs of the same origin for theirs (`sharedToken()`): a `BroadcastChannel`,
 * which the browser delivers to pages of this origin only (and, with storage partitioning,
 * only under the same top-level site). Only top-level pages take part: an embed view inside
 * another site's page neither asks nor answers. The token is never written anywhere another
 * origin can read (no cookie, no `localStorage`, no `postMessage` to another window).
 *
 * The token reaches the hub as a `Sec-WebSocket-Protocol` entry (`acp-hub.token.<token>`,
 * next to the real subprotocol `acp`), which keeps it out of URLs and access logs.
 */

const KEY = 'acp-hub.token';
const CHANNEL = 'acp-hub.token';
/** How long a tab without a token waits for another tab's answer, in milliseconds. */
const ASK_MS = 400;

/** The subprotocol the web client speaks; the hub selects it, never the token entry. */
export const SUBPROTOCOL = 'acp';

/** @type {string | null | undefined} */
let cached;

/**
 * The token of this page (see the module docstring), or null when it has none.
 * @returns {string | null}
 */
export function pageToken() {
  if (cached !== undefined) return cached;
  const url = new URL(location.href);
  const fragment = new URLSearchParams(url.hash.slice(1));
  const fromUrl = fragment.get('token') || url.searchParams.get('token');
  if (fromUrl) {
    try {
      sessionStorage.setItem(KEY, fromUrl);
    } catch {
      // Storage refused (privacy mode): the token lives in this page only.
    }
    fragment.delete('token');
    url.searchParams.delete('token');
    const rest = fragment.toString();
    url.hash = rest ? `#${rest}` : '';
    history.replaceState(history.state, '', url.href);
    cached = fromUrl;
    return cached;
  }
  try {
    cached = sessionStorage.getItem(KEY);
  } catch {
    cached = null;
  }
  return cached;
}

/** Whether this page is a top-level page (not a frame inside another page). */
function topLevel() {
  try {
    return window.top === window;
  } catch {
    return false;
  }
}

/** @type {BroadcastChannel | null} */
let channel = null;

/**
 * This origin's token channel, answering other tabs' requests with this tab's token; null
 * in a frame or without BroadcastChannel.
 * @returns {BroadcastChannel | null}
 */
function tokenChannel() {
  if (channel || typeof BroadcastChannel === 'undefined' || !topLevel()) return channel;
  const opened = new BroadcastChannel(CHANNEL);
  opened.addEventListener('message', (event) => {
    if (event.data?.type === 'ask' && cached) opened.postMessage({ type: 'token', token: cached });
  });
  channel = opened;
  return channel;
}

/**
 * The page's token (`pageToken()`), else the token of another tab of this origin that has
 * one (kept in this tab's `sessionStorage` as if its link had carried it), else null after
 * `ASK_MS`. Either way this tab answers the other tabs' requests from now on.
 * @returns {Promise<string | null>}
 */
export async function sharedToken() {
  const own = pageToken();
  const open = tokenChannel();
  if (own || !open) return own;
  /** @type {string | null} */
  const answer = await new Promise((resolve) => {
    /** @param {MessageEvent} event */
    const listen = (event) => {
      const token = event.data?.type === 'token' ? event.data.token : null;
      if (typeof token !== 'string' || !token) return;
      clearTimeout(timer);
      open.removeEventListener('message', listen);
      resolve(token);
    };
    const timer = setTimeout(() => {
      open.removeEventListener('message', listen);
      resolve(null);
    }, ASK_MS);
    open.addEventListener('message', listen);
    open.postMessage({ type: 'ask' });
  });
  if (answer && !cached) {
    try {
      sessionStorage.setItem(KEY, answer);
    } catch {
      // Storage refused: the token lives in this page only.
    }
    cached = answer;
  }
  return cached ?? null;
}

/**
 * The WebSocket subprotocols that carry `token`.
 * @param {string | null} token
 * @returns {string[]}
 */
export function tokenProtocols(token) {
  return token ? [SUBPROTOCOL, `acp-hub.token.${token}`] : [SUBPROTOCOL];
}

/**
 * Why the hub refuses `token`, or null when it accepts it (or cannot be asked). Browsers
 * cannot read a refused WebSocket upgrade, so the page asks `/auth/whoami` instead.
 * @param {string | null} token
 * @returns {Promise<{error: string, message: string} | null>}
 */
export async function refusal(token) {
  try {
    const headers = token ? { Authorization: `Bearer ${token}` } : undefined;
    const response = await fetch('/auth/whoami', { headers, cache: 'no-store' });
    if (response.status !== 401 && response.status !== 403) return null;
    const body = await response.json();
    return {
      error: typeof body?.error === 'string' ? body.error : 'refused',
      message: typeof body?.message === 'string' ? body.message : 'access refused',
    };
  } catch {
    return null;
  }
}
