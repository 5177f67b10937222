// The events the page holds and what they mean: indexes by thread, run, task and sender; each task's
// lifecycle state; each agent's activity. Ingestion is time-sliced (a burst of thousands of events
// never blocks the page for long) and listeners hear one `Change` per slice.

import { payloadText, shortId, truncate } from './util.js';

/** @typedef {import('./types.js').ClutchEvent} ClutchEvent */
/** @typedef {import('./types.js').Task} Task */
/** @typedef {import('./types.js').TaskStateName} TaskStateName */
/** @typedef {import('./types.js').Scope} Scope */
/** @typedef {import('./types.js').Change} Change */
/** @typedef {import('./types.js').ToolCallState} ToolCallState */
/** @typedef {import('./types.js').Filter} Filter */

export const ORCHESTRATOR = 'agent:orchestrator';

/** The thread and run the daemon files its own bookkeeping under: agents' registrations and status
 * changes, agents' budget notices, refused signatures, registered schemas. */
export const SYSTEM_THREAD = 'thr_00000000000000000000000000';
export const SYSTEM_RUN = 'run_00000000000000000000000000';
const SYSTEM_TITLE = 'Daemon notices';

/** @param {string} id */
function isSystemScope(id) {
  return id === SYSTEM_THREAD || id === SYSTEM_RUN;
}

/** The message types that move a task through its lifecycle (folded into its card). */
export const LIFECYCLE = new Set([
  'task.request',
  'task.accept',
  'task.progress',
  'task.result',
  'task.error',
  'task.cancel',
  'task.timeout',
]);

/** Every message type of the protocol, for the filter menus. */
export const TYPES = [
  ...LIFECYCLE,
  'chat.message',
  'chat.system',
  'tool.call',
  'tool.result',
  'tool.error',
  'agent.register',
  'agent.heartbeat',
  'agent.update',
  'routing.decision',
  'routing.failure',
];

/** @type {Record<TaskStateName, number>} how far along a routed task's state is; it never moves back
 * within an attempt. Planned tasks and workflow roots do not rank: their states are set as the engine
 * sets them. */
const RANK = {
  requested: 0,
  queued: 1,
  routed: 2,
  accepted: 3,
  running: 4,
  retrying: 5,
  planning: 0,
  pending: 0,
  claimed: 3,
  in_progress: 4,
  blocked: 4,
  completed: 5,
  failed: 5,
  timed_out: 5,
  cancelled: 5,
};

/** The states after which nothing more happens to a task (a `retrying` task is routed again). */
const TERMINAL = new Set(['completed', 'failed', 'timed_out', 'cancelled']);

/** @param {TaskStateName} state */
export function isTerminal(state) {
  return TERMINAL.has(state);
}

/** `payload_type` of a workflow's root request, of a planned task's request, and of a planned task's move. */
export const WORKFLOW_PAYLOAD = 'clutch.workflow.v1';
export const PLANNED_PAYLOAD = 'clutch.workflow.task.v1';
const STATUS_PAYLOAD = 'clutch.workflow.status.v1';
/** `payload_type` of a holder's checkpoint, and of the daemon's note that a failed task will be routed again. */
export const CHECKPOINT_PAYLOAD = 'clutch.checkpoint.v1';
const RETRY_PAYLOAD = 'clutch.task.retry.v1';
/** `payload_type` of an LLM agent's record of one model call, and of its streamed text. */
export const LLM_CALL_PAYLOAD = 'clutch.llm.call.v1';
export const LLM_TEXT_PAYLOAD = 'clutch.llm.text.v1';

/** The statuses a planned task's `clutch.workflow.status.v1` may move it to. */
const PLANNED_STATUSES = new Set(['pending', 'claimed', 'in_progress', 'blocked', 'completed', 'failed']);

/** Work done per time slice before the page gets the main thread back. */
const SLICE_MS = 8;

/** @param {ClutchEvent} e */
function titleOf(e) {
  const named = workflowName(e) || toolCallName(e);
  if (named) return truncate(named, 120);
  const text = payloadText(e.payload);
  if (text) return truncate(text.replace(/\s+/g, ' ').trim(), 120);
  const keys = Object.keys(e.payload || {});
  return keys.length ? `${e.type} {${keys.slice(0, 3).join(', ')}}` : `${e.type} ${shortId(e.task_id)}`;
}

