// The sidebar: threads (like channels) and runs, newest activity first, each with its unread count;
// a filter box; links to everything, the agents panel, and a new thread.

import { h, renderLoop, debounce, settings, shortId, timeEl } from '../util.js';
import { href } from '../router.js';
import { isTerminal } from '../store.js';

/** @typedef {import('../types.js').Scope} Scope */

/** Items listed per section before "show all". */
const SHOWN = 100;

/** Which events a person has seen, per thread and run: the seq they last read to, kept locally. */
export class ReadMarks {
  /** @param {number} head the log's head now, the baseline on a first visit */
  constructor(head) {
    /** @type {Record<string, number>} */
    this.marks = settings.get('read', {});
    /** Events up to this seq count as read everywhere: nobody wants 10,000 unread on a first visit. */
    this.baseline = settings.get('baseline', -1);
    if (this.baseline < 0) {
      this.baseline = head;
      settings.set('baseline', head);
    }
    this.save = debounce(() => settings.set('read', this.marks), 500);
  }

  /** @param {Scope} scope */
  unread(scope) {
    const mark = Math.max(this.baseline, this.marks[scope.id] || 0);
    const events = scope.events;
    if (!events.length || events[events.length - 1].seq <= mark) return 0;
    let lo = 0;
    let hi = events.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (events[mid].seq <= mark) lo = mid + 1;
      else hi = mid;
    }
    return events.length - lo;
  }

  /** @param {Scope} scope */
  markRead(scope) {
    if ((this.marks[scope.id] || 0) >= scope.lastSeq) return;
    this.marks[scope.id] = scope.lastSeq;
    this.save();
  }
}

export class Sidebar {
  /**
   * @param {import('../store.js').Store} store
   * @param {ReadMarks} marks
   * @param {{onNewThread: () => void}} actions
   */
  constructor(store, marks, actions) {
    this.store = store;
    this.marks = marks;
    this.active = '';
    this.showAll = { thread: false, run: false };
    this.filterInput = h('input', {
      type: 'search',
      class: 'sidebar-filter',
      placeholder: 'Filter threads and runs  ( / )',
      'aria-label': 'filter threads and runs',
    });
    this.filterInput.addEventListener('input', () => this.render());
    this.threadList = h('ul', { class: 'nav-list', 'aria-label': 'threads' });
    this.runList = h('ul', { class: 'nav-list', 'aria-label': 'runs' });
    this.el = h(
      'nav',
      { class: 'sidebar', 'aria-label': 'threads and runs' },
      this.filterInput,
      h(
        'ul',
        { class: 'nav-list nav-top' },
        h('li', null, h('a', { href: href.all(), 'data-id': '#all' }, 'Everything')),
        h('li', null, h('a', { href: href.agents(), 'data-id': '#agents' }, 'Agents')),
        h('li', null, h('a', { href: href.tools(), 'data-id': '#tools' }, 'Tools')),
        h('li', null, h('a', { href: href.positions(), 'data-id': '#positions' }, 'Positions')),
      ),
      h('div', { class: 'nav-head' }, h('h2', null, 'Threads'), h('button', { type: 'button', class: 'small', onclick: actions.onNewThread, title: 'Start a new thread' }, '+ New')),
      this.threadList,
      h('div', { class: 'nav-head' }, h('h2', null, 'Runs')),
      this.runList,
    );
    this.el.addEventListener('keydown', (e) => this.onKey(e));
    this.schedule = renderLoop(() => this.render(), () => store.busy());
    store.subscribe(() => this.schedule());
    this.render();
  }

  /** Highlights the current view's entry. @param {string} id */
  setActive(id) {
    this.active = id;
    for (const a of this.el.querySelectorAll('a[data-id]')) {
      if (a.getAttribute('data-id') === id) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
  }

  render() {
    const q = this.filterInput.value.trim().toLowerCase();
    this.fill(this.threadList, 'thread', this.store.threads, q);
    this.fill(this.runList, 'run', this.store.runs, q);
    this.setActive(this.active);
  }

  /**
   * @param {HTMLElement} list
   * @param {'thread' | 'run'} kind
   * @param {Map<string, Scope>} scopes
   * @param {string} q
   */
  fill(list, kind, scopes, q) {
    // Threads and runs of agent bookkeeping alone (registrations, heartbeats) are not conversations.
    let items = [...scopes.values()].filter((s) => s.listed);
    if (q) items = items.filter((s) => s.id.toLowerCase().includes(q) || s.title.toLowerCase().includes(q));
    items.sort((a, b) => b.lastSeq - a.lastSeq);
    const total = items.length;
    if (!this.showAll[kind]) items = items.slice(0, SHOWN);
    const children = items.map((s) => this.item(s));
    if (!total) children.push(h('li', { class: 'muted empty-item' }, q ? 'nothing matches' : 'none yet'));
    if (total > items.length) {
      children.push(
        h('li', null, h('button', { type: 'button', class: 'link', onclick: () => { this.showAll[kind] = true; this.render(); } }, `show all ${total}`)),
      );
    }
    list.replaceChildren(...children);
  }

  /** @param {Scope} s */
  item(s) {
    const unread = this.active === s.id ? 0 : this.marks.unread(s);
    const state = s.kind === 'run' ? this.runState(s.id) : '';
    return h(
      'li',
      null,
      h(
        'a',
        {
          href: s.kind === 'thread' ? href.thread(s.id) : href.run(s.id),
          'data-id': s.id,
          class: unread ? 'unread' : '',
          title: s.id,
        },
        state && h('span', { class: `dot state-${state}`, title: state, 'aria-label': state }),
        h('span', { class: 'item-title' }, s.title || shortId(s.id)),
        h('span', { class: 'item-meta' }, timeEl(s.lastTs)),
        unread > 0 && h('span', { class: 'badge', 'aria-label': `${unread} unread` }, unread > 999 ? '999+' : String(unread)),
      ),
    );
  }

  /** A run's state at a glance, from its top-level tasks: running while one is open, then completed or failed. @param {string} runId */
  runState(runId) {
    const tasks = this.store.tasksOf(runId);
    if (!tasks.length) return '';
    const ids = new Set(tasks.map((t) => t.task_id));
    const roots = tasks.filter((t) => !t.parent_task_id || !ids.has(t.parent_task_id));
    if (!roots.every((t) => isTerminal(t.state))) return 'running';
    return roots.some((t) => t.state !== 'completed') ? 'failed' : 'completed';
  }

  /** Arrow keys move between the sidebar's links. @param {KeyboardEvent} e */
  onKey(e) {
    if (e.key !== 'ArrowDown' && e.key !== 'ArrowUp') return;
    const links = [...this.el.querySelectorAll('a, button, input')].filter((el) => el instanceof HTMLElement && el.offsetParent !== null);
    const at = links.indexOf(/** @type {Element} */ (document.activeElement));
    if (at < 0) return;
    e.preventDefault();
    const next = links[Math.max(0, Math.min(links.length - 1, at + (e.key === 'ArrowDown' ? 1 : -1)))];
    /** @type {HTMLElement} */ (next).focus();
  }
}
