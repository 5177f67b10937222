// How each kind of event looks in a timeline: chat as conversation, a task as one card whose state
// changes in place, a tool call as one card (its state, arguments, approval history and answer),
// tool calls and results shown one by one as collapsible JSON, routing decisions as a table of
// candidates and scores, errors highlighted with their code and retryable flag.

import { h, nameOf, shortId, timeEl, payloadText, spentText } from '../util.js';
import { barEl } from '../components/elements.js';
import { payloadBlock, renderPayload, rawJson, hasRenderer } from './payloads.js';
import { href } from '../router.js';
import { ORCHESTRATOR, isTerminal } from '../store.js';

/** @typedef {import('../types.js').ClutchEvent} ClutchEvent */
/** @typedef {import('../types.js').Task} Task */

/**
 * @typedef {object} RenderContext
 * @property {import('../store.js').Store} store
 * @property {(taskId: string, runId: string) => string} taskHref where a task link leads
 */

/** A stable colour for a sender. @param {string} id */
function hue(id) {
  let x = 0;
  for (let i = 0; i < id.length; i++) x = (x * 31 + id.charCodeAt(i)) >>> 0;
  return x % 360;
}

/** @param {string} id */
export function avatar(id) {
  const el = h('span', { class: 'avatar', 'aria-hidden': 'true' }, nameOf(id).slice(0, 1).toUpperCase());
  el.style.setProperty('--hue', String(hue(id)));
  if (id.startsWith('user:')) el.classList.add('avatar-user');
  return el;
}

/** A link to an agent's page, or a person's name. @param {string} id */
export function who(id) {
  if (id.startsWith('agent:')) return h('a', { class: 'who', href: href.agent(id), title: id }, nameOf(id));
  return h('span', { class: 'who who-user', title: id }, nameOf(id));
}

/** @param {ClutchEvent} e @param {RenderContext} ctx */
function header(e, ctx) {
  const to = (e.to || []).map((r) => r.agent_id);
  return h(
    'div',
    { class: 'ev-head' },
    who(e.from.agent_id),
    // A framework team's member speaking through its agent (an adapter's `speaker`), and the framework.
    typeof e.payload?.speaker === 'string' && h('span', { class: 'speaker', title: 'the team member who said it' }, ` · ${e.payload.speaker}`),
    typeof e.meta?.framework === 'string' && h('span', { class: 'ptype framework', title: 'written by this framework adapter' }, e.meta.framework),
    to.length > 0 && h('span', { class: 'to' }, ' → ', to.map((t, i) => [i ? ', ' : '', who(t)])),
    h('span', { class: `type-badge type-${e.type.split('.')[0]}` }, e.type),
    e.payload_type && h('span', { class: 'ptype' }, e.payload_type),
    h('a', { class: 'task-link', href: ctx.taskHref(e.task_id, e.run_id), title: e.task_id }, shortId(e.task_id)),
    (e.attempt || 1) > 1 && h('span', { class: 'attempt' }, `attempt ${e.attempt}`),
    h('span', { class: 'meta' }, timeEl(e.ts), h('span', { class: 'seq', title: `seq ${e.seq}` }, `#${e.seq}`)),
  );
}

/** @param {ClutchEvent} e */
export function errorBlock(e) {
  const p = e.payload || {};
  return h(
    'div',
    { class: 'error-block', role: 'group', 'aria-label': `${e.type} ${p.code || ''}` },
    h('span', { class: 'error-code' }, String(p.code || 'ERROR')),
    h(
      'span',
      { class: `retryable ${p.retryable ? 'yes' : 'no'}` },
      p.retryable ? 'retryable' : 'not retryable',
    ),
    h('span', { class: 'error-message' }, String(p.message || '')),
    p.details !== undefined && rawJson(p.details, 'details'),
  );
}

