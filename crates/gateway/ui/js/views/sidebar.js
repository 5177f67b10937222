// The sidebar: threads (like channels) and runs, newest activity first, each with its unread count;
// a box that filters them and searches every message; links to everything, the agents panel, and a
// new thread. The lists are the daemon's (`GET /v1/threads`, `/v1/runs`), a page at a time as each
// is scrolled to its end, merged with what the page holds from the live stream: a thread or run
// with new events moves to the top, a new one appears, and unread counts come from the events held.

import { h, renderLoop, debounce, nameOf, settings, shortId, timeEl } from '../util.js';
import { href } from '../router.js';
import { Pager } from '../api.js';
import { isTerminal, SYSTEM_RUN, SYSTEM_THREAD } from '../store.js';

/** @typedef {import('../types.js').Scope} Scope */
/** @typedef {import('../api-types.js').RunSummary} RunSummary */
/** @typedef {import('../api-types.js').ThreadSummary} ThreadSummary */
/** @typedef {import('../api-types.js').SearchHit} SearchHit */

/** Threads or runs asked of the daemon per page. */
const PAGE = 50;

/**
 * A thread or run as a section lists it: the daemon's summary of it, the page's events of it, or both.
 * @typedef {object} Entry
 * @property {'thread' | 'run'} kind
 * @property {string} id
 * @property {string} title
 * @property {number} lastSeq
 * @property {string} lastTs
 * @property {Scope | undefined} scope         what the page holds of it
 * @property {RunSummary | undefined} run      the daemon's summary of a run
 */

