// Replay: a finished run's events fed in order into a store of their own, with play, pause, step,
// speed and a scrubber; the task tree and cards change as they did live. The pace follows the events'
// timestamps (a long pause is shortened to at most a second), multiplied by the chosen speed.

import { h, icon, localTime } from '../util.js';
import { Store } from '../store.js';
import { RunView } from './run.js';
import { href } from '../router.js';

/** @typedef {import('../types.js').ClutchEvent} ClutchEvent */

/** The longest wait between two events at 1×, in ms. */
const MAX_GAP_MS = 1000;
const SPEEDS = [0.5, 1, 2, 5, 10, 50, 200];

export class ReplayView {
  /**
   * @param {import('../api.js').Api} api
   * @param {string} runId
   * @param {string} taskId
   */
  constructor(api, runId, taskId) {
    this.api = api;
    this.runId = runId;
    this.store = new Store();
    /** @type {ClutchEvent[]} */
    this.events = [];
    /** @type {number[]} virtual time of each event, ms from the first */
    this.times = [];
    /** How many events have been played. */
    this.position = 0;
    this.clock = 0;
    this.speed = 10;
    this.playing = false;
    this.abort = new AbortController();
    this.frame = 0;

    const button = (/** @type {Parameters<typeof icon>[0]} */ glyph, /** @type {string} */ title, /** @type {() => void} */ fn, /** @type {string} */ key) =>
      h('button', { type: 'button', title: `${title} (${key})`, 'aria-label': title, 'aria-keyshortcuts': key, onclick: fn }, icon(glyph));
    this.playButton = button('play', 'play', () => this.toggle(), 'Space');
    this.scrub = h('input', { type: 'range', min: '0', max: '0', value: '0', step: '1', 'aria-label': 'position in the run' });
    this.scrub.addEventListener('input', () => this.seek(Number(this.scrub.value)));
    const speed = h('select', { 'aria-label': 'speed' }, SPEEDS.map((s) => h('option', { value: String(s), selected: s === this.speed }, `${s}×`)));
    speed.addEventListener('change', () => {
      this.speed = Number(speed.value);
    });
    this.positionText = h('span', { class: 'replay-pos', 'aria-live': 'off' });
    this.controls = h(
      'div',
      { class: 'replay-controls', role: 'toolbar', 'aria-label': 'replay' },
      button('start', 'to the start', () => this.seek(0), 'Home'),
      button('back', 'step back', () => this.seek(this.position - 1), 'ArrowLeft'),
      this.playButton,
      button('step', 'step', () => this.seek(this.position + 1), 'ArrowRight'),
      button('end', 'to the end', () => this.seek(this.events.length), 'End'),
      speed,
      this.scrub,
      this.positionText,
      h('a', { href: href.run(runId), class: 'small' }, 'live view'),
    );
    this.controls.addEventListener('keydown', (e) => {
      const target = /** @type {HTMLElement} */ (e.target);
      if (target === this.scrub || target.tagName === 'SELECT') return;
      if (e.key === ' ') this.toggle();
      else if (e.key === 'ArrowLeft') this.seek(this.position - 1);
      else if (e.key === 'ArrowRight') this.seek(this.position + 1);
      else if (e.key === 'Home') this.seek(0);
      else if (e.key === 'End') this.seek(this.events.length);
      else return;
      e.preventDefault();
    });
    this.run = new RunView({
      store: this.store,
      runId,
      taskId,
      taskHref: (task, run) => href.replay(run, task),
      runHref: (run) => href.replay(run),
      actions: this.controls,
    });
    this.el = h('div', { class: 'replay-view' }, this.run.el);
    this.el.dataset.state = 'loading';
    this.update();
    void this.load();
  }

  async load() {
    try {
      for await (const batch of this.api.replay(this.runId, this.abort.signal)) this.events.push(...batch);
    } catch (e) {
      if (this.abort.signal.aborted) return;
      this.positionText.textContent = `Cannot load the run: ${String(/** @type {Error} */ (e).message || e)}`;
      this.el.dataset.state = 'error';
      return;
    }
    let t = 0;
    for (let i = 0; i < this.events.length; i++) {
      if (i > 0) {
        const gap = Date.parse(this.events[i].ts) - Date.parse(this.events[i - 1].ts);
        t += Number.isFinite(gap) ? Math.max(0, Math.min(MAX_GAP_MS, gap)) : 0;
      }
      this.times.push(t);
    }
    this.scrub.max = String(this.events.length);
    this.el.dataset.state = 'ready';
    this.update();
  }

  /** Moves to having played exactly `n` events. @param {number} n */
  seek(n) {
    n = Math.max(0, Math.min(this.events.length, n));
    if (n < this.position) {
      this.store.reset(0);
      this.position = 0;
    }
    if (n > this.position) {
      this.store.addNow(this.events.slice(this.position, n));
      this.position = n;
    }
    this.clock = n > 0 ? this.times[n - 1] : 0;
    if (n >= this.events.length) this.pause();
    this.update();
  }

  toggle() {
    if (this.playing) this.pause();
    else this.play();
  }

  play() {
    if (!this.events.length) return;
    if (this.position >= this.events.length) this.seek(0);
    this.playing = true;
    let last = performance.now();
    /** @param {number} now */
    const tick = (now) => {
      if (!this.playing) return;
      this.clock += (now - last) * this.speed;
      last = now;
      let n = this.position;
      while (n < this.events.length && this.times[n] <= this.clock) n++;
      if (n > this.position) this.seek(n);
      // While nothing is due, skip the wait when it is longer than the gap cap allows.
      if (this.playing) this.frame = requestAnimationFrame(tick);
    };
    this.frame = requestAnimationFrame(tick);
    this.update();
  }

  pause() {
    this.playing = false;
    cancelAnimationFrame(this.frame);
    this.update();
  }

  update() {
    this.playButton.replaceChildren(icon(this.playing ? 'pause' : 'play'));
    this.playButton.setAttribute('aria-label', this.playing ? 'pause' : 'play');
    this.scrub.value = String(this.position);
    const total = this.events.length;
    const e = this.position > 0 ? this.events[this.position - 1] : null;
    this.positionText.textContent = this.el?.dataset.state === 'loading' ? 'loading…' : `${this.position} / ${total}${e ? ` · seq ${e.seq} · ${localTime(e.ts)}` : ''}`;
    if (this.el) this.el.dataset.position = String(this.position);
  }

  destroy() {
    this.pause();
    this.abort.abort();
    this.run.destroy();
  }
}
