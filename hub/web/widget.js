// @ts-check
/**
 * The acp-hub widget: `<acp-session hub="https://hub.example" session="ID" token="...">`.
 *
 * Load it with `<script src="https://hub.example/widget.js" defer></script>`. The element
 * mounts an iframe of the hub's embed view (`/embed/{session}`), so the session's content,
 * the WebSocket and the token stay inside the hub's origin; the host page only learns the
 * content height, which the embed view posts (`{type: "acp-hub:height", height}`) and this
 * element applies to the iframe, up to the `max-height` attribute (pixels, default 640).
 *
 * Optional attributes: `role` (ask for a lower role, e.g. "viewer"), `name` (display name in
 * presence), `title` (accessible name of the frame). The hub only lets the embed view be
 * framed by the origins in its `embed_origins` setting.
 */
(() => {
  if (typeof customElements === 'undefined' || customElements.get('acp-session')) return;

  // Without a hub attribute the widget talks to the hub that served this script.
  const scriptOrigin = (() => {
    const current = /** @type {HTMLScriptElement | null} */ (document.currentScript);
    try {
      return current && current.src ? new URL(current.src).origin : location.origin;
    } catch {
      return location.origin;
    }
  })();

  class AcpSession extends HTMLElement {
    static get observedAttributes() {
      return ['hub', 'session', 'token', 'role', 'name', 'max-height', 'title'];
    }

    constructor() {
      super();
      const shadow = this.attachShadow({ mode: 'open' });
      this.frame = document.createElement('iframe');
      // Styles through the CSSOM: host pages with a strict CSP (no inline styles) allow it.
      Object.assign(this.frame.style, {
        display: 'block',
        width: '100%',
        height: '240px',
        border: '0',
        borderRadius: '8px',
        background: 'transparent',
      });
      this.frame.setAttribute('loading', 'lazy');
      this.frame.setAttribute('referrerpolicy', 'no-referrer');
      this.frame.setAttribute('allow', 'clipboard-write');
      shadow.append(this.frame);
      /** @type {string} */
      this.hubOrigin = '';
      this.onMessage = this.onMessage.bind(this);
    }

    connectedCallback() {
      if (!this.style.display) this.style.display = 'block';
      window.addEventListener('message', this.onMessage);
      this.update();
    }

    disconnectedCallback() {
      window.removeEventListener('message', this.onMessage);
    }

    attributeChangedCallback() {
      if (this.isConnected) this.update();
    }

    update() {
      const session = this.getAttribute('session');
      if (!session) return;
      let hub;
      try {
        hub = new URL(this.getAttribute('hub') || scriptOrigin);
      } catch {
        console.warn('acp-session: the hub attribute is not a URL');
        return;
      }
      if (hub.protocol !== 'https:' && hub.protocol !== 'http:') return;
      const url = new URL(`/embed/${encodeURIComponent(session)}`, hub.origin);
      for (const key of ['token', 'role', 'name']) {
        const value = this.getAttribute(key);
        if (value) url.searchParams.set(key, value);
      }
      this.hubOrigin = hub.origin;
      this.frame.title = this.getAttribute('title') || `Agent session ${session}`;
      if (this.frame.src !== url.href) this.frame.src = url.href;
    }

    /** @param {MessageEvent} event */
    onMessage(event) {
      if (event.source !== this.frame.contentWindow || event.origin !== this.hubOrigin) return;
      const data = event.data;
      if (!data || data.type !== 'acp-hub:height' || typeof data.height !== 'number') return;
      const max = Number(this.getAttribute('max-height')) || 640;
      const height = Math.max(120, Math.min(max, Math.ceil(data.height)));
      this.frame.style.height = `${height}px`;
      this.dispatchEvent(
        new CustomEvent('acp-session:resize', { detail: { height }, bubbles: true, composed: true }),
      );
    }
  }

  customElements.define('acp-session', AcpSession);
})();
