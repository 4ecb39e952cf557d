// @ts-check
/**
 * The session page's Download menu: the session as a Markdown transcript or as JSON lines
 * (its event log), from `_hub/export` (docs/protocol.md). The export comes in pages; the menu
 * asks for each with the previous page's cursor, joins them and hands the browser a file.
 *
 * Anyone who may see the session may download it (the hub checks `_hub/export` again). Nothing
 * here renders what it downloads: the text goes into a Blob, never into the page.
 */

import { el } from './dom.js';

/** The formats offered, their labels and file extensions. */
const FORMATS = /** @type {const} */ ([
  ['md', 'Transcript (Markdown)', 'md', 'text/markdown'],
  ['jsonl', 'Event log (JSON lines)', 'jsonl', 'application/x-ndjson'],
]);

/** Pages one download may take at most (a bound on a misbehaving cursor loop). */
const MAX_PAGES = 10000;

export class DownloadMenu {
  /**
   * @param {{request: (method: string, params: unknown) => Promise<any>}} rpc
   * @param {string} sessionId
   */
  constructor(rpc, sessionId) {
    this.rpc = rpc;
    this.sessionId = sessionId;
    this.element = /** @type {HTMLDetailsElement} */ (el('details', 'download-menu'));
    this.element.append(el('summary', 'download-open', 'Download'));
    const list = el('div', 'download-list');
    for (const [format, label, ext, type] of FORMATS) {
      const item = /** @type {HTMLButtonElement} */ (el('button', 'download-item', label));
      item.type = 'button';
      item.dataset.format = format;
      item.addEventListener('click', () => this.download(format, ext, type, item));
      list.append(item);
    }
    this.status = el('span', 'download-status');
    this.status.setAttribute('role', 'status');
    this.element.append(list, this.status);
  }

  /**
   * @param {string} format
   * @param {string} ext
   * @param {string} type
   * @param {HTMLButtonElement} item
   */
  async download(format, ext, type, item) {
    item.disabled = true;
    this.status.textContent = 'Preparing…';
    try {
      /** @type {string[]} */
      const parts = [];
      /** @type {string | null} */
      let cursor = null;
      for (let page = 0; page < MAX_PAGES; page++) {
        /** @type {Record<string, unknown>} */
        const params = { sessionId: this.sessionId, format };
        if (cursor !== null) params.cursor = cursor;
        const answer = await this.rpc.request('_hub/export', params);
        parts.push(String(answer?.data ?? ''));
        cursor = typeof answer?.nextCursor === 'string' ? answer.nextCursor : null;
        if (cursor === null) break;
      }
      const url = URL.createObjectURL(new Blob(parts, { type: `${type};charset=utf-8` }));
      const link = /** @type {HTMLAnchorElement} */ (el('a'));
      link.href = url;
      link.download = `${this.sessionId}.${ext}`;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      this.status.textContent = '';
      this.element.open = false;
    } catch (error) {
      this.status.textContent = `Could not download: ${error instanceof Error ? error.message : String(error)}`;
    } finally {
      item.disabled = false;
    }
  }
}