/** @param {ClutchEvent} e */
function routingTable(e) {
  const p = e.payload || {};
  const scores = p.scores && typeof p.scores === 'object' ? p.scores : {};
  const excluded = p.excluded && typeof p.excluded === 'object' ? Object.entries(p.excluded) : [];
  const candidates = [...new Set([...(Array.isArray(p.candidates) ? p.candidates : []), ...Object.keys(scores)])];
  candidates.sort((a, b) => (Number(scores[b]) || 0) - (Number(scores[a]) || 0));
  return h(
    'div',
    { class: 'routing' },
    h('p', null, 'Selected ', p.selected ? who(String(p.selected)) : h('em', null, 'nobody'), p.reason && ` — ${p.reason}`),
    candidates.length > 0 &&
      h(
        'table',
        { class: 'scores' },
        h('thead', null, h('tr', null, h('th', null, 'candidate'), h('th', null, 'score'))),
        h(
          'tbody',
          null,
          candidates.map((c) =>
            h(
              'tr',
              { class: c === p.selected ? 'selected' : '' },
              h('td', null, who(String(c)), c === p.selected && h('span', { class: 'chosen' }, ' ✓ selected')),
              // `|| 0` turns a -0 into 0 (no "-0.000").
              h('td', { class: 'num' }, typeof scores[c] === 'number' ? (scores[c] || 0).toFixed(3) : '—'),
            ),
          ),
        ),
      ),
    // The agents the router left out and why (the daemon's `excluded`), folded: with many agents
    // registered the list is long.
    excluded.length > 0 &&
      h(
        'details',
        { class: 'excluded-list' },
        h('summary', { class: 'muted' }, `${excluded.length} excluded`),
        h(
          'table',
          { class: 'scores' },
          h('tbody', null, excluded.map(([id, why]) => h('tr', { class: 'excluded' }, h('td', null, who(id)), h('td', { class: 'why' }, String(why))))),
        ),
      ),
  );
}

/** @param {ClutchEvent} e */
function routingFailure(e) {
  const p = e.payload || {};
  const excluded = p.excluded && typeof p.excluded === 'object' ? Object.entries(p.excluded) : [];
  return h(
    'div',
    { class: 'routing routing-failed' },
    h('p', null, h('strong', null, 'No agent matched'), p.reason && ` — ${p.reason}`, p.queued ? ' (queued until one can take it)' : ''),
    excluded.length > 0 &&
      h(
        'table',
        { class: 'scores' },
        h('thead', null, h('tr', null, h('th', null, 'agent'), h('th', null, 'excluded because'))),
        h('tbody', null, excluded.map(([id, why]) => h('tr', null, h('td', null, who(id)), h('td', null, String(why))))),
      ),
  );
}

/** @param {Record<string, any>} p */
function toolName(p) {
  for (const k of ['tool', 'name', 'tool_name', 'method']) if (typeof p?.[k] === 'string') return p[k];
  // A tool.error names its tool in its details.
  if (typeof p?.details?.tool === 'string') return p.details.tool;
  return 'tool';
}

/**
 * A result's time and the start of its first text block (the daemon's answers: `duration_ms`,
 * `content` as the tool gave it).
 * @param {Record<string, any>} p
 */
function resultSummary(p) {
  const time = typeof p?.duration_ms === 'number' ? `${p.duration_ms} ms` : '';
  const first = Array.isArray(p?.content) ? p.content.find((/** @type {any} */ c) => typeof c?.text === 'string') : undefined;
  const text = first ? first.text.replace(/\s+/g, ' ') : '';
  return [time, text.length > 90 ? `${text.slice(0, 89)}…` : text].filter(Boolean).join(' — ');
}

/** A call's arguments, under whichever name its payload gives them. @param {Record<string, any>} p */
function argsOf(p) {
  return p?.args ?? p?.arguments ?? p?.input ?? p?.params;
}

/** @param {Record<string, any>} p */
function argsSummary(p) {
  const text = JSON.stringify(argsOf(p) ?? p);
  return text && text.length > 90 ? `${text.slice(0, 89)}…` : text || '';
}

/**
 * A timeline row for one event (a task card is `renderTaskCard`).
 * @param {ClutchEvent} e
 * @param {RenderContext} ctx
 * @returns {HTMLElement}
 */
