// Custom elements used across views: <clutch-json> (a JSON value, highlighted, rendered only once it is
// on the page) and <clutch-bar> (a labelled bar for progress, load and budgets).

/** Longest JSON text shown in full; longer values are cut with a note. */
const MAX_JSON_CHARS = 200_000;

export class JsonView extends HTMLElement {
  constructor() {
    super();
    /** @type {unknown} */
    this._value = undefined;
    this.rendered = false;
  }

  /** @param {unknown} v */
  set value(v) {
    this._value = v;
    this.rendered = false;
    if (this.isConnected) this.render();
  }

  get value() {
    return this._value;
  }

  connectedCallback() {
    if (!this.rendered) this.render();
  }

  render() {
    this.rendered = true;
    let text = JSON.stringify(this._value, null, 2) ?? 'undefined';
    let cut = false;
    if (text.length > MAX_JSON_CHARS) {
      text = text.slice(0, MAX_JSON_CHARS);
      cut = true;
    }
    const pre = document.createElement('pre');
    pre.className = 'json';
    // Tokens: strings (keys when followed by a colon), numbers, literals; everything else as is.
    const re = /("(?:[^"\\]|\\.)*")(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|\b(true|false|null)\b/g;
    let last = 0;
    for (let m = re.exec(text); m; m = re.exec(text)) {
      if (m.index > last) pre.appendChild(document.createTextNode(text.slice(last, m.index)));
      const span = document.createElement('span');
      if (m[1]) {
        span.className = m[2] ? 'json-key' : 'json-string';
        span.textContent = m[1];
        pre.appendChild(span);
        if (m[2]) pre.appendChild(document.createTextNode(m[2]));
      } else {
        span.className = m[3] ? 'json-number' : 'json-literal';
        span.textContent = m[0];
        pre.appendChild(span);
      }
      last = m.index + m[0].length;
    }
    if (last < text.length) pre.appendChild(document.createTextNode(text.slice(last)));
    if (cut) pre.appendChild(document.createTextNode('\n… (cut: the value is longer than shown)'));
    this.replaceChildren(pre);
  }
}

export class Bar extends HTMLElement {
  static get observedAttributes() {
    return ['value', 'max', 'label'];
  }

  connectedCallback() {
    this.render();
  }

  attributeChangedCallback() {
    if (this.isConnected) this.render();
  }

  render() {
    const value = Number(this.getAttribute('value') || 0);
    const maxAttr = this.getAttribute('max');
    const max = maxAttr === null || maxAttr === '' ? null : Number(maxAttr);
    const label = this.getAttribute('label') || '';
    const ratio = max ? Math.min(1, value / max) : 0;
    const level = ratio >= 0.9 ? 'high' : ratio >= 0.7 ? 'mid' : 'low';
    this.setAttribute('role', 'meter');
    this.setAttribute('aria-valuenow', String(value));
    this.setAttribute('aria-valuemin', '0');
    if (max) this.setAttribute('aria-valuemax', String(max));
    this.setAttribute('aria-label', label);
    this.dataset.level = max && this.getAttribute('tone') !== 'plain' ? level : 'none';
    const fill = document.createElement('span');
    fill.className = 'bar-fill';
    fill.style.width = `${(max ? ratio : 0) * 100}%`;
    const track = document.createElement('span');
    track.className = 'bar-track';
    track.appendChild(fill);
    const text = document.createElement('span');
    text.className = 'bar-text';
    text.textContent = this.getAttribute('text') || '';
    this.replaceChildren(track, text);
  }
}

customElements.define('clutch-json', JsonView);
customElements.define('clutch-bar', Bar);

/**
 * A `<clutch-json>` showing `value`.
 * @param {unknown} value
 */
export function jsonEl(value) {
  const el = /** @type {JsonView} */ (document.createElement('clutch-json'));
  el.value = value;
  return el;
}

/**
 * A `<clutch-bar>`: `value` of `max` (no max: just the text).
 * @param {number} value
 * @param {number | null | undefined} max
 * @param {string} label accessible name
 * @param {string} text shown beside the bar
 * @param {'usage' | 'plain'} [tone] usage turns amber then red as it fills; plain stays one colour
 */
export function barEl(value, max, label, text, tone = 'usage') {
  const el = document.createElement('clutch-bar');
  el.setAttribute('tone', tone);
  el.setAttribute('value', String(value));
  if (max !== null && max !== undefined) el.setAttribute('max', String(max));
  el.setAttribute('label', label);
  el.setAttribute('text', text);
  return el;
}
