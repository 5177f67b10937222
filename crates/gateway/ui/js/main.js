// The app: connects the API, the live stream and the store, lays out the header, sidebar and main
// area, and shows the view the address asks for. Global keys: `/` filter and search, `c` compose, `?` help.

import './components/elements.js';
import { Api, ApiError } from './api.js';
import { LiveStream } from './stream.js';
import { Store } from './store.js';
import { parse, href, withFilter } from './router.js';
import { h, icon, newId, settings, tickTimes } from './util.js';
import { Sidebar, ReadMarks } from './views/sidebar.js';
import { ThreadView, AllView } from './views/thread.js';
import { RunView } from './views/run.js';
import { AgentsView, AgentView } from './views/agents.js';
import { ToolsView } from './views/tools.js';
import { PositionsView } from './views/positions.js';
import { ReplayView } from './views/replay.js';
import { Composer } from './views/composer.js';
import { askToken } from './views/auth.js';

/** @typedef {import('./router.js').Route} Route */
/** @typedef {{el: HTMLElement, destroy: () => void}} View */

/** Events held at start (the newest); older ones load when a view needs them. `?history=N` changes it. */
const DEFAULT_HISTORY = 20_000;
const THEMES = ['auto', 'light', 'dark'];
const DARK = matchMedia('(prefers-color-scheme: dark)');

class App {
  constructor() {
    this.api = new Api();
    this.api.askToken = askToken;
    this.store = new Store();
    /** @type {View | null} */
    this.view = null;
    /** @type {Route | null} */
    this.route = null;
    /** @type {Map<string, string>} new threads not yet posted to → their run id */
    this.drafts = new Map();
    /** @type {ReadMarks | null} */
    this.marks = null;
    /** @type {Sidebar | null} */
    this.sidebar = null;
    /** `g` was pressed: the next key picks a view. */
    this.pendingG = false;
    this.stream = new LiveStream(this.api, {
      onEvent: (e) => this.store.enqueue(e),
      onStatus: (status, detail) => this.showStatus(status, detail),
      onLogReplaced: (head) => {
        const floor = Math.max(0, head - this.history);
        this.store.reset(floor);
        this.notice('The daemon has a different event log than before (was its data directory replaced?); starting afresh.');
        return floor;
      },
    });
    this.history = Number(new URLSearchParams(location.search).get('history')) || DEFAULT_HISTORY;
    this.composer = new Composer(this.api, () => this.composeContext());
    this.statusEl = h('span', { class: 'conn', role: 'status', 'aria-live': 'polite' }, 'connecting…');
    this.historyNote = h('p', { class: 'history-note', hidden: true, role: 'status' });
    this.noticeEl = h('p', { class: 'notice', hidden: true, role: 'alert' });
    this.main = h('main', { class: 'main', id: 'main', tabindex: '-1' });
    this.themeButton = h('button', { type: 'button', class: 'icon', onclick: () => this.cycleTheme() });
    // Approve / Deny on a tool call waiting for approval (see render/payloads.js).
    document.addEventListener('clutch-decide', (ev) => void this.decide(/** @type {CustomEvent} */ (ev).detail));
    this.sidebarSlot = h('div', { class: 'sidebar-slot' });
    this.shell = h(
      'div',
      { class: 'app' },
      h(
        'header',
        { class: 'topbar' },
        h('button', { type: 'button', class: 'icon menu', 'aria-label': 'show or hide the sidebar', onclick: () => document.body.classList.toggle('sidebar-open') }, '☰'),
        h('a', { class: 'brand', href: href.all() }, h('img', { src: '/ui/favicon.svg', alt: '', width: 20, height: 20 }), 'Clutch'),
        this.statusEl,
        h('span', { class: 'spacer' }),
        this.themeButton,
        h('button', { type: 'button', class: 'icon', 'aria-label': 'keyboard shortcuts', title: 'keyboard shortcuts (?)', onclick: () => this.help() }, '?'),
      ),
      this.sidebarSlot,
      h('div', { class: 'content' }, this.noticeEl, this.historyNote, this.main),
    );
    this.applyTheme(settings.get('theme', 'auto'));
    DARK.addEventListener('change', () => this.applyTheme(settings.get('theme', 'auto')));
  }