/**
 * What a workflow event names: a workflow (its root request) or a planned task, by the name the daemon
 * recorded; '' for any other event.
 * @param {ClutchEvent} e
 */
function workflowName(e) {
  if (e.type !== 'task.request') return '';
  if (e.payload_type === 'clutch.workflow.v1') {
    const w = /** @type {import('./api-types.js').Workflow} */ (e.payload);
    return typeof w.name === 'string' ? `workflow ${w.name}` : '';
  }
  if (e.payload_type === 'clutch.workflow.task.v1') {
    const t = /** @type {import('./api-types.js').PlannedTask} */ (e.payload);
    return typeof t.name === 'string' ? t.name : '';
  }
  return '';
}

/**
 * What a tool call names: `call mcp:files/read_file`; '' for any other event.
 * @param {ClutchEvent} e
 */
function toolCallName(e) {
  if (e.type !== 'tool.call') return '';
  const c = /** @type {import('./api-types.js').ToolCall} */ (/** @type {unknown} */ (e.payload));
  return typeof c.tool === 'string' ? `call ${c.tool}` : '';
}

/** @param {ClutchEvent} e @returns {string[]} */
function dependenciesOf(e) {
  const deps = e.meta?.depends_on ?? e.payload?.depends_on;
  return Array.isArray(deps) ? deps.filter((d) => typeof d === 'string') : [];
}

/**
 * Which machine a task follows, from its request: a workflow's root, a planned task, or a routed task.
 * @param {ClutchEvent} e a `task.request`
 * @returns {import('./types.js').Task['kind']}
 */
function kindOf(e) {
  if (e.payload_type === WORKFLOW_PAYLOAD) return 'workflow';
  if (e.payload_type === PLANNED_PAYLOAD) return 'workflow_task';
  return 'routed';
}

/**
 * Folds one event into a task's state, as the engine's views derive it (`core::view::TaskState`).
 * Events come in seq order. A routed task's state only moves forward within an attempt, and a new
 * attempt (a retry) starts its lifecycle again; a planned task moves as its events say; a workflow's
 * root gets its workflow's status from `workflowState` over its planned tasks (see `Store`).
 * @param {Task} t
 * @param {ClutchEvent} e
 */
export function applyToTask(t, e) {
  const p = e.payload || {};
  if (e.type === 'task.request' && t.kind === 'routed') t.kind = kindOf(e);
  if (e.type === 'task.progress' || e.type === 'task.result') addSpent(t, p.usage);
  if (e.type === 'task.progress') noteProgress(t, e);
  if (t.kind === 'workflow_task') return applyToPlanned(t, e);
  if (t.kind === 'workflow') return applyToRoot(t, e);
  const attempt = e.attempt || 1;
  const retry = attempt > t.attempt;
  if (retry) {
    // Delivered again (a redelivery, or routed again after a retryable error): what the last attempt
    // reported is history now, not the card's state.
    t.attempt = attempt;
    t.seen = { routed: false, accepted: false, progress: false };
    t.outcome = undefined;
    t.percent = undefined;
    t.progressMessage = undefined;
  }
  /** @param {TaskStateName} state */
  const move = (state) => {
    if (retry || t.state === 'retrying' || RANK[state] >= RANK[t.state]) t.state = state;
  };
  switch (e.type) {
    case 'task.request': {
      const target = e.to?.find((r) => (r.agent_id.startsWith('agent:') || r.agent_id.startsWith('user:')) && r.agent_id !== ORCHESTRATOR);
      if (e.parent_task_id) t.parent_task_id = e.parent_task_id;
      if (e.requires?.length) t.requires = e.requires;
      const deps = dependenciesOf(e);
      if (deps.length) t.dependsOn = deps;
      if (e.from.agent_id === ORCHESTRATOR) {
        if (target) t.assignee = target.agent_id;
        t.seen.routed = true;
        move('routed');
      } else {
        if (!t.requester) t.requester = e.from.agent_id;
        nameFrom(t, e);
        if (target) t.assignee = target.agent_id;
        if (retry) t.state = 'requested';
      }
      break;
    }
    case 'routing.decision':
      if (typeof p.selected === 'string') t.assignee = p.selected;
      t.routing = e;
      t.seen.routed = true;
      move('routed');
      break;
    case 'routing.failure':
      t.routing = e;
      // Not queued: the daemon's task.error that follows ends the task, as the engine has it.
      if (p.queued) move('queued');
      break;
    case 'task.accept':
      t.assignee = e.from.agent_id;
      t.seen.accepted = true;
      move('accepted');
      break;
    case 'task.progress': {
      if (!t.assignee && e.from.agent_id !== ORCHESTRATOR) t.assignee = e.from.agent_id;
      t.seen.progress = true;
      move('running');
      break;
    }
    case 'task.result':
      t.outcome = e;
      t.percent = 100;
      move('completed');
      break;
    case 'task.error':
      t.outcome = e;
      move('failed');
      break;
    case 'task.timeout':
      t.outcome = e;
      move('timed_out');
      break;
    case 'task.cancel':
      t.outcome = e;
      move('cancelled');
      break;
    case 'chat.system':
      // The daemon will route it again: failed, for now, is not the end.
      if (e.payload_type === RETRY_PAYLOAD && t.state === 'failed') t.state = 'retrying';
      break;
    default:
  }
}

