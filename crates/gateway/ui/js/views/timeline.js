// A timeline: the events of one scope (everything, a thread, a run, a task, or one sender), filtered,
// in a virtualised list. Task lifecycle events fold into one card per task, and a tool call's events
// (its approval, start, answer) into one card per call, each updated in place; with a filter set, or
// "every event" ticked, each event gets its own row.

import { h, renderLoop, debounce } from '../util.js';
import { VirtualList } from '../components/virtual-list.js';
import { renderCallCard, renderEvent, renderTaskCard } from '../render/events.js';
import { LIFECYCLE, TYPES, callOf, isTaskEvent, matches, isEmptyFilter } from '../store.js';

/** @typedef {import('../types.js').ClutchEvent} ClutchEvent */
/** @typedef {import('../types.js').Filter} Filter */
/** @typedef {import('../types.js').Change} Change */
/** @typedef {{key: string, e: ClutchEvent, task?: string, call?: string}} Row */
/** @typedef {'all' | 'thread' | 'run' | 'task' | 'agent'} ScopeKind */

/**
 * @typedef {object} TimelineOptions
 * @property {import('../store.js').Store} store
 * @property {ScopeKind} kind
 * @property {string} [id]
 * @property {Filter} [filter]
 * @property {boolean} [fold]       fold task lifecycles into cards (default true)
 * @property {boolean} [filterBar]  show the filter bar (default true)
 * @property {import('../render/events.js').RenderContext['taskHref']} taskHref
 * @property {(filter: Filter) => void} [onFilter]  the filter changed (to keep the address in step)
 * @property {string} [empty]  what to say when there is nothing to show
 * @property {number} [at]  the seq of an event to scroll to and mark once it is held (a search result)
 */

/** Row height guesses by kind, refined by measurement. */
const ESTIMATES = { card: 150, call: 110, chat: 64, compact: 44, routing: 130, other: 60 };

export class Timeline {
  /** @param {TimelineOptions} options */
  constructor(options) {
    this.options = options;
    this.store = options.store;
    /** @type {Filter} */
    this.filter = { ...(options.filter || {}) };
    this.everyEvent = options.fold === false;
    /** @type {Map<string, string>} task id → the key of its card row */
    this.cards = new Map();
    /** @type {Map<string, string>} tool call id → the key of its card row */
    this.callCards = new Map();
    /** @type {Change[]} */
    this.pending = [];
    this.ctx = { store: this.store, taskHref: options.taskHref };
    /** The seq of the event to scroll to once it is held and shown; 0 when none (or done). */
    this.at = options.at || 0;
    /** The key of the row marked as the one asked for. */
    this.target = '';
    this.viewport = h('div', { class: 'timeline-rows', 'aria-label': 'events' });
    this.emptyNote = h('p', { class: 'empty', hidden: true }, options.empty || 'No events yet.');
    this.countEl = h('span', { class: 'muted count', 'aria-live': 'polite' });
    this.el = h(
      'section',
      { class: 'timeline' },
      options.filterBar === false ? null : this.filterBar(),
      h('div', { class: 'timeline-body' }, this.viewport, this.emptyNote),
    );
    /** @type {VirtualList<Row>} */
    this.list = new VirtualList(this.viewport, {
      key: (row) => row.key,
      estimate: (row) => this.estimate(row),
      render: (row) => this.renderRow(row),
      activate: (_row, el) => {
        const primary = el.querySelector('[data-primary]');
        if (primary instanceof HTMLElement) primary.click();
        else el.querySelector('details')?.toggleAttribute('open');
      },
    });
    this.flush = renderLoop(() => this.applyPending(), () => this.store.busy());
    this.unsubscribe = this.store.subscribe((change) => {
      this.pending.push(change);
      this.flush();
    });
    this.rebuild(true);
  }

  destroy() {
    this.unsubscribe();
    this.list.resizes.disconnect();
  }

  /** Whether the cards fold the lifecycle (no filter, not "every event", not a task's own view). */
  folding() {
    return !this.everyEvent && isEmptyFilter(this.filter);
  }

  /** @param {ClutchEvent} e */
  inScope(e) {
    const { kind, id } = this.options;
    switch (kind) {
      case 'thread':
        return e.thread_id === id;
      case 'run':
        return e.run_id === id;
      case 'task':
        return e.task_id === id;
      case 'agent':
        return e.from.agent_id === id;
      default:
        return true;
    }
  }

  /**
   * The row for an event, or null when it folds into a card already shown.
   * @param {ClutchEvent} e
   * @returns {Row | null}
   */
  rowFor(e) {
    if (!matches(e, this.filter)) return null;
    if (this.folding() && isTaskEvent(e)) {
      if (this.cards.has(e.task_id)) return e.type === 'routing.decision' || e.type === 'routing.failure' ? { key: `e:${e.seq}`, e } : null;
      if (LIFECYCLE.has(e.type) && this.store.tasks.has(e.task_id)) {
        const key = `t:${e.task_id}`;
        this.cards.set(e.task_id, key);
        return { key, e, task: e.task_id };
      }
    }
    const call = this.folding() ? callOf(e) : '';
    if (call) {
      if (e.type === 'tool.call') {
        const key = `c:${call}`;
        this.callCards.set(call, key);
        return { key, e, call };
      }
      // Shown in its call's card; an answer whose call is not held (older than the stream) stands alone.
      if (this.callCards.has(call)) return null;
    }
    return { key: `e:${e.seq}`, e };
  }

