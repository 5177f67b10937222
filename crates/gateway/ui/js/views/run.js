// The run view: the run's tasks as a tree (by `parent_task_id`, with workflow dependencies shown as
// "after" links by name) in live state colours, beside the timeline of the run or of the task picked
// in it. A workflow's run shows its plan as a graph above them; a planned task picked shows its
// context as its holder would receive it, on asking; totals of the run's LLM calls head the view.

import { append, h, renderLoop, shortId, spentText } from '../util.js';
import { Timeline } from './timeline.js';
import { depLink, llmTotals, llmTotalsText, renderTaskCard, stateChip, who } from '../render/events.js';
import { rawJson } from '../render/payloads.js';
import { isTerminal, ORCHESTRATOR, spentBy } from '../store.js';
import { barEl } from '../components/elements.js';
import { SessionPanel } from './positions.js';
import { WorkflowPanel } from './workflow.js';
import { ApiError } from '../api.js';

/** @typedef {import('../types.js').Task} Task */
/** @typedef {import('../types.js').Filter} Filter */

/** Tree nodes drawn at most; a run with more tasks shows the first ones and a count. */
const MAX_NODES = 2000;

export class RunView {
  /**
   * @param {{
   *   store: import('../store.js').Store,
   *   api?: import('../api.js').Api,
   *   runId: string,
   *   taskId?: string,
   *   filter?: Filter,
   *   at?: number,
   *   taskHref: (taskId: string, runId: string) => string,
   *   runHref: (runId: string) => string,
   *   onFilter?: (filter: Filter) => void,
   *   actions?: HTMLElement | null,
   *   footer?: HTMLElement | null,
   * }} options
   */
  constructor(options) {
    this.options = options;
    this.store = options.store;
    this.runId = options.runId;
    this.taskId = options.taskId || '';
    /** @type {Set<string>} collapsed task ids */
    this.collapsed = new Set();
    this.title = h('h1', { class: 'view-title' });
    this.summary = h('p', { class: 'muted view-sub' });
    this.tree = h('ul', { class: 'task-tree', role: 'tree', 'aria-label': 'tasks of the run' });
    this.taskHead = h('div', { class: 'task-head' });
    this.detail = h('section', { class: 'detail-pane' });
    /** What a position's session in this run says: team, phase, outcome, turns to answer (hidden for other runs). */
    this.session = new SessionPanel(this.store, this.runId, options.api);
    /** The run's workflow, when it holds one: its status and its plan as a graph. */
    this.workflow = new WorkflowPanel(this.store, this.runId, options.taskHref);
    /** A planned task's context as its holder would receive it (asked for by a button). */
    this.context = h('div', { class: 'context-box' });
    this.el = h(
      'div',
      { class: 'run-view' },
      h('header', { class: 'view-head' }, h('div', null, this.title, this.summary), options.actions || null),
      this.session.el,
      this.workflow.el,
      h(
        'div',
        { class: 'split' },
        h('section', { class: 'tree-pane', 'aria-label': 'task tree' }, h('h2', { class: 'pane-title' }, 'Tasks'), this.tree),
        this.detail,
      ),
    );
    this.tree.addEventListener('keydown', (e) => this.onTreeKey(e));
    this.tree.addEventListener('click', (e) => {
      const toggle = /** @type {HTMLElement} */ (e.target).closest('.twisty');
      if (!toggle) return;
      e.preventDefault();
      const id = /** @type {string} */ (toggle.getAttribute('data-task'));
      if (this.collapsed.has(id)) this.collapsed.delete(id);
      else this.collapsed.add(id);
      this.renderTree();
    });
    /** @type {Timeline | null} */
    this.timeline = null;
    /** @type {Map<string, HTMLElement>} tree items by task id */
    this.items = new Map();
    this.treeSize = -1;
    this.structureChanged = false;
    /** @type {Set<string>} tasks changed since the last draw */
    this.changed = new Set();
    this.schedule = renderLoop(() => this.refresh(), () => this.store.busy());
    this.unsubscribe = this.store.subscribe((change) => {
      if (!change.reset && !change.scopes.has(this.runId)) return;
      if (change.reset || change.history) this.structureChanged = true;
      for (const id of change.tasks) this.changed.add(id);
      this.schedule();
    });
    this.selectTask(this.taskId, options.filter, options.at);
    this.refresh();
  }

  destroy() {
    this.unsubscribe();
    this.session.destroy();
    this.timeline?.destroy();
  }

  /**
   * Shows the run's timeline, or one task's; `at`: scrolled to that event.
   * @param {string} taskId
   * @param {Filter} [filter]
   * @param {number} [at]
   */
  selectTask(taskId, filter = {}, at = 0) {
    this.taskId = taskId;
    this.structureChanged = true;
    this.context.replaceChildren();
    this.timeline?.destroy();
    this.timeline = new Timeline({
      store: this.store,
      kind: taskId ? 'task' : 'run',
      id: taskId || this.runId,
      fold: !taskId,
      filter,
      at,
      taskHref: this.options.taskHref,
      onFilter: this.options.onFilter,
      empty: taskId ? 'No events for this task yet.' : 'No events in this run yet.',
    });
    this.detail.replaceChildren(...(taskId ? [this.taskHead] : []), this.timeline.el, ...(this.options.footer ? [this.options.footer] : []));
    this.refresh();
  }

