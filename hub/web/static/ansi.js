// @ts-check
/**
 * Terminal output to sanitized DOM: ANSI SGR colours and styles become spans with classes
 * (`ansi-fg-N`, `ansi-bg-N` for the 16 base colours, `ansi-bold`, ...); 256-colour and
 * true-colour values are set through the CSSOM (allowed under a strict CSP). Every other
 * escape sequence (cursor movement, OSC titles and hyperlinks, ...) and every control
 * character except newline and tab is dropped. A carriage return that is not part of CRLF
 * rewinds the line (progress bars show their last state).
 */

// CSI ... final byte | OSC ... BEL/ST | other two-byte escapes.
// eslint-disable-next-line no-control-regex
const ESCAPE = /\x1b\[([0-?]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?/g;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/g;

/**
 * @typedef {{fg: number | string | null, bg: number | string | null, bold: boolean,
 *   dim: boolean, italic: boolean, underline: boolean, inverse: boolean, strike: boolean}} Style
 */

/** @returns {Style} */
function plain() {
  return { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, inverse: false, strike: false };
}

/**
 * The RGB value of a 256-colour palette index >= 16.
 * @param {number} n
 * @returns {string}
 */
function palette(n) {
  if (n >= 232) {
    const v = 8 + (n - 232) * 10;
    return `rgb(${v}, ${v}, ${v})`;
  }
  const i = n - 16;
  const steps = [0, 95, 135, 175, 215, 255];
  return `rgb(${steps[Math.floor(i / 36)]}, ${steps[Math.floor(i / 6) % 6]}, ${steps[i % 6]})`;
}

/**
 * Apply one SGR parameter list to a style.
 * @param {Style} style
 * @param {string} params
 */
function applySgr(style, params) {
  const codes = params === '' ? [0] : params.split(/[;:]/).map((p) => (p === '' ? 0 : Number(p)));
  for (let i = 0; i < codes.length; i++) {
    const code = codes[i];
    if (code === 0) Object.assign(style, plain());
    else if (code === 1) style.bold = true;
    else if (code === 2) style.dim = true;
    else if (code === 3) style.italic = true;
    else if (code === 4) style.underline = true;
    else if (code === 7) style.inverse = true;
    else if (code === 9) style.strike = true;
    else if (code === 22) style.bold = style.dim = false;
    else if (code === 23) style.italic = false;
    else if (code === 24) style.underline = false;
    else if (code === 27) style.inverse = false;
    else if (code === 29) style.strike = false;
    else if (code >= 30 && code <= 37) style.fg = code - 30;
    else if (code >= 90 && code <= 97) style.fg = code - 90 + 8;
    else if (code === 39) style.fg = null;
    else if (code >= 40 && code <= 47) style.bg = code - 40;
    else if (code >= 100 && code <= 107) style.bg = code - 100 + 8;
    else if (code === 49) style.bg = null;
    else if (code === 38 || code === 48) {
      let value = null;
      if (codes[i + 1] === 5 && Number.isInteger(codes[i + 2])) {
        const n = codes[i + 2];
        if (n >= 0 && n <= 255) value = n < 16 ? n : palette(n);
        i += 2;
      } else if (codes[i + 1] === 2) {
        const [r, g, b] = codes.slice(i + 2, i + 5).map((v) => Math.max(0, Math.min(255, v | 0)));
        value = `rgb(${r}, ${g}, ${b})`;
        i += 4;
      }
      if (code === 38) style.fg = value;
      else style.bg = value;
    }
  }
}

/**
 * @param {Style} a
 * @param {Style} b
 */
function sameStyle(a, b) {
  return (
    a.fg === b.fg && a.bg === b.bg && a.bold === b.bold && a.dim === b.dim && a.italic === b.italic &&
    a.underline === b.underline && a.inverse === b.inverse && a.strike === b.strike
  );
}

/**
 * @param {Style} style
 * @param {string} text
 * @returns {Node}
 */
function styled(style, text) {
  if (sameStyle(style, plain())) return document.createTextNode(text);
  const span = document.createElement('span');
  let fg = style.fg;
  let bg = style.bg;
  if (style.inverse) {
    [fg, bg] = [bg, fg];
    if (fg === null) span.classList.add('ansi-inverse-fg');
    if (bg === null) span.classList.add('ansi-inverse-bg');
  }
  if (typeof fg === 'number') span.classList.add(`ansi-fg-${fg}`);
  else if (typeof fg === 'string') span.style.color = fg;
  if (typeof bg === 'number') span.classList.add(`ansi-bg-${bg}`);
  else if (typeof bg === 'string') span.style.backgroundColor = bg;
  if (style.bold) span.classList.add('ansi-bold');
  if (style.dim) span.classList.add('ansi-dim');
  if (style.italic) span.classList.add('ansi-italic');
  if (style.underline) span.classList.add('ansi-underline');
  if (style.strike) span.classList.add('ansi-strike');
  span.textContent = text;
  return span;
}

/**
 * Render terminal text (already decoded from bytes) into nodes.
 * @param {string} text
 * @returns {DocumentFragment}
 */
export function renderAnsi(text) {
  const fragment = document.createDocumentFragment();
  let style = plain();
  // The line being written, one cell per character: a bare CR moves the cursor back to its
  // start and what follows overwrites it, as a terminal does (the rest of the line stays).
  /** @type {{style: Style, ch: string}[]} */
  let line = [];
  let cursor = 0;
  /** @type {{style: Style, text: string}[]} */
  const out = [];
  /** @param {Style} pieceStyle @param {string} pieceText */
  const push = (pieceStyle, pieceText) => {
    const previous = out[out.length - 1];
    if (previous && sameStyle(previous.style, pieceStyle)) previous.text += pieceText;
    else out.push({ style: { ...pieceStyle }, text: pieceText });
  };
  const emit = (/** @type {string} */ chunk) => {
    if (!chunk) return;
    const clean = chunk.replace(CONTROL, '');
    if (!clean) return;
    const snapshot = { ...style };
    for (const ch of clean) {
      const cell = { style: snapshot, ch };
      if (cursor < line.length) line[cursor] = cell;
      else line.push(cell);
      cursor++;
    }
  };
  const flush = () => {
    for (const cell of line) push(cell.style, cell.ch);
    line = [];
    cursor = 0;
  };
  const endLine = () => {
    flush();
    push(style, '\n');
  };
  const normalised = text.replace(/\r+\n/g, '\n');
  let last = 0;
  const handleText = (/** @type {string} */ segment) => {
    const parts = segment.split(/([\r\n])/);
    for (const part of parts) {
      if (part === '\n') endLine();
      else if (part === '\r') cursor = 0;
      else emit(part);
    }
  };
  ESCAPE.lastIndex = 0;
  for (let match = ESCAPE.exec(normalised); match; match = ESCAPE.exec(normalised)) {
    handleText(normalised.slice(last, match.index));
    if (match[2] === 'm' && match[0].startsWith('\x1b[')) applySgr(style, match[1]);
    last = match.index + match[0].length;
    if (match[0].length === 0) ESCAPE.lastIndex++;
  }
  handleText(normalised.slice(last));
  flush();
  for (const piece of out) fragment.append(styled(piece.style, piece.text));
  return fragment;
}
