// A virtualised list of rows of varying height: only the rows in (and near) the viewport exist in the
// DOM, positioned over a spacer as tall as all rows, so a 100,000-event timeline scrolls like a short
// one. Heights start as estimates and are measured by a ResizeObserver as rows appear (never by
// reading layout, which would force it); the row under the reader stays put when heights above it
// change, and the list sticks to the bottom while the reader is there (chat-like).

/**
 * @template T
 * @typedef {object} ListOptions
 * @property {(row: T) => string} key       stable identity of a row (for re-rendering and measurement)
 * @property {(row: T) => number} estimate  a height guess for a row not yet measured
 * @property {(row: T) => HTMLElement} render
 * @property {(row: T, el: HTMLElement) => void} [activate]  Enter on a focused row
 */

const OVERSCAN_PX = 400;

/** @template T */
export class VirtualList {
  /**
   * @param {HTMLElement} viewport the scrolling element (its content is managed here)
   * @param {ListOptions<T>} options
   */
  constructor(viewport, options) {
    this.viewport = viewport;
    this.options = options;
    /** @type {T[]} */
    this.rows = [];
    /** @type {number[]} */
    this.heights = [];
    /** @type {number[]} offsets[i] is the top of row i; offsets[rows.length] the total height */
    this.offsets = [0];
    this.dirtyFrom = 0;
    /** @type {Map<string, number>} measured heights by key, kept across `setRows` */
    this.sizes = new Map();
    /** @type {Map<string, number>} */
    this.indexOf = new Map();
    /** @type {Map<string, HTMLElement>} mounted rows by key */
    this.mounted = new Map();
    /** @type {WeakMap<HTMLElement, number>} where each mounted row was last placed */
    this.placed = new WeakMap();
    this.stick = true;
    this.focusIndex = -1;
    this.queued = false;
    /** The scroll position and viewport height as last seen (read once, not on every render). */
    this.top = 0;
    this.height = viewport.clientHeight;
    /** The spacer height last written (what scroll positions refer to). */
    this.renderedTotal = 0;
    this.spacer = document.createElement('div');
    this.spacer.className = 'vlist-spacer';
    // Rows sit in a layer of fixed (zero) height, so a taller spacer does not re-lay them out.
    this.layer = document.createElement('div');
    this.layer.className = 'vlist-layer';
    this.spacer.appendChild(this.layer);
    viewport.replaceChildren(this.spacer);
    viewport.classList.add('vlist');
    viewport.setAttribute('role', 'list');
    viewport.tabIndex = 0;
    viewport.addEventListener('scroll', () => {
      this.top = viewport.scrollTop;
      this.stick = this.top + this.height >= this.renderedTotal - 4;
      this.schedule();
    });
    viewport.addEventListener('keydown', (e) => this.onKey(e));
    viewport.addEventListener('focusin', (e) => {
      const row = /** @type {HTMLElement} */ (e.target).closest?.('.vrow');
      if (row instanceof HTMLElement && row.dataset.index) this.setFocus(Number(row.dataset.index), false);
    });
    this.resizes = new ResizeObserver((entries) => this.measured(entries));
    this.resizes.observe(viewport);
  }