  refresh() {
    const run = this.store.runs.get(this.runId);
    const tasks = this.store.tasksOf(this.runId);
    this.title.textContent = run?.title || shortId(this.runId);
    this.title.title = this.runId;
    const open = tasks.filter((t) => !isTerminal(t.state)).length;
    const failed = tasks.filter((t) => t.state === 'failed' || t.state === 'timed_out').length;
    const spent = spentBy(tasks);
    const calls = tasks.flatMap((t) => t.llmCalls);
    this.summary.textContent = `${this.runId} · ${(run?.events.length || 0).toLocaleString()} events · ${tasks.length} tasks${open ? ` · ${open} open` : ''}${failed ? ` · ${failed} failed` : ''}${calls.length ? ` · ${llmTotalsText(llmTotals(calls))}` : spent ? ` · ${spentText(spent)}` : ''}`;
    this.session.refresh();
    this.workflow.refresh(this.taskId);
    const changed = this.changed;
    this.changed = new Set();
    // Same tasks as drawn: only their rows change (state, progress, assignee). New tasks: redraw.
    if (tasks.length === this.treeSize && !this.structureChanged) this.patchTree(changed);
    else this.renderTree();
    this.structureChanged = false;
    if (this.taskId) {
      const t = this.store.tasks.get(this.taskId);
      const back = h('a', { href: this.options.runHref(this.runId), class: 'back' }, '← whole run');
      this.taskHead.replaceChildren();
      append(this.taskHead, [
        back,
        t ? renderTaskCard(t, { store: this.store, taskHref: this.options.taskHref }) : h('p', { class: 'muted' }, `Task ${this.taskId}: no lifecycle events yet.`),
        t?.kind === 'workflow_task' && this.options.api ? h('p', null, h('button', { type: 'button', class: 'load-context', onclick: () => void this.loadContext(t.task_id) }, 'Context as its holder receives it')) : null,
        this.context,
      ]);
    }
  }

  /**
   * Asks the daemon for a planned task's context (`POST /v1/tasks/{id}/context`), every checkpoint
   * included, and shows it.
   * @param {string} taskId
   */
  async loadContext(taskId) {
    const api = this.options.api;
    if (!api) return;
    this.context.replaceChildren(h('p', { class: 'muted' }, 'Loading the context…'));
    try {
      const answer = await (await api.fetch(`/v1/tasks/${encodeURIComponent(taskId)}/context`, { method: 'POST', body: { include: { all_checkpoints: true } } })).json();
      if (taskId !== this.taskId) return;
      const trimmed = Array.isArray(answer.trimmed) && answer.trimmed.length ? ` · trimmed: ${answer.trimmed.join(', ')}` : '';
      this.context.replaceChildren(h('p', { class: 'muted' }, `Context of ${answer.tokens ?? '?'} tokens${trimmed}`), rawJson(answer.context ?? answer, 'context', true));
    } catch (e) {
      this.context.replaceChildren(h('p', { class: 'error' }, e instanceof ApiError ? `No context: ${e.describe()}` : `No context: ${String(e)}`));
    }
  }

  /** The row of one task in the tree (without its children). @param {Task} t @param {number} kids */
  nodeRow(t, kids) {
    const open = !this.collapsed.has(t.task_id);
    const selected = t.task_id === this.taskId;
    return h(
      'div',
      { class: 'node-wrap' },
      h(
        'div',
        { class: `node${selected ? ' selected' : ''}` },
        kids ? h('button', { type: 'button', class: 'twisty', 'data-task': t.task_id, 'aria-label': open ? 'collapse' : 'expand', tabindex: '-1' }, open ? '▾' : '▸') : h('span', { class: 'twisty-space' }),
        h('span', { class: `dot state-${t.state}`, 'aria-hidden': 'true' }),
        h('a', { href: this.options.taskHref(t.task_id, t.run_id), 'data-task': t.task_id, class: 'node-link', tabindex: '-1' }, h('span', { class: 'node-title' }, t.title)),
        stateChip(t.state),
        (t.kind === 'workflow_task' ? t.holder : t.assignee !== ORCHESTRATOR && t.assignee) && h('span', { class: 'node-agent' }, who(/** @type {string} */ (t.kind === 'workflow_task' ? t.holder : t.assignee))),
        t.percent !== undefined && !isTerminal(t.state) && barEl(t.percent, 100, 'progress', `${Math.round(t.percent)}%`, 'plain'),
      ),
      t.dependsOn.length > 0 &&
        h('div', { class: 'deps' }, 'after ', t.dependsOn.map((d, i) => [i ? ', ' : '', depLink(d, t.run_id, { store: this.store, taskHref: this.options.taskHref })])),
    );
  }

