// @ts-check
/**
 * Who the page is, as the hub says: the identity badge in the header, the Share dialog for
 * owners, and the page shown instead of a session when the hub refuses the page's credential
 * ("not allowed", "link expired", "access revoked").
 *
 * Nothing here decides a permission: the badge shows the role `initialize` answered, the Share
 * button appears only when that role is `owner` and the page was not opened with a share link
 * (links do not manage links), and the hub checks every `_hub/share/*` call
 * again. DOM built with textContent only.
 */

import { el } from './dom.js';

/** @typedef {{error: string, message: string}} Refusal */

/** What each refusal is called on the page. */
const TITLES = /** @type {Record<string, string>} */ ({
  expired: 'This link has expired',
  revoked: 'Access was revoked',
  used_up: 'This link has been used up',
  missing: 'You need a link to open this page',
  origin: 'Not allowed from this page',
});

/**
 * Replace `root`'s content with the refusal page.
 * @param {HTMLElement} root
 * @param {Refusal} refusal
 */
export function renderRefusal(root, refusal) {
  const card = el('section', 'panel access-refused');
  card.setAttribute('role', 'alert');
  card.append(
    el('h1', 'access-title', TITLES[refusal.error] ?? 'Not allowed'),
    el('p', 'access-message', refusal.message),
  );
  if (onLoopback(location.hostname)) {
    // The hub runs on this machine: the person looking is most likely the one who started
    // it, locked out of their own hub (a typed address, a new browser).
    const hint = el('p', 'access-hint');
    hint.append(
      'If you started this hub: open the owner URL it printed (',
      el('code', '', 'acp-hub: owner URL: …'),
      '). It is also in the owner-url file its banner names, and ',
      el('code', '', 'acp-hub url'),
      ' prints it again. Otherwise, ask the person who runs it for a link.',
    );
    card.append(hint);
  } else {
    card.append(el('p', 'access-hint', 'Ask the person who shared this session for a new link.'));
  }
  root.dataset.access = refusal.error;
  root.replaceChildren(card);
}

/**
 * Whether `hostname` (as `location.hostname` gives it) is a loopback address: the page was
 * opened on the machine that runs the hub.
 * @param {string} hostname
 */
export function onLoopback(hostname) {
  return hostname === 'localhost' || hostname === '[::1]' || /^127(\.\d{1,3}){3}$/.test(hostname);
}

/**
 * The "who you are" badge: the principal's name and the role the hub granted.
 * @param {Record<string, any>} meta `initialize`'s `_meta["acp-hub"]`
 * @returns {HTMLElement}
 */
export function identityBadge(meta) {
  const who = String(meta.principalName ?? meta.principal ?? 'you');
  const role = String(meta.role ?? 'viewer');
  const badge = el('span', 'identity');
  badge.dataset.role = role;
  badge.title = `Signed in as ${String(meta.principal ?? who)}`;
  badge.append(el('span', 'identity-name', who));
  // The role beside the name, unless the name says it already ("owner").
  if (who !== role) badge.append(el('span', 'identity-role', role));
  return badge;
}

/** @param {number} seconds */
function until(seconds) {
  const date = new Date(seconds * 1000);
  return date.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'short' });
}

/**
 * The owner's Share dialog for one session: create a link (role, expiry, label), copy it,
 * list the session's links and revoke them.
 */
export class ShareDialog {
  /**
   * @param {{request: (method: string, params: unknown) => Promise<any>}} rpc
   * @param {string} sessionId
   */
  constructor(rpc, sessionId) {
    this.rpc = rpc;
    this.sessionId = sessionId;
    this.button = /** @type {HTMLButtonElement} */ (el('button', 'share-open', 'Share'));
    this.button.type = 'button';
    this.button.addEventListener('click', () => this.open());

    this.dialog = /** @type {HTMLDialogElement} */ (el('dialog', 'share-dialog'));
    this.dialog.setAttribute('aria-labelledby', 'share-title');
    const title = el('h2', 'share-title', 'Share this session');
    title.id = 'share-title';

    const form = /** @type {HTMLFormElement} */ (el('form', 'share-form'));
    this.role = select('share-role', [
      ['viewer', 'Viewer: watches'],
      ['approver', 'Approver: answers permission requests'],
      ['driver', 'Driver: prompts'],
    ]);
    this.expiry = select('share-expiry', [
      ['3600', '1 hour'],
      ['86400', '1 day'],
      ['604800', '7 days'],
    ]);
    this.label = /** @type {HTMLInputElement} */ (el('input', 'share-label'));
    this.label.maxLength = 80;
    this.label.placeholder = 'Label (who it is for)';
    const create = /** @type {HTMLButtonElement} */ (el('button', 'share-create', 'Create link'));
    create.type = 'submit';
    form.append(
      labelled('Role', this.role),
      labelled('Expires after', this.expiry),
      labelled('Label', this.label),
      create,
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.create();
    });

