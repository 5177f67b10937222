// Small helpers shared by every view: DOM building, ids, formatting, time.

/**
 * @typedef {string | number | Node | null | undefined | false | ChildList} Child
 * @typedef {Array<Child>} ChildList
 * @typedef {Record<string, any>} Props
 */

/**
 * Builds an element. Props starting with `on` are listeners, `class` and `dataset`, `style` (an
 * object) and `aria-*`/other attributes are set as such; children may be strings, numbers, nodes,
 * arrays of them, or falsy (skipped). Text is always set as text, never parsed as HTML.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Props | null} [props]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') {
        el.addEventListener(k.slice(2).toLowerCase(), v);
      } else if (k === 'class') {
        el.className = String(v);
      } else if (k === 'dataset') {
        Object.assign(el.dataset, v);
      } else if (k === 'style') {
        Object.assign(el.style, v);
      } else if (k in el && !k.includes('-') && typeof v !== 'string') {
        /** @type {any} */ (el)[k] = v;
      } else {
        el.setAttribute(k, v === true ? '' : String(v));
      }
    }
  }
  append(el, children);
  return el;
}

/**
 * @param {Node} el
 * @param {Child[]} children
 */
export function append(el, children) {
  for (const c of children) {
    if (Array.isArray(c)) append(el, c);
    else if (c === null || c === undefined || c === false) continue;
    else el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
}

/** Removes every child of `el`. @param {Element} el */
export function clear(el) {
  el.replaceChildren();
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * A ULID: 48 bits of milliseconds and 80 random bits, in Crockford base 32 (26 characters).
 * @param {number} [now]
 */
export function ulid(now = Date.now()) {
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let rand = '';
  for (let i = 0; i < 16; i++) rand += CROCKFORD[bytes[i] % 32];
  return time + rand;
}

/**
 * A fresh protocol id: `thr_`, `run_`, `task_` or `msg_` and a ULID.
 * @param {'thr' | 'run' | 'task' | 'msg'} prefix
 */
export function newId(prefix) {
  return `${prefix}_${ulid()}`;
}

/** The last characters of an id's ULID, enough to tell ids apart on screen. @param {string} id */
export function shortId(id) {
  const at = id.indexOf('_');
  return at < 0 ? id : `${id.slice(0, at + 1)}…${id.slice(-6)}`;
}

/** `agent:ken` → `ken`. @param {string | undefined} ref */
export function nameOf(ref) {
  if (!ref) return '?';
  const at = ref.indexOf(':');
  return at < 0 ? ref : ref.slice(at + 1);
}

/** @param {string} text @param {number} max */
export function truncate(text, max) {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * The readable text of a payload, if it has one: `text`, `content`, `message`, `goal`, `summary`.
 * @param {Record<string, any>} payload
 * @returns {string | undefined}
 */
export function payloadText(payload) {
  for (const key of ['text', 'content', 'message', 'goal', 'summary', 'title', 'description']) {
    const v = payload?.[key];
    if (typeof v === 'string' && v.trim()) return v;
  }
  return undefined;
}

const UNITS = /** @type {const} */ ([
  ['y', 365 * 24 * 3600],
  ['mo', 30 * 24 * 3600],
  ['d', 24 * 3600],
  ['h', 3600],
  ['m', 60],
]);

/**
 * `5s ago`, `3m ago`, `2h ago`, `4d ago`.
 * @param {string} ts
 * @param {number} [now]
 */
export function relativeTime(ts, now = Date.now()) {
  const t = Date.parse(ts);
  if (Number.isNaN(t)) return ts;
  const secs = Math.round((now - t) / 1000);
  if (secs < 0) return 'just now';
  if (secs < 45) return `${Math.max(secs, 1)}s ago`;
  for (const [unit, size] of UNITS) {
    if (secs >= size) return `${Math.floor(secs / size)}${unit} ago`;
  }
  return `${secs}s ago`;
}

/** One formatter for every timestamp: making one per call is slow (each builds locale data). */
const LOCAL_TIME = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** The local time, as every view shows an absolute time (`Dec 2, 2025, 9:32:20 PM`). @param {string} ts */
export function localTime(ts) {
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? ts : LOCAL_TIME.format(d);
}

/** The absolute local time, for a tooltip. @param {string} ts */
export function absoluteTime(ts) {
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? ts : `${LOCAL_TIME.format(d)} (${ts})`;
}

/**
 * A `<time>` showing relative time with the absolute time on hover; `tickTimes` keeps it current.
 * @param {string} ts
 */
export function timeEl(ts) {
  return h('time', { datetime: ts, title: absoluteTime(ts), 'data-rel': '' }, relativeTime(ts));
}

/** Refreshes the text of every relative `<time>` on the page (only visible rows exist). */
export function tickTimes() {
  const now = Date.now();
  for (const el of document.querySelectorAll('time[data-rel]')) {
    const ts = el.getAttribute('datetime');
    if (ts) el.textContent = relativeTime(ts, now);
  }
}

/** @param {number} n */
export function formatNumber(n) {
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 0 : 1)}M`;
  if (n >= 1e4) return `${Math.round(n / 1e3)}k`;
  return n.toLocaleString();
}

/** Dollars: cents, or four places for a non-zero amount under a cent (LLM calls cost that). @param {number} usd */
export function formatUsd(usd) {
  if (usd > 0 && usd < 0.01) return `$${usd.toFixed(4)}`;
  return `$${usd < 10 ? usd.toFixed(2) : usd.toFixed(0)}`;
}

/**
 * `1,234 tokens · $0.0042 · 3 requests`: what a task or run spent (cost and requests when non-zero).
 * @param {import('./types.js').Spent} spent
 */
export function spentText(spent) {
  const parts = [`${formatNumber(spent.tokens)} token${spent.tokens === 1 ? '' : 's'}`];
  if (spent.cost_usd > 0) parts.push(formatUsd(spent.cost_usd));
  if (spent.requests > 0) parts.push(`${spent.requests} request${spent.requests === 1 ? '' : 's'}`);
  return parts.join(' · ');
}

/**
 * Runs `fn` at most once per animation frame, however often it is asked for.
 * @param {() => void} fn
 * @returns {() => void}
 */
export function perFrame(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      fn();
    });
  };
}

/** How often views redraw while events pour in: a burst is shown in steps, not every frame. */
const BUSY_FRAME_MS = 150;

/**
 * Like `perFrame`, but while `busy()` redraws at most every 150 ms, leaving the main thread to
 * ingestion and the browser (what is drawn is the same; it is drawn less often).
 * @param {() => void} fn
 * @param {() => boolean} busy
 * @returns {() => void}
 */
export function renderLoop(fn, busy) {
  let queued = false;
  let last = 0;
  const run = () => {
    queued = false;
    last = performance.now();
    fn();
  };
  return () => {
    if (queued) return;
    queued = true;
    const wait = busy() ? last + BUSY_FRAME_MS - performance.now() : 0;
    if (wait > 0) setTimeout(() => requestAnimationFrame(run), wait);
    else requestAnimationFrame(run);
  };
}

/**
 * @template {any[]} A
 * @param {(...args: A) => void} fn
 * @param {number} ms
 * @returns {(...args: A) => void}
 */
export function debounce(fn, ms) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/** Whether a URL is safe to link to (http or https only). @param {unknown} url */
export function safeUrl(url) {
  if (typeof url !== 'string') return undefined;
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : undefined;
  } catch {
    return undefined;
  }
}

/** A small persistent setting in localStorage, JSON-encoded. */
export const settings = {
  /**
   * @template T
   * @param {string} key
   * @param {T} fallback
   * @returns {T}
   */
  get(key, fallback) {
    try {
      const raw = localStorage.getItem(`clutch.${key}`);
      return raw === null ? fallback : JSON.parse(raw);
    } catch {
      return fallback;
    }
  },
  /** Sets a value and tells the page (`SETTING_EVENT` on `window`, `detail.key`) when it changed. @param {string} key @param {unknown} value */
  set(key, value) {
    const before = this.get(key, undefined);
    try {
      if (value === undefined || value === null) localStorage.removeItem(`clutch.${key}`);
      else localStorage.setItem(`clutch.${key}`, JSON.stringify(value));
    } catch {
      // Storage full or disabled: the setting lasts for this page only.
    }
    if (JSON.stringify(before) !== JSON.stringify(value)) window.dispatchEvent(new CustomEvent(SETTING_EVENT, { detail: { key } }));
  },
};

/** The event `settings.set` raises on `window` when a setting changes (the person's name: their turns show). */
export const SETTING_EVENT = 'clutch-setting';

/** Paths of the few icons (24×24, drawn with currentColor), so no glyph depends on the fonts installed. */
const ICONS = {
  start: 'M6 5h2v14H6zM20 5v14l-10-7z',
  back: 'M18 5v14l-10-7zM6 5h2v14H6z',
  play: 'M7 4v16l13-8z',
  pause: 'M6 4h4v16H6zM14 4h4v16h-4z',
  step: 'M6 5v14l10-7zM16 5h2v14h-2z',
  end: 'M4 5v14l10-7zM16 5h2v14h-2z',
};

/**
 * An inline SVG icon, hidden from assistive technology (its button carries the label).
 * @param {keyof typeof ICONS} name
 */
export function icon(name) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('width', '14');
  svg.setAttribute('height', '14');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('class', 'icon');
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('d', ICONS[name]);
  path.setAttribute('fill', 'currentColor');
  svg.appendChild(path);
  return svg;
}