export function renderEvent(e, ctx) {
  const kind = e.type.split('.')[0];
  const row = h('article', { class: `ev ev-${kind} ev-${e.type.replace('.', '-')}`, 'data-seq': String(e.seq), 'data-type': e.type });
  const text = payloadText(e.payload);
  switch (e.type) {
    case 'chat.message':
      row.append(
        avatar(e.from.agent_id),
        h(
          'div',
          { class: 'ev-main' },
          header(e, ctx),
          text && h('div', { class: 'chat-text' }, text),
          hasRenderer(e) ? payloadBlock(e) : !text && rawJson(e.payload),
          attachments(e),
        ),
      );
      return row;
    case 'chat.system':
      row.append(h('span', { class: 'avatar-spacer' }), h('div', { class: 'ev-main system' }, header(e, ctx), renderPayload(e) || (text ? h('p', null, text) : rawJson(e.payload, 'payload', true))));
      return row;
    case 'tool.call':
    case 'tool.result':
    case 'tool.error':
      row.append(avatar(e.from.agent_id), h('div', { class: 'ev-main' }, header(e, ctx), e.type === 'tool.error' && errorBlock(e), toolDetails(e)));
      return row;
    case 'routing.decision':
      row.append(avatar(e.from.agent_id), h('div', { class: 'ev-main' }, header(e, ctx), routingTable(e)));
      return row;
    case 'routing.failure':
      row.append(avatar(e.from.agent_id), h('div', { class: 'ev-main' }, header(e, ctx), routingFailure(e)));
      return row;
    case 'task.error':
    case 'task.timeout':
    case 'task.cancel':
      row.append(avatar(e.from.agent_id), h('div', { class: 'ev-main' }, header(e, ctx), e.type === 'task.error' ? errorBlock(e) : text && h('p', null, text), rawJson(e.payload)));
      return row;
    case 'task.progress': {
      const p = e.payload || {};
      const pct = typeof p.percent === 'number' ? p.percent : typeof p.pct === 'number' ? p.pct : undefined;
      row.append(
        avatar(e.from.agent_id),
        h(
          'div',
          { class: 'ev-main compact' },
          header(e, ctx),
          // What the step says: `message` (as the README's tour sends it) or `text` (the Python client's `progress`).
          h('div', { class: 'progress-line' }, pct !== undefined && barEl(pct, 100, 'progress', `${Math.round(pct)}%`, 'plain'), (p.message ?? p.text) && h('span', null, String(p.message ?? p.text))),
        ),
      );
      return row;
    }
    default:
      row.append(
        kind === 'agent' ? h('span', { class: 'avatar-spacer' }) : avatar(e.from.agent_id),
        h('div', { class: `ev-main${kind === 'agent' ? ' compact' : ''}` }, header(e, ctx), text && !hasRenderer(e) && h('div', { class: 'chat-text' }, text), payloadBlock(e)),
      );
      return row;
  }
}

/**
 * A tool call, result or error folded to one line (the tool, the arguments or the answer's start),
 * its whole payload on opening.
 * @param {ClutchEvent} e
 */
function toolDetails(e) {
  const p = e.payload || {};
  const mark = e.type === 'tool.call' ? '▸ call' : e.type === 'tool.result' ? '✓ result' : '✗ error';
  const details = h(
    'details',
    { class: 'tool' },
    h('summary', null, h('span', { class: 'tool-mark' }, mark), ' ', h('code', null, toolName(p)), ' ', h('span', { class: 'muted mono' }, e.type === 'tool.call' ? argsSummary(p) : e.type === 'tool.result' ? resultSummary(p) : '')),
  );
  details.addEventListener('toggle', () => {
    if (details.open && details.childElementCount === 1) details.append(payloadBlockOpen(e));
  });
  return details;
}

/**
 * Where a tool call stands, from its events: a key for styling and tests, and words.
 * @param {import('../types.js').ToolCallState} c
 * @returns {{key: string, label: string}}
 */
function callState(c) {
  const a = c.answer;
  if (a?.type === 'tool.result') return { key: 'done', label: 'done' };
  if (a?.type === 'tool.error') {
    const code = String(a.payload?.code || '');
    if (code === 'TOOL_DENIED') return c.decided?.payload?.decision === 'expired' ? { key: 'expired', label: 'expired' } : { key: 'denied', label: 'denied' };
    if (code === 'TOOL_IN_DOUBT') return { key: 'in-doubt', label: 'in doubt' };
    return { key: 'failed', label: 'failed' };
  }
  if (c.requested && !c.decided) return { key: 'waiting', label: 'waiting for approval' };
  if (c.started.length) return { key: 'running', label: 'running' };
  const decision = c.decided?.payload?.decision;
  if (decision === 'approved') return { key: 'approved', label: 'approved' };
  if (decision === 'denied' || decision === 'expired') return { key: decision, label: decision };
  return { key: 'called', label: 'called' };
}