    this.result = el('div', 'share-result');
    this.result.hidden = true;
    this.url = /** @type {HTMLInputElement} */ (el('input', 'share-url'));
    this.url.readOnly = true;
    this.url.setAttribute('aria-label', 'The new link');
    const copy = /** @type {HTMLButtonElement} */ (el('button', 'share-copy', 'Copy'));
    copy.type = 'button';
    copy.addEventListener('click', () => this.copy());
    this.result.append(this.url, copy);
    // The new link's QR code, for a phone to scan, with what scanning it grants.
    this.scan = el('figure', 'share-qr');
    this.scan.hidden = true;
    this.qr = /** @type {HTMLImageElement} */ (el('img', 'share-qr-code'));
    this.qr.alt = 'QR code of the new link';
    this.qrWarning = el('figcaption', 'share-qr-warning');
    this.scan.append(this.qr, this.qrWarning);

    this.error = el('p', 'share-error');
    this.error.setAttribute('role', 'alert');
    this.list = el('ul', 'share-list');
    const close = /** @type {HTMLButtonElement} */ (el('button', 'share-close', 'Close'));
    close.type = 'button';
    close.addEventListener('click', () => this.dialog.close());
    this.dialog.append(title, form, this.result, this.scan, this.error, el('h3', '', 'Links'), this.list, close);
  }

  open() {
    if (!this.dialog.isConnected) document.body.append(this.dialog);
    this.dialog.showModal();
    this.refresh();
  }

  async create() {
    this.error.textContent = '';
    try {
      const link = await this.rpc.request('_hub/share/create', {
        sessionId: this.sessionId,
        role: this.role.value,
        expiresIn: Number(this.expiry.value),
        label: this.label.value.trim(),
      });
      this.url.value = String(link?.url ?? '');
      this.result.hidden = false;
      this.showCode(typeof link?.qrSvg === 'string' ? link.qrSvg : '', String(link?.role ?? ''));
      this.url.select();
      await this.refresh();
    } catch (error) {
      this.error.textContent = `Could not create the link: ${errorText(error)}`;
    }
  }

  /**
   * Show the hub's SVG as an image: a data: URL in an <img> runs no script, whatever it holds.
   * @param {string} svg
   * @param {string} role
   */
  showCode(svg, role) {
    this.scan.hidden = !svg.startsWith('<svg');
    if (this.scan.hidden) return;
    this.qr.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
    this.qrWarning.textContent = `Anyone who scans this code gets the link, and with it the ${role} role here, until it expires or you revoke it.`;
  }

  async copy() {
    try {
      await navigator.clipboard.writeText(this.url.value);
    } catch {
      this.url.select(); // the user copies by hand
    }
  }

  async refresh() {
    try {
      const answer = await this.rpc.request('_hub/share/list', { sessionId: this.sessionId });
      const links = Array.isArray(answer?.links) ? answer.links : [];
      this.list.replaceChildren(...links.map((/** @type {any} */ link) => this.item(link)));
      if (!links.length) this.list.append(el('li', 'empty', 'No links yet.'));
    } catch (error) {
      this.error.textContent = `Could not list the links: ${errorText(error)}`;
    }
  }

  /** @param {any} link */
  item(link) {
    const item = el('li', 'share-item');
    item.dataset.linkId = String(link?.linkId ?? '');
    const state = link?.revoked ? 'revoked' : Date.now() / 1000 >= Number(link?.expiresAt) ? 'expired' : 'active';
    item.dataset.state = state;
    const text = `${String(link?.label || 'link')} · ${String(link?.role)} · ${state === 'active' ? `until ${until(Number(link?.expiresAt))}` : state} · used ${Number(link?.uses ?? 0)}×`;
    item.append(el('span', 'share-item-text', text));
    if (state === 'active') {
      const revoke = /** @type {HTMLButtonElement} */ (el('button', 'share-revoke', 'Revoke'));
      revoke.type = 'button';
      revoke.setAttribute('aria-label', `Revoke ${String(link?.label || 'this link')}`);
      revoke.addEventListener('click', async () => {
        revoke.disabled = true;
        try {
          await this.rpc.request('_hub/share/revoke', { linkId: link.linkId });
        } catch (error) {
          this.error.textContent = `Could not revoke: ${errorText(error)}`;
        }
        await this.refresh();
      });
      item.append(revoke);
    }
    return item;
  }
}

/**
 * A select of `className` offering `options` (value and text pairs), the first one selected.
 * @param {string} className
 * @param {[string, string][]} options
 * @returns {HTMLSelectElement}
 */
function select(className, options) {
  const node = /** @type {HTMLSelectElement} */ (el('select', className));
  for (const [value, text] of options) {
    const option = /** @type {HTMLOptionElement} */ (el('option', '', text));
    option.value = value;
    node.append(option);
  }
  return node;
}

/**
 * @param {string} text
 * @param {HTMLElement} control
 */
function labelled(text, control) {
  const label = el('label', 'share-field');
  label.append(el('span', '', text), control);
  return label;
}

/** @param {unknown} error */
function errorText(error) {
  return error instanceof Error ? error.message : String(error);
}