/**
 * What a progress report adds to any task's card: its percent and words, a checkpoint, a model call
 * or the text streamed before it.
 * @param {Task} t
 * @param {ClutchEvent} e a `task.progress`
 */
function noteProgress(t, e) {
  const p = e.payload || {};
  const pct = typeof p.percent === 'number' ? p.percent : typeof p.pct === 'number' ? p.pct : undefined;
  if (pct !== undefined && !isTerminal(t.state)) t.percent = Math.max(0, Math.min(100, pct));
  if (typeof p.message === 'string') t.progressMessage = p.message;
  if (e.payload_type === CHECKPOINT_PAYLOAD) t.checkpoints.push(e);
  else if (e.payload_type === LLM_CALL_PAYLOAD) {
    t.llmCalls.push(e);
    t.streaming = undefined;
  } else if (e.payload_type === LLM_TEXT_PAYLOAD) {
    const turn = typeof p.turn === 'number' ? p.turn : 0;
    const text = typeof p.text === 'string' ? p.text : '';
    // A restarted stream (the provider was asked again) starts its text again.
    if (!t.streaming || t.streaming.turn !== turn || p.restarted) t.streaming = { turn, text };
    else t.streaming.text += text;
  }
}

/**
 * Names a task by its request: a workflow's or a planned task's name whoever sent it, else the
 * request's text from whoever asked (not a routed copy).
 * @param {Task} t
 * @param {ClutchEvent} e a `task.request`
 */
function nameFrom(t, e) {
  if (t.titleSet) return;
  t.title = titleOf(e);
  t.titleSet = true;
}

/**
 * A planned task of a workflow: pending at its request; claimed on its holder's accept; moved by the
 * daemon's status changes (pending again when released or its lease expired); completed by a result,
 * failed by an error, cancelled when its plan was replaced. Checkpoints and the holder's plan of the
 * task do not move it.
 * @param {Task} t
 * @param {ClutchEvent} e
 */
function applyToPlanned(t, e) {
  const p = e.payload || {};
  switch (e.type) {
    case 'task.request':
      if (e.parent_task_id) t.parent_task_id = e.parent_task_id;
      if (!t.requester) t.requester = e.from.agent_id;
      t.dependsOn = dependenciesOf(e);
      nameFrom(t, e);
      t.state = 'pending';
      break;
    case 'task.accept':
      t.assignee = e.from.agent_id;
      t.holder = e.from.agent_id;
      t.claimedAt = e.ts;
      t.seen.accepted = true;
      t.state = 'claimed';
      break;
    case 'task.progress':
      if (e.payload_type === STATUS_PAYLOAD && PLANNED_STATUSES.has(p.status)) {
        t.state = /** @type {TaskStateName} */ (p.status);
        t.statusReason = typeof p.reason === 'string' ? p.reason : typeof p.note === 'string' ? p.note : undefined;
        if (p.status === 'pending') {
          t.holder = undefined;
          t.claimedAt = undefined;
        }
      }
      t.seen.progress = true;
      break;
    case 'task.result':
      t.outcome = e;
      t.state = 'completed';
      break;
    case 'task.error':
      t.outcome = e;
      t.state = 'failed';
      break;
    case 'task.cancel':
      t.outcome = e;
      t.state = 'cancelled';
      break;
    default:
  }
}