  /** @param {boolean} [bottom] */
  rebuild(bottom = false) {
    this.cards.clear();
    this.callCards.clear();
    /** @type {Row[]} */
    const rows = [];
    for (const e of this.store.eventsOf(this.options.kind, this.options.id)) {
      const row = this.rowFor(e);
      if (row) rows.push(row);
    }
    this.list.setRows(rows, { bottom });
    this.updateCount();
    this.reveal();
  }

  /** Scrolls to the event at `seq` and marks its row (its card's, when it folds into one). @param {number} seq */
  goTo(seq) {
    this.at = seq;
    this.reveal();
  }

  /** Scrolls to the row of the event asked for, once it is held and shown (history may bring it later). */
  reveal() {
    if (!this.at) return;
    const e = this.store.bySeq.get(this.at);
    if (!e) return;
    const call = callOf(e);
    const key = [`e:${e.seq}`, `t:${e.task_id}`, call && `c:${call}`].find((k) => k && this.list.indexOf.has(k));
    if (!key) return;
    const before = this.target;
    this.target = key;
    this.at = 0;
    this.list.refresh([before, key].filter(Boolean));
    this.list.scrollToIndex(/** @type {number} */ (this.list.indexOf.get(key)), 'start');
  }

  applyPending() {
    const changes = this.pending;
    this.pending = [];
    if (changes.some((c) => c.reset || (c.history && c.events.some((e) => this.inScope(e))))) {
      this.rebuild(this.list.stick);
      return;
    }
    /** @type {Row[]} */
    const rows = [];
    /** @type {Set<string>} */
    const cards = new Set();
    for (const change of changes) {
      for (const e of change.events) {
        if (!this.inScope(e)) continue;
        const row = this.rowFor(e);
        if (row) rows.push(row);
      }
      for (const id of change.tasks) {
        const key = this.cards.get(id);
        if (key) cards.add(key);
      }
      for (const id of change.calls) {
        const key = this.callCards.get(id);
        if (key) cards.add(key);
      }
    }
    this.list.append(rows);
    if (cards.size) this.list.refresh(cards);
    if (rows.length) this.updateCount();
    if (rows.length) this.reveal();
    if (this.agentList && this.store.bySender.size !== this.agentsKnown) this.fillAgents();
  }

  updateCount() {
    const n = this.list.rows.length;
    this.emptyNote.hidden = n > 0;
    this.countEl.textContent = `${n.toLocaleString()} row${n === 1 ? '' : 's'}`;
  }

  /** @param {Row} row */
  estimate(row) {
    if (row.task) return ESTIMATES.card;
    if (row.call) return ESTIMATES.call;
    const t = row.e.type;
    if (t === 'chat.message') return ESTIMATES.chat;
    if (t.startsWith('routing.')) return ESTIMATES.routing;
    if (t.startsWith('tool.') || t.startsWith('agent.') || t === 'task.progress') return ESTIMATES.compact;
    return ESTIMATES.other;
  }

  /** @param {Row} row */
  renderRow(row) {
    const el = this.renderContent(row);
    if (row.key === this.target) el.classList.add('is-target');
    return el;
  }

  /** @param {Row} row */
  renderContent(row) {
    if (row.task) {
      const t = this.store.tasks.get(row.task);
      if (t) return renderTaskCard(t, this.ctx);
    }
    if (row.call) {
      const c = this.store.calls.get(row.call);
      if (c?.call) return renderCallCard(c, this.ctx);
    }
    return renderEvent(row.e, this.ctx);
  }

  filterBar() {
    const typeSelect = h(
      'select',
      { 'aria-label': 'type', name: 'type' },
      h('option', { value: '' }, 'all types'),
      ['task.*', 'chat.*', 'tool.*', 'agent.*', 'routing.*', ...TYPES].map((t) => h('option', { value: t }, t)),
    );
    typeSelect.value = this.filter.type || '';
    this.agentList = h('datalist', { id: `agents-${Math.random().toString(36).slice(2)}` });
    this.agentsKnown = 0;
    const agentInput = h('input', { type: 'search', name: 'agent', placeholder: 'agent or user', 'aria-label': 'agent', list: this.agentList.id, value: this.filter.agent || '' });
    const taskInput = h('input', { type: 'search', name: 'task', placeholder: 'task id', 'aria-label': 'task', value: this.filter.task || '' });
    const textInput = h('input', { type: 'search', name: 'q', placeholder: 'search text', 'aria-label': 'search text', value: this.filter.q || '' });
    const every = h('input', { type: 'checkbox', name: 'every', checked: this.everyEvent });
    const apply = () => {
      this.filter = {
        type: typeSelect.value || undefined,
        agent: agentInput.value.trim() || undefined,
        task: taskInput.value.trim() || undefined,
        q: textInput.value.trim() || undefined,
      };
      this.everyEvent = every.checked;
      this.rebuild(true);
      this.options.onFilter?.(this.filter);
    };
    const later = debounce(apply, 200);
    typeSelect.addEventListener('change', apply);
    every.addEventListener('change', apply);
    for (const input of [agentInput, taskInput, textInput]) {
      input.addEventListener('input', later);
      input.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') apply();
      });
    }
    this.fillAgents();
    return h(
      'form',
      { class: 'filter-bar', role: 'search', onsubmit: (/** @type {Event} */ e) => e.preventDefault() },
      typeSelect,
      agentInput,
      this.agentList,
      this.options.kind === 'task' ? null : taskInput,
      textInput,
      h('label', { class: 'check' }, every, ' every event'),
      this.countEl,
    );
  }

  fillAgents() {
    if (!this.agentList) return;
    this.agentsKnown = this.store.bySender.size;
    this.agentList.replaceChildren(...[...this.store.bySender.keys()].sort().map((id) => h('option', { value: id })));
  }
}
