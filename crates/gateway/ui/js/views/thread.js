// The conversation views: one thread (its timeline and the composer), and everything (every event of
// the log, with the filters that make it the search view).

import { h, shortId } from '../util.js';
import { Timeline } from './timeline.js';
import { href } from '../router.js';

/** @typedef {import('../types.js').Filter} Filter */

export class ThreadView {
  /**
   * @param {{
   *   store: import('../store.js').Store,
   *   threadId: string,
   *   filter?: Filter,
   *   onFilter?: (f: Filter) => void,
   *   taskHref: (task: string, run: string) => string,
   *   composer: HTMLElement,
   * }} options
   */
  constructor(options) {
    this.store = options.store;
    this.threadId = options.threadId;
    this.title = h('h1', { class: 'view-title' });
    this.sub = h('p', { class: 'muted view-sub' });
    this.timeline = new Timeline({
      store: options.store,
      kind: 'thread',
      id: options.threadId,
      filter: options.filter,
      onFilter: options.onFilter,
      taskHref: options.taskHref,
      empty: 'Nothing here yet: say something below.',
    });
    this.el = h('div', { class: 'thread-view' }, h('header', { class: 'view-head' }, h('div', null, this.title, this.sub)), this.timeline.el, options.composer);
    this.unsubscribe = this.store.subscribe((c) => {
      if (c.reset || c.scopes.has(this.threadId)) this.head();
    });
    this.head();
  }

  head() {
    const thread = this.store.threads.get(this.threadId);
    this.title.textContent = thread?.title || 'New thread';
    this.title.title = this.threadId;
    const runs = [...new Set((thread?.events || []).map((e) => e.run_id))];
    this.sub.replaceChildren(
      `${this.threadId} · ${(thread?.events.length || 0).toLocaleString()} events`,
      ...(runs.length ? [' · runs: ', ...runs.slice(-5).flatMap((r, i) => [i ? ', ' : '', h('a', { href: href.run(r) }, shortId(r))])] : []),
    );
  }

  destroy() {
    this.unsubscribe();
    this.timeline.destroy();
  }
}

export class AllView {
  /**
   * @param {{store: import('../store.js').Store, filter?: Filter, onFilter?: (f: Filter) => void, taskHref: (task: string, run: string) => string}} options
   */
  constructor(options) {
    this.timeline = new Timeline({
      store: options.store,
      kind: 'all',
      filter: options.filter,
      onFilter: options.onFilter,
      taskHref: options.taskHref,
      empty: 'No events match. Post one with the composer of a thread, `clutch send`, or POST /v1/messages.',
    });
    this.el = h(
      'div',
      { class: 'all-view' },
      h('header', { class: 'view-head' }, h('div', null, h('h1', { class: 'view-title' }, 'Everything'), h('p', { class: 'muted view-sub' }, 'Every event as it happens. Filter by type, agent, task or text to search.'))),
      this.timeline.el,
    );
  }

  destroy() {
    this.timeline.destroy();
  }
}