/**
 * A workflow's root task: its name and creator; its plan; cancelled when it is. Its state otherwise is
 * its workflow's status, which `workflowState` derives from the planned tasks.
 * @param {Task} t
 * @param {ClutchEvent} e
 */
function applyToRoot(t, e) {
  switch (e.type) {
    case 'task.request':
      if (!t.requester) t.requester = e.from.agent_id;
      nameFrom(t, e);
      if (t.state === 'requested') t.state = 'planning';
      break;
    case 'task.cancel':
      t.outcome = e;
      t.state = 'cancelled';
      break;
    case 'task.result':
    case 'task.error':
      t.outcome = e;
      break;
    default:
  }
}

/**
 * A workflow's status, as the engine derives it (`core::workflow::book::Workflows::status`) over the
 * current plan's tasks (those not cancelled): none → planning; all completed → completed; a failed
 * task and nothing else that can run → failed; nothing held or claimable and something blocked →
 * blocked; else in progress.
 * @param {Task[]} planned the root's planned tasks, in the order they were stored
 * @param {(id: string) => Task | undefined} task
 * @returns {TaskStateName}
 */
export function workflowState(planned, task) {
  const items = planned.filter((t) => t.state !== 'cancelled');
  if (!items.length) return 'planning';
  if (items.every((t) => t.state === 'completed')) return 'completed';
  // Failed tasks, and those depending on a doomed one (stored order is topological).
  /** @type {Set<string>} */
  const doomed = new Set();
  for (const t of items) if (t.state === 'failed' || t.dependsOn.some((d) => doomed.has(d))) doomed.add(t.task_id);
  const held = (/** @type {Task} */ t) => t.state === 'claimed' || t.state === 'in_progress' || t.state === 'blocked';
  const active = items.some((t) => t.state === 'claimed' || t.state === 'in_progress');
  const ready = (/** @type {Task} */ t) => t.dependsOn.every((d) => task(d)?.state === 'completed');
  const available = items.some((t) => t.state === 'pending' && ready(t));
  const canRun = items.some((t) => held(t) || (t.state === 'pending' && !doomed.has(t.task_id)));
  if (items.some((t) => t.state === 'failed') && !canRun) return 'failed';
  if (!active && !available && items.some((t) => t.state === 'blocked')) return 'blocked';
  return 'in_progress';
}

/**
 * Adds a reported `usage` to the task's, read as the engine reads it (non-numbers count as 0).
 * @param {Task} t
 * @param {unknown} usage
 */
function addSpent(t, usage) {
  if (!usage || typeof usage !== 'object') return;
  const u = /** @type {Record<string, unknown>} */ (usage);
  /** @param {string} k */
  const num = (k) => (typeof u[k] === 'number' && Number.isFinite(u[k]) && /** @type {number} */ (u[k]) >= 0 ? /** @type {number} */ (u[k]) : 0);
  const spent = (t.usage ??= { tokens: 0, cost_usd: 0, requests: 0 });
  spent.tokens += typeof u.tokens === 'number' ? num('tokens') : num('input_tokens') + num('output_tokens');
  spent.cost_usd += num('cost_usd');
  spent.requests += num('requests');
}

/**
 * What the tasks spent, summed; undefined when none reported any usage.
 * @param {Task[]} tasks
 * @returns {import('./types.js').Spent | undefined}
 */
export function spentBy(tasks) {
  /** @type {import('./types.js').Spent | undefined} */
  let sum;
  for (const t of tasks) {
    if (!t.usage) continue;
    sum ??= { tokens: 0, cost_usd: 0, requests: 0 };
    sum.tokens += t.usage.tokens;
    sum.cost_usd += t.usage.cost_usd;
    sum.requests += t.usage.requests;
  }
  return sum;
}

/**
 * @param {ClutchEvent} e
 * @param {ClutchEvent[]} events
 * @returns {Task}
 */
