// A workflow in the run view, as Temporal and LangGraph Studio show work: its name and status, and its
// plan as a graph (a column per depth of dependency, an edge from each dependency to its dependant),
// each planned task with its name, live state, holder and checkpoints, linked to its own view. Drawn
// from the store's fold of the run's events, so it moves as they arrive.

import { append, h, nameOf } from '../util.js';
import { stateChip, STATE_LABEL } from '../render/events.js';

/** @typedef {import('../types.js').Task} Task */

/** A node's size and the gaps between nodes, in pixels. */
const NODE_W = 230;
const NODE_H = 56;
const GAP_X = 44;
const GAP_Y = 12;

export class WorkflowPanel {
  /**
   * @param {import('../store.js').Store} store
   * @param {string} runId
   * @param {(taskId: string, runId: string) => string} taskHref
   */
  constructor(store, runId, taskHref) {
    this.store = store;
    this.runId = runId;
    this.taskHref = taskHref;
    this.selected = '';
    this.el = h('section', { class: 'workflow-panel', 'aria-label': 'workflow', hidden: true });
  }

  /** The run's workflow root, if the run holds a workflow. */
  root() {
    return this.store.tasksOf(this.runId).find((t) => t.kind === 'workflow');
  }

  /** @param {string} selected the task in view ('' for none) */
  refresh(selected = this.selected) {
    this.selected = selected;
    const root = this.root();
    this.el.hidden = !root;
    if (!root) return;
    const planned = root.planned.map((id) => /** @type {Task} */ (this.store.tasks.get(id))).filter((t) => t && t.state !== 'cancelled');
    const done = planned.filter((t) => t.state === 'completed').length;
    this.el.dataset.state = root.state;
    this.el.replaceChildren();
    append(this.el, [
      h(
        'div',
        { class: 'workflow-head' },
        h('strong', null, root.title),
        stateChip(root.state),
        root.requester && h('span', { class: 'muted' }, `created by ${nameOf(root.requester)}`),
        h('span', { class: 'muted count' }, planned.length ? `${done} of ${planned.length} tasks completed` : 'no plan yet'),
      ),
      planned.length > 0 && this.graph(planned),
    ]);
  }

  /**
   * The plan as a graph: each task in the column after its deepest dependency's.
   * @param {Task[]} planned in stored order (dependencies first)
   */
  graph(planned) {
    /** @type {Map<string, number>} */
    const depth = new Map();
    for (const t of planned) depth.set(t.task_id, Math.max(-1, ...t.dependsOn.map((d) => depth.get(d) ?? -1)) + 1);
    /** @type {number[]} */
    const rows = [];
    /** @type {Map<string, {x: number, y: number}>} */
    const at = new Map();
    for (const t of planned) {
      const col = /** @type {number} */ (depth.get(t.task_id));
      const row = rows[col] ?? 0;
      rows[col] = row + 1;
      at.set(t.task_id, { x: col * (NODE_W + GAP_X), y: row * (NODE_H + GAP_Y) });
    }
    const width = rows.length * (NODE_W + GAP_X) - GAP_X;
    const height = Math.max(...rows) * (NODE_H + GAP_Y) - GAP_Y;
    const ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('class', 'edges');
    svg.setAttribute('width', String(width));
    svg.setAttribute('height', String(height));
    svg.setAttribute('aria-hidden', 'true');
    for (const t of planned) {
      const to = /** @type {{x: number, y: number}} */ (at.get(t.task_id));
      for (const d of t.dependsOn) {
        const from = at.get(d);
        if (!from) continue;
        const [x1, y1, x2, y2] = [from.x + NODE_W, from.y + NODE_H / 2, to.x, to.y + NODE_H / 2];
        const path = document.createElementNS(ns, 'path');
        path.setAttribute('d', `M${x1},${y1} C${x1 + GAP_X / 2},${y1} ${x2 - GAP_X / 2},${y2} ${x2},${y2}`);
        if (this.store.tasks.get(d)?.state === 'completed') path.setAttribute('class', 'done');
        svg.appendChild(path);
      }
    }
    const nodes = planned.map((t) => {
      const p = /** @type {{x: number, y: number}} */ (at.get(t.task_id));
      const deps = t.dependsOn.map((d) => this.store.tasks.get(d)?.title || d);
      return h(
        'a',
        {
          class: `plan-node state-${t.state}${t.task_id === this.selected ? ' selected' : ''}`,
          href: this.taskHref(t.task_id, t.run_id),
          'data-task': t.task_id,
          'data-state': t.state,
          title: `${t.title}: ${STATE_LABEL[t.state]}${deps.length ? ` (after ${deps.join(', ')})` : ''}`,
          style: { left: `${p.x}px`, top: `${p.y}px`, width: `${NODE_W}px`, height: `${NODE_H}px` },
        },
        h('span', { class: 'plan-name' }, t.title),
        h(
          'span',
          { class: 'plan-sub' },
          stateChip(t.state),
          t.holder && h('span', { class: 'plan-holder' }, nameOf(t.holder)),
          t.checkpoints.length > 0 && h('span', { class: 'plan-checkpoints' }, `${t.checkpoints.length} checkpoint${t.checkpoints.length === 1 ? '' : 's'}`),
        ),
      );
    });
    return h('div', { class: 'plan-scroll' }, h('div', { class: 'plan-graph', role: 'group', 'aria-label': 'plan', style: { height: `${height}px`, width: `${width}px` } }, svg, nodes));
  }
}
