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
 * The token reaches the hub as a `Sec-WebSocket-Protocol` entry (`acp-hub.token.<token>`,
 * next to the real subprotocol `acp`), which keeps it out of URLs and access logs.
 */

const KEY = 'acp-hub.token';

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