function newTask(e, events) {
  return {
    task_id: e.task_id,
    run_id: e.run_id,
    thread_id: e.thread_id,
    parent_task_id: e.parent_task_id,
    state: 'requested',
    percent: undefined,
    progressMessage: undefined,
    requester: undefined,
    assignee: undefined,
    requires: [],
    title: `task ${shortId(e.task_id)}`,
    attempt: e.attempt || 1,
    routing: undefined,
    outcome: undefined,
    dependsOn: [],
    events,
    seen: { routed: false, accepted: false, progress: false },
    usage: undefined,
    kind: 'routed',
    holder: undefined,
    claimedAt: undefined,
    statusReason: undefined,
    checkpoints: [],
    llmCalls: [],
    streaming: undefined,
    planned: [],
  };
}

/** Whether an event changes task state (and so belongs to a task card). @param {ClutchEvent} e */
export function isTaskEvent(e) {
  return LIFECYCLE.has(e.type) || e.type === 'routing.decision' || e.type === 'routing.failure' || (e.type === 'chat.system' && e.payload_type === RETRY_PAYLOAD);
}

/** The daemon's notes about a tool call, by payload type. */
const CALL_NOTES = new Set(['clutch.tool.started.v1', 'clutch.approval.requested.v1', 'clutch.approval.decided.v1']);

/**
 * The tool call an event belongs to: a `tool.call`'s own id, the `call_id` of its answer (a
 * `tool.error` carries it in its `details`) and of the daemon's notes about it; '' for any other event.
 * @param {ClutchEvent} e
 */
export function callOf(e) {
  if (e.type === 'tool.call') return e.id;
  const relevant = e.type === 'tool.result' || e.type === 'tool.error' || (e.type === 'chat.system' && CALL_NOTES.has(e.payload_type || ''));
  const id = relevant ? (e.payload?.call_id ?? e.payload?.details?.call_id) : undefined;
  return typeof id === 'string' ? id : '';
}

/**
 * Files an event of a tool call under its role.
 * @param {ToolCallState} c
 * @param {ClutchEvent} e
 */
function applyToCall(c, e) {
  if (e.type === 'tool.call') c.call = e;
  else if (e.type === 'tool.result' || e.type === 'tool.error') c.answer = e;
  else if (e.payload_type === 'clutch.approval.requested.v1') c.requested = e;
  else if (e.payload_type === 'clutch.approval.decided.v1') c.decided = e;
  else if (!c.started.includes(e)) c.started = [...c.started, e].sort((a, b) => a.seq - b.seq);
}

const searchText = new WeakMap();

/**
 * Whether an event passes a filter (type, sender, task, free text over the whole message).
 * @param {ClutchEvent} e
 * @param {Filter} f
 */
export function matches(e, f) {
  if (f.type && e.type !== f.type && !(f.type.endsWith('.*') && e.type.startsWith(f.type.slice(0, -1)))) return false;
  if (f.agent && e.from.agent_id !== f.agent && !e.to?.some((r) => r.agent_id === f.agent)) return false;
  if (f.task && e.task_id !== f.task && e.parent_task_id !== f.task) return false;
  if (f.q) {
    let text = searchText.get(e);
    if (text === undefined) {
      text = `${e.type} ${e.from.agent_id} ${e.payload_type || ''} ${JSON.stringify(e.payload)} ${e.id} ${e.task_id}`.toLowerCase();
      searchText.set(e, text);
    }
    if (!f.q.toLowerCase().split(/\s+/).every((word) => text.includes(word))) return false;
  }
  return true;
}

/** Whether a filter filters anything. @param {Filter} f */
export function isEmptyFilter(f) {
  return !f.type && !f.agent && !f.task && !f.q;
}

/**
 * Inserts sorted `older` (all seqs new to `into`) into sorted `into`, in place.
 * @param {ClutchEvent[]} into
 * @param {ClutchEvent[]} older
 */
function mergeInto(into, older) {
  if (!older.length) return;
  /** @type {ClutchEvent[]} */
  let merged;
  if (!into.length || older[older.length - 1].seq < into[0].seq) {
    merged = older.concat(into);
  } else {
    merged = [];
    let i = 0;
    let j = 0;
    while (i < into.length || j < older.length) {
      if (j >= older.length || (i < into.length && into[i].seq < older[j].seq)) merged.push(into[i++]);
      else merged.push(older[j++]);
    }
  }
  // Refill in place (views hold this array); in slices, as one spread of 100k arguments is too many.
  into.length = 0;
  for (let k = 0; k < merged.length; k += 10000) into.push(...merged.slice(k, k + 10000));
}