/**
 * The card of a tool call: the tool, its caller and state (updated in place as its events arrive),
 * its arguments, its approval history (with Approve and Deny while it waits), its attempts, and its
 * answer with the call's duration.
 * @param {import('../types.js').ToolCallState} c
 * @param {RenderContext} ctx
 */
export function renderCallCard(c, ctx) {
  const e = /** @type {ClutchEvent} */ (c.call);
  const p = e.payload || {};
  const state = callState(c);
  const ms = c.answer?.payload?.duration_ms;
  const requested = /** @type {import('../api-types.js').ApprovalRequested | undefined} */ (/** @type {unknown} */ (c.requested?.payload));
  return h(
    'article',
    { class: `ev ev-tool ev-tool-call call-card call-${state.key}`, 'data-seq': String(e.seq), 'data-type': e.type, 'data-call': c.id, 'data-state': state.key },
    avatar(e.from.agent_id),
    h(
      'div',
      { class: 'ev-main' },
      header(e, ctx),
      h(
        'div',
        { class: 'card-line' },
        h('span', { class: `state call-state state-${state.key}` }, state.label),
        h('code', { class: 'call-tool' }, toolName(p)),
        typeof ms === 'number' && h('span', { class: 'muted call-duration' }, `${ms} ms`),
        c.started.length > 1 && h('span', { class: 'attempt' }, `${c.started.length} attempts`),
      ),
      // While it waits, the request with its buttons (it shows the arguments); then the history.
      c.requested && !c.decided ? renderPayload(c.requested) : rawJson(argsOf(p) ?? p, 'arguments'),
      c.decided &&
        h(
          'ol',
          { class: 'approval-history' },
          requested && h('li', { class: 'muted' }, 'asked for approval', requested.reason === 'destructive' ? ' (it may destroy and is not read-only)' : ' (the policy asks for it)', ' ', c.requested && timeEl(c.requested.ts)),
          h('li', null, renderPayload(c.decided), ' ', timeEl(c.decided.ts)),
        ),
      c.started.map((s) => renderPayload(s)),
      c.answer?.type === 'tool.error' && errorBlock(c.answer),
      c.answer && toolDetails(c.answer),
      c.answer && attachments(c.answer),
    ),
  );
}

/** @param {ClutchEvent} e */
function payloadBlockOpen(e) {
  const rendered = renderPayload(e);
  return rendered ? h('div', { class: 'payload' }, rendered, rawJson(e.payload, 'raw JSON')) : rawJson(e.payload, 'JSON', true);
}

/** @param {ClutchEvent} e */
function attachments(e) {
  if (!e.attachments?.length) return null;
  return h(
    'ul',
    { class: 'attachments' },
    e.attachments.map((a) =>
      h('li', null, a.kind === 'artifact_ref' ? h('a', { href: `/v1/artifacts/${encodeURIComponent(a.ref)}`, target: '_blank', rel: 'noopener' }, a.name || a.ref) : a.name || a.ref),
    ),
  );
}

const STATE_LABEL = {
  requested: 'requested',
  routed: 'routed',
  queued: 'queued',
  accepted: 'accepted',
  running: 'in progress',
  completed: 'done',
  failed: 'failed',
  timed_out: 'timed out',
  cancelled: 'cancelled',
};

/** @param {import('../types.js').TaskStateName} state */
export function stateChip(state) {
  return h('span', { class: `state state-${state}`, 'data-state': state }, STATE_LABEL[state] || state);
}

/** The steps of the lifecycle, the card's small stepper. */
const STEPS = /** @type {const} */ (['requested', 'routed', 'accepted', 'running', 'completed']);