  /** Redraws the rows of changed tasks in place. @param {Set<string>} changed */
  patchTree(changed) {
    for (const id of changed) {
      const li = this.items.get(id);
      const t = this.store.tasks.get(id);
      if (!li || !t) continue;
      const hadFocus = li.firstElementChild?.contains(document.activeElement);
      const tabbable = li.querySelector(':scope > .node-wrap a.node-link')?.getAttribute('tabindex') === '0';
      li.dataset.state = t.state;
      const row = this.nodeRow(t, Number(li.dataset.kids));
      if (tabbable) row.querySelector('a.node-link')?.setAttribute('tabindex', '0');
      li.firstElementChild?.replaceWith(row);
      if (hadFocus) /** @type {HTMLElement | null} */ (row.querySelector('a.node-link'))?.focus();
    }
  }

  renderTree() {
    const tasks = this.store.tasksOf(this.runId);
    this.treeSize = tasks.length;
    this.items.clear();
    const ids = new Set(tasks.map((t) => t.task_id));
    /** @type {Map<string, Task[]>} */
    const children = new Map();
    /** @type {Task[]} */
    const roots = [];
    for (const t of tasks) {
      const parent = t.parent_task_id && ids.has(t.parent_task_id) && t.parent_task_id !== t.task_id ? t.parent_task_id : '';
      if (!parent) roots.push(t);
      else {
        let list = children.get(parent);
        if (!list) children.set(parent, (list = []));
        list.push(t);
      }
    }
    const bySeq = (/** @type {Task} */ a, /** @type {Task} */ b) => (a.events[0]?.seq ?? 0) - (b.events[0]?.seq ?? 0);
    roots.sort(bySeq);
    const hadFocus = this.tree.contains(document.activeElement) ? document.activeElement?.getAttribute('data-task') : null;
    let drawn = 0;
    /** @type {Set<string>} */
    const seen = new Set();
    /** @param {Task} t @param {number} depth @returns {HTMLElement} */
    const node = (t, depth) => {
      drawn++;
      seen.add(t.task_id);
      const kids = (children.get(t.task_id) || []).filter((k) => !seen.has(k.task_id)).sort(bySeq);
      const open = !this.collapsed.has(t.task_id);
      const li = h(
        'li',
        { role: 'treeitem', 'aria-level': String(depth), 'aria-selected': t.task_id === this.taskId ? 'true' : 'false', 'aria-expanded': kids.length ? String(open) : undefined, 'data-state': t.state, 'data-kids': String(kids.length) },
        this.nodeRow(t, kids.length),
        kids.length > 0 && open && h('ul', { role: 'group' }, kids.map((k) => (drawn < MAX_NODES ? node(k, depth + 1) : null))),
      );
      this.items.set(t.task_id, li);
      return li;
    };
    const items = [];
    for (const r of roots) {
      if (drawn >= MAX_NODES) break;
      items.push(node(r, 1));
    }
    if (tasks.length > drawn && drawn >= MAX_NODES) items.push(h('li', { class: 'muted' }, `… and ${tasks.length - drawn} more tasks (filter the timeline to find them)`));
    if (!tasks.length) items.push(h('li', { class: 'muted empty-item' }, 'No tasks in this run yet.'));
    this.tree.replaceChildren(...items);
    // One stop on the tree for Tab: the selected task, else the first.
    const first = /** @type {HTMLElement | null} */ (this.tree.querySelector('li[aria-selected=true] a.node-link') || this.tree.querySelector('a.node-link'));
    if (first) first.tabIndex = 0;
    if (hadFocus) /** @type {HTMLElement | null} */ (this.tree.querySelector(`a[data-task="${CSS.escape(hadFocus)}"]`))?.focus();
  }

  /** Arrow keys walk the tree: up/down between items, left/right collapse and expand. @param {KeyboardEvent} e */
  onTreeKey(e) {
    const links = /** @type {HTMLElement[]} */ ([...this.tree.querySelectorAll('a.node-link')]);
    const at = links.indexOf(/** @type {HTMLElement} */ (document.activeElement));
    if (at < 0) return;
    const id = /** @type {string} */ (links[at].getAttribute('data-task'));
    /** @param {number} i */
    const go = (i) => {
      const next = links[Math.max(0, Math.min(links.length - 1, i))];
      for (const l of links) l.tabIndex = -1;
      next.tabIndex = 0;
      next.focus();
    };
    if (e.key === 'ArrowDown') go(at + 1);
    else if (e.key === 'ArrowUp') go(at - 1);
    else if (e.key === 'Home') go(0);
    else if (e.key === 'End') go(links.length - 1);
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
      const collapse = e.key === 'ArrowLeft';
      if (collapse === this.collapsed.has(id)) return;
      if (collapse) this.collapsed.add(id);
      else this.collapsed.delete(id);
      this.renderTree();
    } else return;
    e.preventDefault();
  }
}