export class Store {
  constructor() {
    /** @type {Set<(change: Change) => void>} */
    this.listeners = new Set();
    /** @type {ClutchEvent[]} */
    this.queue = [];
    this.queueAt = 0;
    this.draining = false;
    /** When ingestion last handled a large batch (views render less often while events pour in). */
    this.lastBurst = -Infinity;
    /** @type {ClutchEvent[]} every event held, in seq order */
    this.events = [];
    /** @type {Map<number, ClutchEvent>} */
    this.bySeq = new Map();
    /** @type {Map<string, Scope>} */
    this.threads = new Map();
    /** @type {Map<string, Scope>} */
    this.runs = new Map();
    /** @type {Map<string, ClutchEvent[]>} every event about a task, whatever its type */
    this.byTask = new Map();
    /** @type {Map<string, ClutchEvent[]>} events by sender */
    this.bySender = new Map();
    /** @type {Map<string, Task>} tasks that have lifecycle events */
    this.tasks = new Map();
    /** @type {Map<string, ToolCallState>} tool calls by the call's id */
    this.calls = new Map();
    /** @type {Map<string, Set<string>>} run id → its task ids */
    this.runTasks = new Map();
    /** Every event with a seq above this is held (the stream started here); older ones load on demand. */
    this.floor = 0;
    /** The highest seq held. */
    this.head = 0;
    /** @type {Set<string>} scopes whose events from before `floor` have been loaded */
    this.historyLoaded = new Set();
  }

  /** Forgets every event and everything derived from them. */
  clear() {
    this.events = [];
    for (const m of [this.bySeq, this.threads, this.runs, this.byTask, this.bySender, this.tasks, this.calls, this.runTasks, this.historyLoaded]) m.clear();
    this.floor = 0;
    this.head = 0;
  }

  /** @param {(change: Change) => void} fn @returns {() => void} */
  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** @returns {Change} */
  static emptyChange() {
    return { events: [], tasks: new Set(), calls: new Set(), scopes: new Set(), history: false, reset: false };
  }

  /** @param {Change} change */
  emit(change) {
    for (const fn of this.listeners) fn(change);
  }

  /** Forgets everything and starts again above `floor`. @param {number} floor */
  reset(floor) {
    this.queue = [];
    this.queueAt = 0;
    this.clear();
    this.floor = floor;
    this.head = floor;
    const change = Store.emptyChange();
    change.reset = true;
    this.emit(change);
  }

  /** Queues a live event (newer than every one held); ingested in time slices. @param {ClutchEvent} e */
  enqueue(e) {
    this.queue.push(e);
    if (!this.draining) {
      this.draining = true;
      setTimeout(() => this.drain(), 0);
    }
  }

  /** Whether events are pouring in (a backlog, or a large batch a moment ago). */
  busy() {
    return this.backlog > 0 || performance.now() - this.lastBurst < 250;
  }

  /** How many queued events wait for ingestion. */
  get backlog() {
    return this.queue.length - this.queueAt;
  }

  drain() {
    const change = Store.emptyChange();
    const deadline = performance.now() + SLICE_MS;
    while (this.queueAt < this.queue.length && performance.now() < deadline) {
      const end = Math.min(this.queue.length, this.queueAt + 256);
      for (; this.queueAt < end; this.queueAt++) this.ingest(this.queue[this.queueAt], change);
    }
    if (change.events.length >= 64) this.lastBurst = performance.now();
    if (this.queueAt >= this.queue.length) {
      this.queue = [];
      this.queueAt = 0;
      this.draining = false;
    } else {
      setTimeout(() => this.drain(), 0);
    }
    if (change.events.length) this.emit(change);
  }

  /** Ingests events in order at once (replay, tests). @param {ClutchEvent[]} events */
  addNow(events) {
    const change = Store.emptyChange();
    for (const e of events) this.ingest(e, change);
    if (change.events.length) this.emit(change);
  }

  /**
   * Ingests one event newer than all held.
   * @param {ClutchEvent} e
   * @param {Change} change
   */
  ingest(e, change) {
    if (this.bySeq.has(e.seq)) return;
    this.bySeq.set(e.seq, e);
    this.events.push(e);
    if (e.seq > this.head) this.head = e.seq;
    change.events.push(e);
    this.index(e, change, false);
  }