/** @param {Task} t */
function stepper(t) {
  const reached = { requested: 0, queued: 0, routed: 1, accepted: 2, running: 3, completed: 4, failed: 4, timed_out: 4, cancelled: 4 }[t.state];
  const happened = [true, t.seen.routed, t.seen.accepted, t.seen.progress, true];
  return h(
    'ol',
    { class: 'stepper', 'aria-label': 'lifecycle' },
    STEPS.map((s, i) => {
      const label = i === 4 && isTerminal(t.state) ? STATE_LABEL[t.state] : s === 'running' ? 'progress' : s === 'completed' ? 'result' : s;
      const cls = i < reached ? (happened[i] ? 'past' : 'skipped') : i === reached ? `now state-${t.state}` : 'future';
      return h('li', { class: cls, 'aria-current': i === reached ? 'step' : undefined }, label);
    }),
  );
}

/**
 * The card of a task: its state (updated in place as its events arrive), who asked and who works on
 * it, what it requires, its progress, how it was routed, and its result or error.
 * @param {Task} t
 * @param {RenderContext} ctx
 */
export function renderTaskCard(t, ctx) {
  const routing = t.routing?.payload;
  const outcome = t.outcome;
  const card = h(
    'article',
    { class: `ev task-card state-border-${t.state}`, 'data-task': t.task_id, 'data-state': t.state, 'data-seq': String(t.events[0]?.seq ?? '') },
    avatar(t.requester || t.events[0]?.from.agent_id || 'agent:?'),
    h(
      'div',
      { class: 'ev-main' },
      h(
        'div',
        { class: 'ev-head' },
        t.requester && who(t.requester),
        h('span', { class: 'type-badge type-task' }, 'task'),
        h('a', { class: 'task-title', href: ctx.taskHref(t.task_id, t.run_id), 'data-primary': '' }, t.title),
        h('span', { class: 'meta' }, t.events[0] && timeEl(t.events[0].ts), h('span', { class: 'seq' }, shortId(t.task_id))),
      ),
      h(
        'div',
        { class: 'card-line' },
        stateChip(t.state),
        t.assignee && t.assignee !== ORCHESTRATOR && h('span', { class: 'assignee' }, 'by ', who(t.assignee)),
        t.requires.length > 0 && h('span', { class: 'requires' }, t.requires.map((r) => h('code', { class: 'cap' }, r))),
        t.attempt > 1 && h('span', { class: 'attempt' }, `attempt ${t.attempt}`),
        t.usage && h('span', { class: 'muted spent', title: 'what its progress and results reported' }, spentText(t.usage)),
        h('span', { class: 'muted count' }, `${t.events.length} event${t.events.length === 1 ? '' : 's'}`),
      ),
      stepper(t),
      (t.state === 'running' || (t.percent !== undefined && !isTerminal(t.state))) &&
        h('div', { class: 'progress-line' }, barEl(t.percent ?? 0, 100, 'progress', t.percent !== undefined ? `${Math.round(t.percent)}%` : '…', 'plain'), t.progressMessage && h('span', null, t.progressMessage)),
      routing && t.routing?.type === 'routing.decision' && h('p', { class: 'muted routed-line' }, 'Routed to ', who(String(routing.selected || '?')), typeof routing.scores?.[routing.selected] === 'number' ? ` (score ${routing.scores[routing.selected].toFixed(2)})` : '', routing.reason ? ` — ${routing.reason}` : ''),
      t.routing?.type === 'routing.failure' && h('p', { class: 'routing-failed' }, 'No agent matched', routing?.reason ? ` — ${routing.reason}` : ''),
      outcome?.type === 'task.error' && errorBlock(outcome),
      outcome?.type === 'task.result' && h('div', { class: 'outcome' }, payloadText(outcome.payload) && !hasRenderer(outcome) && h('p', null, payloadText(outcome.payload)), payloadBlock(outcome)),
      (outcome?.type === 'task.timeout' || outcome?.type === 'task.cancel') && h('p', { class: 'muted' }, outcome.type === 'task.timeout' ? 'Timed out' : 'Cancelled', payloadText(outcome.payload) ? ` — ${payloadText(outcome.payload)}` : '', ' by ', who(outcome.from.agent_id)),
    ),
  );
  return card;
}
