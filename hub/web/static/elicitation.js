// @ts-check
/**
 * A form for an ACP v2 `elicitation/create` in form mode, built from its `requestedSchema`
 * (https://agentclientprotocol.com/protocol/v2/elicitation): a flat object whose properties
 * are strings (with `minLength`, `maxLength`, `pattern`, `format` email/uri/date/date-time, or
 * a single choice by `enum` or titled `oneOf`), numbers and integers (`minimum`, `maximum`),
 * booleans, and arrays of strings chosen from `items.enum` or titled `items.anyOf`
 * (`minItems`, `maxItems`).
 *
 * The page validates before anything is sent: {@link ElicitationForm#read} returns either the
 * `content` object (only the fields that have a value, each of the schema's type) or the
 * errors, which the form shows next to their fields (`aria-invalid`, `aria-describedby`) and
 * moves focus to the first. A property of a type this page does not know is shown as such; if
 * it is required the form cannot be accepted (decline and cancel still work).
 */

import { el, idPart } from './dom.js';

/** @typedef {string | number | boolean | string[]} FieldValue */

/**
 * @typedef {{
 *   name: string,
 *   row: HTMLElement,
 *   focusable: HTMLElement,
 *   error: HTMLElement,
 *   read: () => {value?: FieldValue, error?: string},
 * }} Field
 */

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/**
 * @param {unknown} value
 * @returns {value is number}
 */
function isNumber(value) {
  return typeof value === 'number' && Number.isFinite(value);
}

/**
 * The choices of a titled list (`{const, title}` entries) when it has any, else of a plain
 * `enum`, else null.
 * @param {any} titled
 * @param {any} plain
 * @returns {{value: string, title: string}[] | null}
 */
function choicesOf(titled, plain) {
  if (Array.isArray(titled) && titled.length) {
    return titled.map((/** @type {any} */ o) => ({ value: String(o?.const ?? ''), title: String(o?.title ?? o?.const ?? '') }));
  }
  if (Array.isArray(plain) && plain.length) {
    return plain.map((/** @type {any} */ v) => ({ value: String(v), title: String(v) }));
  }
  return null;
}

/**
 * The choices of a single-select string (`oneOf` titled, or `enum`), or null.
 * @param {any} schema
 * @returns {{value: string, title: string}[] | null}
 */
function stringChoices(schema) {
  return choicesOf(schema?.oneOf, schema?.enum);
}

/**
 * The choices of a multi-select (`items.anyOf` titled, or `items.enum`), or null.
 * @param {any} schema
 * @returns {{value: string, title: string}[] | null}
 */
function arrayChoices(schema) {
  return choicesOf(schema?.items?.anyOf, schema?.items?.enum);
}

/**
 * A date-time input's local value (`YYYY-MM-DDTHH:MM`) as RFC 3339 in UTC, or null.
 * @param {string} value
 * @returns {string | null}
 */
function dateTime(value) {
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}

/** The longest agent-supplied `pattern` this page checks (characters). */
const PATTERN_MAX = 200;

/**
 * Whether an agent's `pattern` is safe to run here: short, without back-references, and
 * without a quantified group that holds a quantifier (the shape of catastrophic
 * backtracking: `(a+)+`, `(a|aa)*`).
 * @param {string} pattern
 * @returns {boolean}
 */
export function safePattern(pattern) {
  if (pattern.length > PATTERN_MAX) return false;
  if (/\\[1-9]|\\k</.test(pattern)) return false;
  // A group containing a quantifier or an alternation, itself quantified.
  return !/\((?:[^()\\]|\\.)*(?:[+*?}|])(?:[^()\\]|\\.)*\)\s*[+*?{]/.test(pattern);
}

export class ElicitationForm {
  /**
   * @param {any} schema the `requestedSchema`
   * @param {string} prefix unique id prefix for this form's fields
   */
  constructor(schema, prefix) {
    this.prefix = prefix;
    /** @type {Field[]} */
    this.fields = [];
    /** @type {string[]} required properties this page cannot fill */
    this.unsupported = [];
    this.element = el('div', 'elicitation-fields');
    const required = new Set(Array.isArray(schema?.required) ? schema.required.map(String) : []);
    const properties = schema?.properties && typeof schema.properties === 'object' ? schema.properties : {};
    for (const [name, property] of Object.entries(properties)) {
      const field = this.field(name, property, required.has(name));
      if (field) {
        this.fields.push(field);
        this.element.append(field.row);
      }
    }
  }