  /**
   * Adds an event to every index; `older` when it predates events already held (history).
   * @param {ClutchEvent} e
   * @param {Change} change
   * @param {boolean} older
   */
  index(e, change, older) {
    this.scope(this.threads, 'thread', e, older);
    this.scope(this.runs, 'run', e, older);
    change.scopes.add(e.thread_id).add(e.run_id).add(e.task_id).add(e.from.agent_id);
    listFor(this.byTask, e.task_id, e, older);
    listFor(this.bySender, e.from.agent_id, e, older);
    if (isTaskEvent(e)) {
      let t = this.tasks.get(e.task_id);
      if (!t) {
        t = newTask(e, /** @type {ClutchEvent[]} */ (this.byTask.get(e.task_id)));
        this.tasks.set(e.task_id, t);
        let set = this.runTasks.get(e.run_id);
        if (!set) this.runTasks.set(e.run_id, (set = new Set()));
        set.add(e.task_id);
      }
      if (!older) {
        applyToTask(t, e);
        if (t.kind === 'workflow_task') this.deriveRoot(t, change);
      }
      change.tasks.add(e.task_id);
      if (e.parent_task_id) change.tasks.add(e.parent_task_id);
    }
    const callId = callOf(e);
    if (callId) {
      let c = this.calls.get(callId);
      if (!c) this.calls.set(callId, (c = { id: callId, call: undefined, requested: undefined, decided: undefined, started: [], answer: undefined }));
      applyToCall(c, e);
      change.calls.add(callId);
    }
  }

  /**
   * @param {Map<string, Scope>} map
   * @param {'thread' | 'run'} kind
   * @param {ClutchEvent} e
   * @param {boolean} older
   */
  scope(map, kind, e, older) {
    const id = kind === 'thread' ? e.thread_id : e.run_id;
    let s = map.get(id);
    if (!s) {
      // The daemon's own scope is named for what it holds, not by its first event (a registration).
      const system = isSystemScope(id);
      s = { kind, id, events: [], title: system ? SYSTEM_TITLE : '', titleWeak: false, lastTs: e.ts, lastSeq: e.seq };
      map.set(id, s);
    }
    if (!e.type.startsWith('agent.')) s.listed = true;
    if (older) return; // merged and retitled by addHistory
    s.events.push(e);
    s.lastTs = e.ts;
    s.lastSeq = e.seq;
    if (!s.title || (s.titleWeak && titleWorthy(e, kind))) {
      s.title = titleOf(e);
      s.titleWeak = !titleWorthy(e, kind);
    }
  }

  /**
   * The events of a scope, in seq order (a shared array: do not change it).
   * @param {'all' | 'thread' | 'run' | 'task' | 'agent'} kind
   * @param {string} [id]
   * @returns {ClutchEvent[]}
   */
  eventsOf(kind, id = '') {
    switch (kind) {
      case 'thread':
        return this.threads.get(id)?.events || [];
      case 'run':
        return this.runs.get(id)?.events || [];
      case 'task':
        return this.byTask.get(id) || [];
      case 'agent':
        return this.bySender.get(id) || [];
      default:
        return this.events;
    }
  }

  /**
   * Files a planned task under its workflow's root and gives the root its workflow's status again.
   * @param {Task} t a planned task
   * @param {Change} change
   */
  deriveRoot(t, change) {
    const root = t.parent_task_id ? this.tasks.get(t.parent_task_id) : undefined;
    if (!root || root.kind !== 'workflow') return;
    if (!root.planned.includes(t.task_id)) root.planned.push(t.task_id);
    if (root.state !== 'cancelled') {
      root.state = workflowState(
        root.planned.map((id) => /** @type {Task} */ (this.tasks.get(id))),
        (id) => this.tasks.get(id),
      );
    }
    change.tasks.add(root.task_id);
  }

  /** The tasks of a run. @param {string} runId @returns {Task[]} */
  tasksOf(runId) {
    const ids = this.runTasks.get(runId);
    if (!ids) return [];
    return [...ids].map((id) => /** @type {Task} */ (this.tasks.get(id)));
  }

