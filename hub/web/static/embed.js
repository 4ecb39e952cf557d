// @ts-check
/**
 * Entry point of the embed view `/embed/{sessionId}`: the session with minimal chrome, which
 * tells the page framing it how tall its content is (`{type: "acp-hub:height", height}` by
 * postMessage) so the `<acp-session>` widget can size its iframe. The message carries only
 * a number, so it is posted to any parent origin.
 */
import { mountSession } from './session-app.js';

const root = document.getElementById('app');
if (root) {
  mountSession(root, { embed: true });
  let last = -1;
  const report = () => {
    const height = Math.ceil(document.documentElement.scrollHeight);
    if (height === last || window.parent === window) return;
    last = height;
    window.parent.postMessage({ type: 'acp-hub:height', height }, '*');
  };
  new ResizeObserver(report).observe(document.body);
  root.addEventListener('rendered', report);
  report();
}