/**
 * One section: its list element and the daemon's pages of it.
 * @typedef {object} Section
 * @property {'thread' | 'run'} kind
 * @property {HTMLElement} list
 * @property {Pager<RunSummary | ThreadSummary>} pager
 * @property {IntersectionObserver} observer  watches the section's end, to fetch the next page
 */

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
   * @param {import('../api.js').Api} api
   * @param {ReadMarks} marks
   * @param {{onNewThread: () => void}} actions
   */
  constructor(store, api, marks, actions) {
    this.store = store;
    this.marks = marks;
    this.active = '';
    this.filterInput = h('input', {
      type: 'search',
      class: 'sidebar-filter',
      placeholder: 'Filter, or search messages  ( / )',
      'aria-label': 'filter threads and runs, and search messages',
    });
    this.schedule = renderLoop(() => this.render(), () => store.busy());
    this.search = new SearchResults(api, this.schedule);
    this.filterInput.addEventListener('input', () => {
      this.search.set(this.filterInput.value);
      this.render();
    });
    this.sections = {
      thread: this.section('thread', 'threads', (cursor, signal) => api.threads({ limit: PAGE, cursor }, signal)),
      run: this.section('run', 'runs', (cursor, signal) => api.runs({ limit: PAGE, cursor }, signal)),
    };
    this.hitHead = h('div', { class: 'nav-head', hidden: true }, h('h2', null, 'Messages'));
    this.hitList = h('ul', { class: 'nav-list paged hits', 'aria-label': 'search results', hidden: true });
    this.hitObserver = this.observer(this.hitList, () => void this.search.pager.more());
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
      this.sections.thread.list,
      h('div', { class: 'nav-head' }, h('h2', null, 'Runs')),
      this.sections.run.list,
      this.hitHead,
      this.hitList,
    );
    this.el.addEventListener('keydown', (e) => this.onKey(e));
    store.subscribe((change) => {
      if (change.reset) this.reload();
      this.schedule();
    });
    this.reload();
    this.render();
  }

  /**
   * @param {'thread' | 'run'} kind
   * @param {string} label
   * @param {(cursor: string | undefined, signal: AbortSignal) => Promise<import('../api.js').Page<RunSummary | ThreadSummary>>} fetchPage
   * @returns {Section}
   */
  section(kind, label, fetchPage) {
    const list = h('ul', { class: `nav-list paged ${label}`, 'aria-label': label });
    const pager = new Pager(fetchPage, this.schedule);
    // Scrolled to its end: the next page, unless the box filters what is shown (then "more" asks).
    const observer = this.observer(list, () => {
      if (!this.filterText()) void pager.more();
    });
    return { kind, list, pager, observer };
  }

  /**
   * Calls `onEnd` when the end of `list` (its last item, "more") scrolls into view.
   * @param {HTMLElement} list
   * @param {() => void} onEnd
   */
  observer(list, onEnd) {
    return new IntersectionObserver((seen) => {
      if (seen.some((s) => s.isIntersecting)) onEnd();
    }, { root: list, rootMargin: '0px 0px 80px 0px' });
  }

  /** Forgets the daemon's pages and asks for the first ones again (at start, and when the log was replaced). */
  reload() {
    for (const { pager } of Object.values(this.sections)) {
      pager.reset();
      void pager.more();
    }
  }

  /** Highlights the current view's entry. @param {string} id */
  setActive(id) {
    this.active = id;
    for (const a of this.el.querySelectorAll('a[data-id]')) {
      if (a.getAttribute('data-id') === id) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
  }

  filterText() {
    return this.filterInput.value.trim().toLowerCase();
  }

  render() {
    const q = this.filterText();
    this.fill(this.sections.thread, q);
    this.fill(this.sections.run, q);
    this.fillHits();
    this.el.classList.toggle('searching', this.search.active);
    this.setActive(this.active);
  }

  /**
   * The section's entries, newest activity first: the daemon's pages so far, and what the page holds
   * that is newer than their end (new since, or moved up by live events) or is in view.
   * @param {Section} section
   * @returns {Entry[]}
   */
  entries(section) {
    const { kind, pager } = section;
    const scopes = kind === 'thread' ? this.store.threads : this.store.runs;
    /** @type {Map<string, Entry>} */
    const byId = new Map();
    let end = Infinity;
    for (const item of pager.items) {
      const run = kind === 'run' ? /** @type {RunSummary} */ (item) : undefined;
      const id = kind === 'thread' ? /** @type {ThreadSummary} */ (item).thread_id : item.run_id;
      end = Math.min(end, item.last_seq);
      // The daemon's own bookkeeping is listed once it holds more than agents' registrations.
      if (isSystem(id) && !scopes.get(id)?.listed) continue;
      byId.set(id, { kind, id, title: item.title, lastSeq: item.last_seq, lastTs: item.last_ts, scope: undefined, run });
    }
    // Before the first page, what the page holds; after the last, all of it.
    if (!pager.started) end = -Infinity;
    else if (pager.done) end = 0;
    for (const scope of scopes.values()) {
      const entry = byId.get(scope.id);
      if (entry) {
        entry.scope = scope;
        if (isSystem(scope.id) || !entry.title) entry.title = scope.title;
        if (scope.lastSeq > entry.lastSeq) {
          entry.lastSeq = scope.lastSeq;
          entry.lastTs = scope.lastTs;
        }
      } else if (scope.listed && (scope.lastSeq >= end || scope.id === this.active)) {
        // Threads and runs of agent bookkeeping alone (registrations, heartbeats) are not conversations.
        byId.set(scope.id, { kind, id: scope.id, title: scope.title, lastSeq: scope.lastSeq, lastTs: scope.lastTs, scope, run: undefined });
      }
    }
    const entries = [...byId.values()].sort((a, b) => b.lastSeq - a.lastSeq);
    return pager.started ? entries : entries.slice(0, PAGE);
  }

  /**
   * @param {Section} section
   * @param {string} q
   */
  fill(section, q) {
    const { pager, list } = section;
    let entries = this.entries(section);
    if (q) entries = entries.filter((e) => e.id.toLowerCase().includes(q) || e.title.toLowerCase().includes(q));
    const children = entries.map((e) => this.item(e));
    if (!entries.length && !pager.loading) children.push(h('li', { class: 'muted empty-item' }, q ? 'nothing loaded matches' : 'none yet'));
    const end = this.pageEnd(pager, section.kind === 'thread' ? 'threads' : 'runs');
    if (end) children.push(end);
    list.replaceChildren(...children);
    section.observer.disconnect();
    if (end && pager.started && !pager.loading && !pager.error) section.observer.observe(end);
  }

  /**
   * What ends a paged list: "loading…", why a page failed (and a retry), or "more"; null after the last page.
   * @param {Pager<any>} pager
   * @param {string} what
   */
  pageEnd(pager, what) {
    if (pager.loading) return h('li', { class: 'muted empty-item page-end' }, 'loading…');
    if (pager.error) {
      return h(
        'li',
        { class: 'muted empty-item page-end' },
        `${what} could not be loaded: ${pager.error.message} `,
        h('button', { type: 'button', class: 'link', onclick: () => void pager.more() }, 'retry'),
      );
    }
    if (pager.done || !pager.started) return null;
    return h('li', { class: 'page-end' }, h('button', { type: 'button', class: 'link more', onclick: () => void pager.more() }, `more ${what}`));
  }

  /** The search's results, below the lists, while the box has something to search for. */
  fillHits() {
    const search = this.search;
    this.hitHead.hidden = this.hitList.hidden = !search.active;
    this.hitObserver.disconnect();
    if (!search.active) {
      this.hitList.replaceChildren();
      return;
    }
    const pager = search.pager;
    const children = pager.items.map((hit) => search.item(hit, (id) => this.runTitle(id)));
    const end = search.pending ? h('li', { class: 'muted empty-item page-end' }, 'searching…') : this.pageEnd(pager, 'messages');
    if (!children.length && !end) children.push(h('li', { class: 'muted empty-item' }, 'no message has these words'));
    if (end) children.push(end);
    this.hitList.replaceChildren(...children);
    if (end && !search.pending && pager.started && !pager.loading && !pager.error) this.hitObserver.observe(end);
  }

  /** What a run is called, as far as the page knows. @param {string} id */
  runTitle(id) {
    const summary = /** @type {RunSummary[]} */ (this.sections.run.pager.items).find((r) => r.run_id === id);
    return summary?.title || this.store.runs.get(id)?.title || '';
  }

  /** @param {Entry} e */
  item(e) {
    const unread = this.active === e.id || !e.scope ? 0 : this.marks.unread(e.scope);
    const state = e.kind === 'run' ? this.runState(e) : '';
    return h(
      'li',
      null,
      h(
        'a',
        {
          href: e.kind === 'thread' ? href.thread(e.id) : href.run(e.id),
          'data-id': e.id,
          class: unread ? 'unread' : '',
          title: e.id,
        },
        state && h('span', { class: `dot state-${state}`, title: state, 'aria-label': state }),
        h('span', { class: 'item-title' }, e.title || shortId(e.id)),
        h('span', { class: 'item-meta' }, timeEl(e.lastTs)),
        unread > 0 && h('span', { class: 'badge', 'aria-label': `${unread} unread` }, unread > 999 ? '999+' : String(unread)),
      ),
    );
  }

  /**
   * A run's state at a glance: from the events when the page holds all of the run's (live), else as
   * the daemon's list said; none for a run without tasks.
   * @param {Entry} e
   */
  runState(e) {
    const summary = e.run;
    const held = e.scope && (!summary || summary.first_seq > this.store.floor || this.store.historyLoaded.has(`run:${e.id}`));
    if (held || !summary) return this.heldRunState(e.id);
    if (!summary.root_task_id && !Object.keys(summary.tasks).length) return '';
    return summary.state === 'active' ? 'running' : summary.state;
  }

  /** A run's state from its top-level tasks: running while one is open, then completed or failed. @param {string} runId */
  heldRunState(runId) {
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

/** The daemon's own thread and run (agents' registrations, status changes, notices). @param {string} id */
function isSystem(id) {
  return id === SYSTEM_THREAD || id === SYSTEM_RUN;
}

// Search over the whole log (`GET /v1/search`) from the box: asked for after a pause in typing,
// results as the daemon ranks them, page by page as their list is scrolled; a result opens its run
// scrolled to the event.

/** Characters the text needs before it is searched for. */
const SEARCH_MIN = 2;
/** The pause after typing before a search is asked for. */
const SEARCH_DELAY_MS = 300;
/** Results per page. */
const SEARCH_PAGE = 25;

/** Lower case without accents, as the daemon's index compares words. @param {string} text */
function fold(text) {
  return text.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();
}

/** The words of a search as the daemon reads them: runs of letters and digits. @param {string} text */
function searchWords(text) {
  return fold(text)
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean);
}

/**
 * A snippet as text and `<mark>`s. The daemon puts each match between `[` and `]`; a bracketed part
 * is marked only when its words are words of the search, so brackets in the text itself stay as they
 * were. Built of text nodes only: nothing the daemon sends is parsed as HTML.
 * @param {string} snippet
 * @param {string[]} words the search's (`searchWords`)
 * @returns {(string | HTMLElement)[]}
 */
function snippetParts(snippet, words) {
  const wanted = new Set(words);
  /** @type {(string | HTMLElement)[]} */
  const parts = [];
  let plain = '';
  let at = 0;
  for (;;) {
    const open = snippet.indexOf('[', at);
    const close = open < 0 ? -1 : snippet.indexOf(']', open + 1);
    if (close < 0) break;
    const inner = snippet.slice(open + 1, close);
    const innerWords = searchWords(inner);
    if (!inner.includes('[') && innerWords.length && innerWords.every((w) => wanted.has(w))) {
      plain += snippet.slice(at, open);
      if (plain) parts.push(plain);
      plain = '';
      parts.push(h('mark', null, inner));
      at = close + 1;
    } else {
      plain += snippet.slice(at, open + 1);
      at = open + 1;
    }
  }
  plain += snippet.slice(at);
  if (plain) parts.push(plain);
  return parts;
}

/** The search the sidebar's box asks for, and the pages of its results. */
class SearchResults {
  /**
   * @param {import('../api.js').Api} api
   * @param {() => void} onChange  the results (or their state) changed
   */
  constructor(api, onChange) {
    this.api = api;
    this.onChange = onChange;
    /** The text searched for (trimmed). */
    this.text = '';
    /** @type {string[]} */
    this.words = [];
    /** @type {Pager<SearchHit>} */
    this.pager = this.newPager('');
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    /** A search is asked for and its first page has not come yet (waiting for the pause, or for the daemon). */
    this.pending = false;
  }

  /** @param {string} text */
  newPager(text) {
    return new Pager((cursor, signal) => this.api.search({ q: text, limit: SEARCH_PAGE, cursor }, signal), () => {
      if (this.pager.started || this.pager.error) this.pending = false;
      this.onChange();
    });
  }

  /** Whether there is something to search for. */
  get active() {
    return this.text.length >= SEARCH_MIN && this.words.length > 0;
  }

  /** The box's text changed: searched for after a pause in typing, when long enough. @param {string} text */
  set(text) {
    const trimmed = text.trim();
    if (trimmed === this.text) return;
    this.text = trimmed;
    this.words = searchWords(trimmed);
    clearTimeout(this.timer);
    this.pager.reset();
    this.pending = this.active;
    if (this.active) {
      this.timer = setTimeout(() => {
        this.pager = this.newPager(trimmed);
        void this.pager.more();
      }, SEARCH_DELAY_MS);
    }
    this.onChange();
  }

  /**
   * One result: where it is and what it says, linking to its run scrolled to it.
   * @param {SearchHit} hit
   * @param {(runId: string) => string} runTitle  what to call its run
   */
  item(hit, runTitle) {
    return h(
      'li',
      null,
      h(
        'a',
        { class: 'hit', href: href.runAt(hit.run_id, hit.seq), 'data-seq': String(hit.seq), title: `${hit.type} ${hit.id} in ${hit.run_id}` },
        h('span', { class: 'hit-head' }, h('span', { class: `type-badge type-${hit.type.split('.')[0]}` }, hit.type), h('span', { class: 'hit-from' }, nameOf(hit.from)), timeEl(hit.ts)),
        h('span', { class: 'hit-snippet' }, snippetParts(hit.snippet, this.words)),
        h('span', { class: 'hit-run' }, runTitle(hit.run_id) || shortId(hit.run_id)),
      ),
    );
  }
}