  /**
   * Inserts events older than some already held (loaded on demand for one scope), time-sliced, then
   * re-derives the tasks and titles they touch.
   * @param {ClutchEvent[]} events
   */
  async addHistory(events) {
    const fresh = events.filter((e) => !this.bySeq.has(e.seq)).sort((a, b) => a.seq - b.seq);
    if (!fresh.length) return;
    const change = Store.emptyChange();
    change.history = true;
    /** @type {Map<ClutchEvent[], ClutchEvent[]>} scope list → its older events */
    const pending = new Map();
    /** @param {ClutchEvent[] | undefined} list @param {ClutchEvent} e */
    const later = (list, e) => {
      if (!list) return;
      let older = pending.get(list);
      if (!older) pending.set(list, (older = []));
      older.push(e);
    };
    let deadline = performance.now() + SLICE_MS;
    for (const e of fresh) {
      if (performance.now() > deadline) {
        await new Promise((r) => setTimeout(r, 0));
        deadline = performance.now() + SLICE_MS;
      }
      if (this.bySeq.has(e.seq)) continue;
      this.bySeq.set(e.seq, e);
      const known = {
        thread: this.threads.has(e.thread_id),
        run: this.runs.has(e.run_id),
        task: this.byTask.has(e.task_id),
        sender: this.bySender.has(e.from.agent_id),
      };
      this.index(e, change, true);
      // New lists got `e` pushed; lists that already held newer events get it merged below.
      const thread = /** @type {Scope} */ (this.threads.get(e.thread_id));
      const run = /** @type {Scope} */ (this.runs.get(e.run_id));
      later(thread.events, e);
      later(run.events, e);
      if (known.task) later(this.byTask.get(e.task_id), e);
      if (known.sender) later(this.bySender.get(e.from.agent_id), e);
      if (!known.thread) thread.lastTs = e.ts;
      if (!known.run) run.lastTs = e.ts;
      change.events.push(e);
    }
    pending.set(this.events, change.events.slice());
    for (const [list, older] of pending) mergeInto(list, older);
    const touched = [...change.tasks];
    for (const id of touched) {
      const t = this.tasks.get(id);
      if (!t) continue;
      const fresh = newTask(t.events[0], t.events);
      for (const e of t.events) if (isTaskEvent(e)) applyToTask(fresh, e);
      this.tasks.set(id, Object.assign(t, fresh));
    }
    // Each workflow touched: its plan again from its planned tasks in their stored order.
    /** @type {Set<Task>} */
    const roots = new Set();
    for (const id of touched) {
      const t = this.tasks.get(id);
      const root = t?.kind === 'workflow' ? t : t?.kind === 'workflow_task' && t.parent_task_id ? this.tasks.get(t.parent_task_id) : undefined;
      if (root?.kind === 'workflow') roots.add(root);
    }
    const bySeq = (/** @type {Task} */ a, /** @type {Task} */ b) => (a.events[0]?.seq ?? 0) - (b.events[0]?.seq ?? 0);
    for (const root of roots) {
      root.planned = [];
      const planned = this.tasksOf(root.run_id).filter((t) => t.kind === 'workflow_task' && t.parent_task_id === root.task_id).sort(bySeq);
      for (const t of planned) this.deriveRoot(t, change);
    }
    for (const map of [this.threads, this.runs]) {
      for (const s of map.values()) {
        if (!change.scopes.has(s.id)) continue;
        const first = s.events.find((e) => titleWorthy(e, s.kind)) || s.events[0];
        if (first && !isSystemScope(s.id)) s.title = titleOf(first);
        const last = s.events[s.events.length - 1];
        s.lastTs = last.ts;
        s.lastSeq = last.seq;
      }
    }
    this.emit(change);
  }
}

/**
 * What names a thread (its first chat message, else its first request) or a run (its first top-level
 * request, else its first chat message).
 * @param {ClutchEvent} e
 * @param {'thread' | 'run'} kind
 */
function titleWorthy(e, kind) {
  if (kind === 'run') return e.type === 'task.request' && !e.parent_task_id && e.from.agent_id !== ORCHESTRATOR;
  return e.type === 'chat.message' || (e.type === 'task.request' && e.from.agent_id !== ORCHESTRATOR);
}

/**
 * @param {Map<string, ClutchEvent[]>} map
 * @param {string} key
 * @param {ClutchEvent} e
 * @param {boolean} older
 */
function listFor(map, key, e, older) {
  const list = map.get(key);
  if (!list) map.set(key, [e]);
  else if (!older) list.push(e);
}
