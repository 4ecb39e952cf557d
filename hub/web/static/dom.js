// @ts-check
/**
 * The one DOM helper every module of the UI builds its elements with.
 *
 * Text only ever reaches the page through `textContent` (or Text nodes); class names derived
 * from data go through {@link token} first, so a value from an agent or a client can never
 * become markup or an unexpected selector.
 */

/**
 * A new element with an optional class and text.
 * @param {string} tag
 * @param {string} [className]
 * @param {string} [text] set with textContent
 * @returns {HTMLElement}
 */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * A `type="button"` button that calls `onClick`.
 * @param {string} text
 * @param {() => void} onClick
 * @param {string} [className]
 * @returns {HTMLButtonElement}
 */
export function button(text, onClick, className) {
  const node = /** @type {HTMLButtonElement} */ (el('button', className, text));
  node.type = 'button';
  node.addEventListener('click', onClick);
  return node;
}

/**
 * A wire value for people to read: `end_turn` -> `end turn`.
 * @param {unknown} value
 * @returns {string}
 */
export function labelize(value) {
  return String(value ?? '').replace(/_/g, ' ');
}

/**
 * A wire value reduced to letters and underscores, fit to be part of a class name.
 * @param {unknown} value
 * @returns {string}
 */
export function token(value) {
  return String(value ?? '').replace(/[^a-z_]/gi, '');
}

/**
 * A wire value reduced to what an element id may hold.
 * @param {unknown} value
 * @returns {string}
 */
export function idPart(value) {
  return String(value ?? '').replace(/[^A-Za-z0-9_-]/g, '_');
}

/**
 * The message of a failure, for people.
 * @param {unknown} error
 * @returns {string}
 */
export function errorText(error) {
  return error instanceof Error ? error.message : String(error);
}