  /**
   * @param {string} name
   * @param {any} schema
   * @param {boolean} required
   * @returns {Field | null}
   */
  field(name, schema, required) {
    // By position, not by name: `a b` and `a_b` are two fields, never one id.
    const id = `${this.prefix}-f${this.fields.length}-${idPart(name)}`;
    const title = String(schema?.title || name);
    const row = el('div', 'form-row elicitation-field');
    row.dataset.field = name;
    const error = el('p', 'field-error');
    error.id = `${id}-error`;
    const describe = [error.id];
    const label = /** @type {HTMLLabelElement} */ (el('label', '', title));
    if (required) label.append(el('span', 'required', ' (required)'));
    /** @type {HTMLElement | null} */
    let hint = null;
    if (typeof schema?.description === 'string' && schema.description) {
      hint = el('p', 'field-hint', schema.description);
      hint.id = `${id}-hint`;
      describe.unshift(hint.id);
    }
    const type = schema?.type;
    /** @type {Field['read']} */
    let read;
    /** @type {HTMLElement} */
    let focusable;

    if (type === 'boolean') {
      const box = /** @type {HTMLInputElement} */ (el('input'));
      box.type = 'checkbox';
      box.id = id;
      box.checked = schema?.default === true;
      label.htmlFor = id;
      row.classList.add('field-boolean');
      row.append(box, label);
      focusable = box;
      read = () => ({ value: box.checked });
    } else if (type === 'array') {
      const choices = arrayChoices(schema);
      if (!choices) return this.unknown(name, title, required, 'a list without choices');
      const group = /** @type {HTMLFieldSetElement} */ (el('fieldset', 'field-choices'));
      group.id = id;
      const legend = el('legend', '', title);
      if (required) legend.append(el('span', 'required', ' (required)'));
      group.append(legend);
      const defaults = new Set(Array.isArray(schema?.default) ? schema.default.map(String) : []);
      /** @type {HTMLInputElement[]} */
      const boxes = [];
      choices.forEach((choice, index) => {
        const box = /** @type {HTMLInputElement} */ (el('input'));
        box.type = 'checkbox';
        box.id = `${id}-${index}`;
        box.value = choice.value;
        box.checked = defaults.has(choice.value);
        const option = /** @type {HTMLLabelElement} */ (el('label', 'choice', choice.title));
        option.htmlFor = box.id;
        const line = el('div', 'choice-row');
        line.append(box, option);
        group.append(line);
        boxes.push(box);
      });
      group.setAttribute('aria-describedby', describe.join(' '));
      row.append(group);
      focusable = boxes[0];
      read = () => {
        const chosen = boxes.filter((b) => b.checked).map((b) => b.value);
        if (!chosen.length) return required ? { error: 'Choose at least one.' } : {};
        if (isNumber(schema?.minItems) && chosen.length < schema.minItems) return { error: `Choose at least ${schema.minItems}.` };
        if (isNumber(schema?.maxItems) && chosen.length > schema.maxItems) return { error: `Choose at most ${schema.maxItems}.` };
        return { value: chosen };
      };
      if (hint) row.append(hint);
      row.append(error);
      return { name, row, focusable, error, read: this.marking(read, focusable, group) };
    } else if (type === 'string' && stringChoices(schema)) {
      const choices = /** @type {{value: string, title: string}[]} */ (stringChoices(schema));
      const select = /** @type {HTMLSelectElement} */ (el('select'));
      select.id = id;
      const empty = /** @type {HTMLOptionElement} */ (el('option', '', required ? 'Choose…' : '(none)'));
      empty.value = '';
      select.append(empty);
      for (const choice of choices) {
        const option = /** @type {HTMLOptionElement} */ (el('option', '', choice.title));
        option.value = choice.value;
        option.selected = choice.value === schema?.default;
        select.append(option);
      }
      label.htmlFor = id;
      row.append(label, select);
      focusable = select;
      read = () => {
        if (!select.value) return required ? { error: 'Choose one.' } : {};
        return { value: select.value };
      };
    } else if (type === 'string' || type === 'number' || type === 'integer') {
      const input = /** @type {HTMLInputElement} */ (el('input'));
      input.id = id;
      input.autocomplete = 'off';
      const format = type === 'string' ? schema?.format : null;
      if (type !== 'string') {
        input.type = 'text';
        input.inputMode = type === 'integer' ? 'numeric' : 'decimal';
      } else if (format === 'email') input.type = 'email';
      else if (format === 'uri') input.type = 'url';
      else if (format === 'date') input.type = 'date';
      else if (format === 'date-time') input.type = 'datetime-local';
      else input.type = 'text';
      if (schema?.default !== undefined && schema?.default !== null && format !== 'date-time') input.value = String(schema.default);
      label.htmlFor = id;
      row.append(label, input);
      focusable = input;
      read = () => {
        const raw = input.value.trim();
        if (!raw) return required ? { error: 'This field is required.' } : {};
        if (type === 'string') {
          const text = input.value;
          if (isNumber(schema?.minLength) && [...text].length < schema.minLength) return { error: `At least ${schema.minLength} characters.` };
          if (isNumber(schema?.maxLength) && [...text].length > schema.maxLength) return { error: `At most ${schema.maxLength} characters.` };
          if (typeof schema?.pattern === 'string') {
            let pattern = null;
            try {
              // An agent's pattern could take this page minutes (`^(a+)+$`): one that is
              // long or nests a quantifier is left to the agent, which checks it anyway.
              if (safePattern(schema.pattern)) pattern = new RegExp(schema.pattern, 'u');
            } catch {
              // An agent's broken pattern cannot be checked here; the agent checks it.
            }
            if (pattern && !pattern.test(text)) return { error: 'This value does not have the expected form.' };
          }
          if (format === 'email' && !EMAIL.test(raw)) return { error: 'Enter an email address.' };
          if (format === 'uri') {
            try {
              new URL(raw);
            } catch {
              return { error: 'Enter a full address (https://…).' };
            }
          }
          if (format === 'date' && !DATE.test(raw)) return { error: 'Enter a date.' };
          if (format === 'date-time') {
            const value = dateTime(raw);
            return value ? { value } : { error: 'Enter a date and time.' };
          }
          return { value: text };
        }
        const number = Number(raw);
        if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(raw) || !Number.isFinite(number)) return { error: 'Enter a number.' };
        if (type === 'integer' && !Number.isInteger(number)) return { error: 'Enter a whole number.' };
        if (isNumber(schema?.minimum) && number < schema.minimum) return { error: `At least ${schema.minimum}.` };
        if (isNumber(schema?.maximum) && number > schema.maximum) return { error: `At most ${schema.maximum}.` };
        return { value: number };
      };
    } else {
      return this.unknown(name, title, required, `a value of type ${String(type)}`);
    }
    focusable.setAttribute('aria-describedby', describe.join(' '));
    if (required) focusable.setAttribute('aria-required', 'true');
    if (hint) row.append(hint);
    row.append(error);
    return { name, row, focusable, error, read: this.marking(read, focusable, focusable) };
  }

  /**
   * A property this page cannot fill: said in words; a required one blocks accepting.
   * @param {string} name
   * @param {string} title
   * @param {boolean} required
   * @param {string} what
   * @returns {null}
   */
  unknown(name, title, required, what) {
    const note = el('p', 'field-unsupported', `${title}: this page cannot fill ${what}${required ? ' (required: decline or cancel instead)' : ''}.`);
    this.element.append(note);
    if (required) this.unsupported.push(name);
    return null;
  }

  /**
   * Wrap a reader so that it marks its field invalid or valid.
   * @param {Field['read']} read
   * @param {HTMLElement} focusable
   * @param {HTMLElement} marked
   * @returns {Field['read']}
   */
  marking(read, focusable, marked) {
    return () => {
      const result = read();
      if (result.error) marked.setAttribute('aria-invalid', 'true');
      else marked.removeAttribute('aria-invalid');
      return result;
    };
  }

  /**
   * Validate every field; show the errors, or return the content to send.
   * @returns {{content: Record<string, FieldValue>} | {errors: number}}
   */
  read() {
    /** @type {Record<string, FieldValue>} */
    const content = {};
    /** @type {Field | null} */
    let first = null;
    let errors = 0;
    for (const field of this.fields) {
      const result = field.read();
      field.error.textContent = result.error ?? '';
      if (result.error) {
        errors += 1;
        first ??= field;
      } else if (result.value !== undefined) {
        content[field.name] = result.value;
      }
    }
    if (this.unsupported.length) errors += this.unsupported.length;
    if (first) first.focusable.focus();
    return errors ? { errors } : { content };
  }

  /** @returns {HTMLElement | null} the first field to focus */
  firstField() {
    return this.fields[0]?.focusable ?? null;
  }
}