  /** Replaces every row. @param {T[]} rows @param {{bottom?: boolean}} [options] */
  setRows(rows, options = {}) {
    for (const el of this.mounted.values()) this.unmount(el);
    this.mounted.clear();
    this.rows = rows;
    this.indexOf = new Map();
    this.heights = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const key = this.options.key(rows[i]);
      this.indexOf.set(key, i);
      this.heights[i] = this.sizes.get(key) ?? this.options.estimate(rows[i]);
    }
    this.dirtyFrom = 0;
    this.focusIndex = Math.min(this.focusIndex, rows.length - 1);
    if (options.bottom) this.stick = true;
    this.renderNow();
  }

  /** Adds rows at the end. @param {T[]} rows */
  append(rows) {
    if (!rows.length) return;
    for (const row of rows) {
      const key = this.options.key(row);
      this.indexOf.set(key, this.rows.length);
      this.rows.push(row);
      this.heights.push(this.sizes.get(key) ?? this.options.estimate(row));
    }
    this.dirtyFrom = Math.min(this.dirtyFrom, this.rows.length - rows.length);
    this.schedule();
  }

  /** Re-renders the mounted rows with these keys (their content changed). @param {Iterable<string>} keys */
  refresh(keys) {
    for (const key of keys) {
      const el = this.mounted.get(key);
      const i = this.indexOf.get(key);
      if (!el || i === undefined) continue;
      const hadFocus = el.contains(document.activeElement);
      el.replaceChildren(this.options.render(this.rows[i]));
      if (hadFocus) el.focus({ preventScroll: true });
    }
  }

  /** Re-renders every mounted row. */
  refreshAll() {
    this.refresh([...this.mounted.keys()]);
  }

  schedule() {
    if (this.queued) return;
    this.queued = true;
    requestAnimationFrame(() => {
      this.queued = false;
      this.renderNow();
    });
  }

  total() {
    this.layout();
    return this.offsets[this.rows.length] || 0;
  }

  layout() {
    const n = this.rows.length;
    if (this.offsets.length !== n + 1) this.offsets.length = n + 1;
    if (this.dirtyFrom > n) return;
    let at = this.dirtyFrom === 0 ? 0 : this.offsets[this.dirtyFrom];
    for (let i = this.dirtyFrom; i < n; i++) {
      this.offsets[i] = at;
      at += this.heights[i];
    }
    this.offsets[n] = at;
    this.dirtyFrom = n + 1;
  }

  /** The index of the row at vertical position `y`. @param {number} y */
  rowAt(y) {
    this.layout();
    let lo = 0;
    let hi = this.rows.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.offsets[mid] <= y) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** Mounts the rows near the viewport, unmounts the others, and places them. Writes only. */
  renderNow() {
    this.layout();
    const n = this.rows.length;
    if (this.stick) this.toBottom();
    const top = this.top;
    const start = n ? this.rowAt(Math.max(0, top - OVERSCAN_PX)) : 0;
    const end = n ? this.rowAt(top + this.height + OVERSCAN_PX) : -1;
    /** @type {Set<string>} */
    const keep = new Set();
    for (let i = start; i <= end; i++) {
      const key = this.options.key(this.rows[i]);
      keep.add(key);
      let el = this.mounted.get(key);
      if (!el) {
        el = document.createElement('div');
        el.className = 'vrow';
        el.setAttribute('role', 'listitem');
        el.dataset.key = key;
        el.appendChild(this.options.render(this.rows[i]));
        this.layer.appendChild(el);
        this.mounted.set(key, el);
        this.resizes.observe(el);
      }
      // Write only what changed: every write invalidates style, and this runs on each scroll.
      if (el.dataset.index !== String(i)) el.dataset.index = String(i);
      const tab = i === this.focusIndex ? 0 : -1;
      if (el.tabIndex !== tab) el.tabIndex = tab;
    }
    for (const [key, el] of this.mounted) {
      if (keep.has(key) || el.contains(document.activeElement)) continue;
      this.unmount(el);
      this.mounted.delete(key);
    }
    this.place();
  }

  /** Writes each mounted row's position and the spacer height. */
  place() {
    this.layout();
    for (const el of this.mounted.values()) {
      const y = this.offsets[Number(el.dataset.index)];
      if (this.placed.get(el) !== y) {
        el.style.transform = `translateY(${y}px)`;
        this.placed.set(el, y);
      }
    }
    this.setTotal();
    if (this.stick) this.toBottom();
  }

  /**
   * Sizes from the ResizeObserver (after layout, before paint): record them, keep the row under the
   * reader in place, and mount more rows if the measured ones left a gap.
   * @param {ResizeObserverEntry[]} entries
   */
  measured(entries) {
    const anchor = this.rows.length ? this.rowAt(this.top) : 0;
    const anchorDelta = this.rows.length ? this.top - this.offsets[anchor] : 0;
    let changed = false;
    for (const entry of entries) {
      const el = /** @type {HTMLElement} */ (entry.target);
      if (el === this.viewport) {
        if (entry.contentRect.height !== this.height) {
          this.height = entry.contentRect.height;
          changed = true;
        }
        continue;
      }
      const size = entry.borderBoxSize?.[0]?.blockSize ?? entry.contentRect.height;
      if (!el.isConnected || !size) continue;
      const i = Number(el.dataset.index);
      if (this.heights[i] === size) continue;
      this.heights[i] = size;
      this.sizes.set(/** @type {string} */ (el.dataset.key), size);
      this.dirtyFrom = Math.min(this.dirtyFrom, i);
      changed = true;
    }
    if (!changed) return;
    this.place();
    if (!this.stick && anchor < this.rows.length) {
      const want = this.offsets[anchor] + anchorDelta;
      if (Math.abs(want - this.top) > 0.5) {
        this.viewport.scrollTop = want;
        this.top = want;
      }
    }
    this.schedule();
  }

  /** Writes the spacer height. */
  setTotal() {
    const total = this.offsets[this.rows.length] || 0;
    if (total !== this.renderedTotal) {
      this.spacer.style.height = `${total}px`;
      this.renderedTotal = total;
    }
  }

  toBottom() {
    this.setTotal();
    const max = Math.max(0, this.renderedTotal - this.height);
    if (this.top !== max) {
      this.viewport.scrollTop = max;
      this.top = max;
    }
  }

  /** @param {HTMLElement} el */
  unmount(el) {
    this.resizes.unobserve(el);
    el.remove();
  }

  /** Scrolls so row `i` is visible. @param {number} i @param {'nearest' | 'start' | 'end'} [align] */
  scrollToIndex(i, align = 'nearest') {
    if (i < 0 || i >= this.rows.length) return;
    this.layout();
    this.setTotal();
    const top = this.offsets[i];
    const bottom = top + this.heights[i];
    let want = this.top;
    if (align === 'start' || (align === 'nearest' && top < this.top)) want = top;
    else if (align === 'end' || (align === 'nearest' && bottom > this.top + this.height)) want = bottom - this.height;
    if (want !== this.top) {
      this.viewport.scrollTop = want;
      this.top = this.viewport.scrollTop;
    }
    this.stick = i === this.rows.length - 1;
    this.renderNow();
  }

  /** @param {number} i @param {boolean} [move] also scroll to it and focus it */
  setFocus(i, move = true) {
    if (!this.rows.length) return;
    i = Math.max(0, Math.min(this.rows.length - 1, i));
    this.focusIndex = i;
    if (!move) {
      for (const el of this.mounted.values()) {
        const tab = Number(el.dataset.index) === i ? 0 : -1;
        if (el.tabIndex !== tab) el.tabIndex = tab;
      }
      return;
    }
    this.scrollToIndex(i);
    const el = this.mounted.get(this.options.key(this.rows[i]));
    el?.focus({ preventScroll: true });
  }

  /** @param {KeyboardEvent} e */
  onKey(e) {
    const target = /** @type {HTMLElement} */ (e.target);
    if (target.matches('input, textarea, select')) return;
    const page = Math.max(1, Math.floor(this.height / 60));
    const at = this.focusIndex < 0 ? this.rowAt(this.top) - 1 : this.focusIndex;
    /** @type {Record<string, number>} */
    const moves = { ArrowDown: 1, j: 1, ArrowUp: -1, k: -1, PageDown: page, PageUp: -page };
    if (e.key in moves && !e.altKey && !e.ctrlKey && !e.metaKey) {
      e.preventDefault();
      this.setFocus(at + moves[e.key]);
    } else if (e.key === 'Home') {
      e.preventDefault();
      this.setFocus(0);
    } else if (e.key === 'End') {
      e.preventDefault();
      this.setFocus(this.rows.length - 1);
    } else if (e.key === 'Enter' && target.classList.contains('vrow') && this.options.activate) {
      e.preventDefault();
      this.options.activate(this.rows[Number(target.dataset.index)], target);
    }
  }
}