  async start() {
    document.body.replaceChildren(h('a', { class: 'skip', href: '#main', onclick: (/** @type {Event} */ e) => { e.preventDefault(); this.main.focus(); } }, 'Skip to content'), this.shell);
    let head = 0;
    for (let attempt = 0; ; attempt++) {
      try {
        head = (await this.api.health()).head_seq;
        // A plain read tells whether this daemon wants a token (and asks for one on 401).
        await this.api.events({ limit: 1 });
        this.notice('');
        break;
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) {
          this.notice('Without a token nothing can be shown. Reload the page to enter one.');
          return;
        }
        this.notice(`Cannot reach the daemon (${String(/** @type {Error} */ (e).message || e)}); retrying…`);
        await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** attempt)));
      }
    }
    const floor = Math.max(0, head - this.history);
    this.store.reset(floor);
    this.marks = new ReadMarks(head);
    this.sidebar = new Sidebar(this.store, this.api, this.marks, { onNewThread: () => this.newThread() });
    this.sidebarSlot.replaceChildren(this.sidebar.el);
    this.store.subscribe((change) => this.markVisibleRead(change.scopes));
    this.stream.start(floor);
    window.addEventListener('hashchange', () => this.show());
    document.addEventListener('keydown', (e) => this.onKey(e));
    setInterval(tickTimes, 20_000);
    this.show();
  }

  /** The thread (and run, task) the composer posts into, from the view in front. */
  composeContext() {
    const r = this.route;
    if (r?.view === 'run') {
      const task = r.task ? this.store.tasks.get(r.task) : undefined;
      const events = this.store.eventsOf('run', r.id);
      const last = events[events.length - 1];
      return { thread_id: task?.thread_id || last?.thread_id || newId('thr'), run_id: r.id, task_id: r.task || undefined };
    }
    const threadId = r?.view === 'thread' ? r.id : newId('thr');
    const events = this.store.eventsOf('thread', threadId);
    const last = events[events.length - 1];
    const chat = events.find((e) => e.type === 'chat.message');
    let runId = last?.run_id || this.drafts.get(threadId);
    if (!runId) {
      runId = newId('run');
      this.drafts.set(threadId, runId);
    }
    return { thread_id: threadId, run_id: runId, task_id: chat?.task_id };
  }

  newThread() {
    const id = newId('thr');
    this.drafts.set(id, newId('run'));
    location.hash = href.thread(id);
    requestAnimationFrame(() => this.composer.focus());
  }

  /** Shows the view the address names; within one run, only the task pane changes. */
  show() {
    const route = parse();
    const prev = this.route;
    this.route = route;
    document.body.classList.remove('sidebar-open');
    const onFilter = (/** @type {import('./types.js').Filter} */ f) => history.replaceState(null, '', withFilter(route, f));
    const taskHref = (/** @type {string} */ task, /** @type {string} */ run) => href.run(run, task);
    if (prev && prev.view === route.view && prev.id === route.id && (route.view === 'run' || route.view === 'replay')) {
      // Another task of the same run (live or replayed): only the task pane changes, and a replay
      // keeps its place.
      const run = this.view instanceof RunView ? this.view : this.view instanceof ReplayView ? this.view.run : null;
      if (run) {
        if (prev.task !== route.task) run.selectTask(route.task, route.filter, route.at);
        else if (route.at && route.at !== prev.at) run.timeline?.goTo(route.at);
        this.sidebar?.setActive(route.id);
        return;
      }
    }
    this.view?.destroy();
    /** @type {View} */
    let view;
    switch (route.view) {
      case 'thread':
        view = new ThreadView({ store: this.store, threadId: route.id, filter: route.filter, onFilter, taskHref, composer: this.composer.el });
        void this.loadHistory('thread', route.id);
        break;
      case 'run':
        view = new RunView({ store: this.store, api: this.api, runId: route.id, taskId: route.task, filter: route.filter, at: route.at, onFilter, taskHref, runHref: (r) => href.run(r), actions: h('a', { class: 'button', href: href.replay(route.id) }, icon('play'), 'Replay'), footer: this.composer.el });
        void this.loadHistory('run', route.id);
        break;
      case 'tools':
        view = new ToolsView(this.api, this.store);
        break;
      case 'positions':
        view = new PositionsView(this.api);
        break;
      case 'agents':
        view = new AgentsView(this.api, this.store);
        break;
      case 'agent':
        view = new AgentView(this.api, this.store, route.id, { filter: route.filter, onFilter, taskHref });
        void this.loadHistory('agent', route.id);
        break;
      case 'replay':
        view = new ReplayView(this.api, route.id, route.task);
        break;
      default:
        view = new AllView({ store: this.store, filter: route.filter, onFilter, taskHref });
    }
    this.view = view;
    this.main.replaceChildren(view.el);
    this.main.dataset.view = route.view;
    this.sidebar?.setActive(route.view === 'all' ? '#all' : route.view === 'agents' || route.view === 'agent' ? '#agents' : route.view === 'tools' ? '#tools' : route.view === 'positions' ? '#positions' : route.id);
    this.markVisibleRead(new Set([route.id]));
    document.title = `${route.view === 'all' ? 'Everything' : route.view} · Clutch`;
  }

  /** While a thread or run is in view, its new events are read. @param {Set<string>} ids */
  markVisibleRead(ids) {
    const r = this.route;
    if (!r || !this.marks || !ids.has(r.id) || document.hidden) return;
    const scope = r.view === 'thread' ? this.store.threads.get(r.id) : r.view === 'run' ? this.store.runs.get(r.id) : undefined;
    if (scope) this.marks.markRead(scope);
  }

  /**
   * Loads a scope's events from before the stream's start, once: a run by its NDJSON replay, the
   * others page by page.
   * @param {'thread' | 'run' | 'agent'} kind
   * @param {string} id
   */
  async loadHistory(kind, id) {
    const store = this.store;
    const key = `${kind}:${id}`;
    if (store.floor === 0 || store.historyLoaded.has(key)) return;
    store.historyLoaded.add(key);
    const floor = store.floor;
    /** @type {import('./types.js').ClutchEvent[]} */
    const older = [];
    this.historyNote.hidden = false;
    this.historyNote.textContent = 'Loading older events…';
    try {
      if (kind === 'run') {
        outer: for await (const batch of this.api.replay(id)) {
          for (const e of batch) {
            if (e.seq > floor) break outer;
            older.push(e);
          }
          this.historyNote.textContent = `Loading older events… ${older.length.toLocaleString()}`;
        }
      } else {
        const param = kind === 'thread' ? 'thread_id' : 'agent_id';
        for (let after = 0; ; ) {
          const page = await this.api.events({ [param]: id, after, limit: 1000 });
          const fresh = page.events.filter((e) => e.seq <= floor);
          older.push(...fresh);
          if (fresh.length < page.events.length || page.events.length < 1000) break;
          after = page.next_after;
          this.historyNote.textContent = `Loading older events… ${older.length.toLocaleString()}`;
        }
      }
      await store.addHistory(older);
      this.historyNote.hidden = true;
    } catch (e) {
      store.historyLoaded.delete(key);
      if (e instanceof ApiError && e.code === 'RUN_NOT_FOUND') {
        this.historyNote.hidden = true;
        return;
      }
      this.historyNote.textContent = `Older events could not be loaded: ${String(/** @type {Error} */ (e).message || e)}`;
    }
  }

  /** @param {import('./stream.js').Status} status @param {string} detail */
  showStatus(status, detail) {
    const label = { connecting: 'connecting…', 'catching-up': 'catching up', live: 'live', reconnecting: 'reconnecting…' }[status];
    this.statusEl.textContent = label;
    this.statusEl.title = detail;
    this.statusEl.dataset.status = status;
  }

  /** @param {string} text */
  notice(text) {
    this.noticeEl.textContent = text;
    this.noticeEl.hidden = !text;
  }

  /**
   * Asks the daemon to approve or deny a tool call; says how it went beside the buttons.
   * @param {{callId: string, verb: 'approve' | 'deny', status: HTMLElement}} detail
   */
  async decide({ callId, verb, status }) {
    status.textContent = verb === 'approve' ? 'approving…' : 'denying…';
    try {
      /** @type {import('./api-types.js').ApprovalDecided} */
      const decided = await (await this.api.fetch(`/v1/tool-calls/${encodeURIComponent(callId)}/${verb}`, { method: 'POST', body: {} })).json();
      status.textContent = `${decided.decision} by ${decided.by}`;
    } catch (e) {
      status.textContent = String(/** @type {Error} */ (e).message || e);
    }
  }

  cycleTheme() {
    const now = settings.get('theme', 'auto');
    this.applyTheme(THEMES[(THEMES.indexOf(now) + 1) % THEMES.length]);
  }

  /** `auto` follows the system's light or dark, also when it changes. @param {string} theme */
  applyTheme(theme) {
    settings.set('theme', theme);
    const dark = theme === 'dark' || (theme === 'auto' && DARK.matches);
    document.documentElement.dataset.theme = dark ? 'dark' : 'light';
    this.themeButton.textContent = theme === 'dark' ? '☾' : theme === 'light' ? '☀' : '◐';
    this.themeButton.setAttribute('aria-label', `colour theme: ${theme} (change)`);
    this.themeButton.title = `theme: ${theme}`;
  }

  help() {
    const keys = [
      ['/', 'filter threads and runs, search every message'],
      ['f', 'search the timeline in view'],
      ['t', 'focus the timeline; then ↑ ↓ (or j k), PgUp PgDn, Home End, Enter'],
      ['c', 'write in the composer'],
      ['Alt + ↑ / ↓', 'previous / next thread or run'],
      ['g then a / e', 'agents / everything'],
      ['Space ← →', 'play, step back, step (in replay controls)'],
      ['Esc', 'leave a text field'],
    ];
    const dialog = h(
      'dialog',
      { class: 'help-dialog', 'aria-labelledby': 'help-title' },
      h('form', { method: 'dialog' }, h('h2', { id: 'help-title' }, 'Keyboard'), h('dl', { class: 'keys' }, keys.map(([k, what]) => [h('dt', null, h('kbd', null, k)), h('dd', null, what)])), h('div', { class: 'dialog-buttons' }, h('button', { type: 'submit', class: 'primary' }, 'Close'))),
    );
    dialog.addEventListener('close', () => dialog.remove());
    document.body.appendChild(dialog);
    dialog.showModal();
  }

  /** @param {KeyboardEvent} e */
  onKey(e) {
    const target = /** @type {HTMLElement} */ (e.target);
    const typing = target.matches('input, textarea, select, [contenteditable]');
    if (e.key === 'Escape' && typing) {
      target.blur();
      return;
    }
    if (e.altKey && (e.key === 'ArrowDown' || e.key === 'ArrowUp')) {
      const links = [...document.querySelectorAll('.sidebar .nav-list a[data-id]')];
      const at = links.findIndex((a) => a.getAttribute('aria-current') === 'page');
      const next = links[Math.max(0, Math.min(links.length - 1, at + (e.key === 'ArrowDown' ? 1 : -1)))];
      if (next instanceof HTMLAnchorElement) {
        e.preventDefault();
        location.hash = next.hash;
      }
      return;
    }
    if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
    if (this.pendingG) {
      this.pendingG = false;
      if (e.key === 'a') location.hash = href.agents();
      else if (e.key === 'e') location.hash = href.all();
      return;
    }
    /** @type {HTMLElement | null} */
    let focus = null;
    switch (e.key) {
      case '/':
        focus = this.sidebar?.filterInput || null;
        break;
      case 'f':
        focus = this.main.querySelector('.filter-bar input[name=q]');
        break;
      case 't':
        focus = this.main.querySelector('.timeline-rows');
        break;
      case 'c':
        focus = this.main.querySelector('.composer textarea');
        break;
      case 'g':
        this.pendingG = true;
        setTimeout(() => (this.pendingG = false), 1500);
        return;
      case '?':
        this.help();
        e.preventDefault();
        return;
      default:
        return;
    }
    if (focus) {
      e.preventDefault();
      focus.focus();
    }
  }
}

const app = new App();
/** For the browser tests and the curious: the app's parts, read-only by convention. */
/** @type {any} */ (window).__clutch = app;
void app.start();
