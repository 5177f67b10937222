// How each kind of event looks in a timeline: chat as conversation, a task as one card whose state
// changes in place, a tool call as one card (its state, arguments, approval history and answer),
// tool calls and results shown one by one as collapsible JSON, routing decisions as a table of
// candidates and scores, errors highlighted with their code and retryable flag.

import { h, nameOf, shortId, timeEl, payloadText, spentText, formatNumber, formatUsd } from '../util.js';
import { barEl } from '../components/elements.js';
import { payloadBlock, renderPayload, rawJson, hasRenderer, checkpointEl, llmCallEl, foldedText } from './payloads.js';
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
    // A task id with no lifecycle (a chat's, which clients make up) leads nowhere: no chip for it.
    ctx.store.tasks.has(e.task_id) && h('a', { class: 'task-link', href: ctx.taskHref(e.task_id, e.run_id), title: e.task_id }, shortId(e.task_id)),
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
          // A payload with a renderer (a session's message) says its text itself: shown once.
          hasRenderer(e) ? payloadBlock(e) : text ? h('div', { class: 'chat-text' }, text) : rawJson(e.payload),
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
      if (hasRenderer(e)) {
        row.append(avatar(e.from.agent_id), h('div', { class: 'ev-main' }, header(e, ctx), payloadBlock(e)));
        return row;
      }
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
  const mark = e.type === 'tool.call' ? 'call' : e.type === 'tool.result' ? '✓ result' : '✗ error';
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

/** @type {Record<import('../types.js').TaskStateName, string>} each state's own words */
export const STATE_LABEL = {
  requested: 'requested',
  queued: 'queued',
  routed: 'routed',
  accepted: 'accepted',
  running: 'running',
  retrying: 'retrying',
  planning: 'planning',
  pending: 'pending',
  claimed: 'claimed',
  in_progress: 'in progress',
  blocked: 'blocked',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
  timed_out: 'timed out',
};

/** @param {import('../types.js').TaskStateName} state */
export function stateChip(state) {
  return h('span', { class: `state state-${state}`, 'data-state': state }, STATE_LABEL[state] || state);
}

/** The steps of each machine's lifecycle, the card's small stepper, and where each state stands on it. */
const STEPS = {
  routed: { steps: ['requested', 'routed', 'accepted', 'progress', 'result'], at: { requested: 0, queued: 0, routed: 1, accepted: 2, running: 3, retrying: 4 } },
  workflow_task: { steps: ['pending', 'claimed', 'in progress', 'result'], at: { pending: 0, claimed: 1, in_progress: 2, blocked: 2 } },
  workflow: { steps: ['planning', 'in progress', 'result'], at: { planning: 0, in_progress: 1, blocked: 1 } },
};

/** @param {Task} t */
function stepper(t) {
  const { steps, at } = STEPS[t.kind] || STEPS.routed;
  const last = steps.length - 1;
  const reached = /** @type {Record<string, number>} */ (at)[t.state] ?? last;
  const happened = t.kind === 'routed' ? [true, t.seen.routed, t.seen.accepted, t.seen.progress, true] : steps.map(() => true);
  return h(
    'ol',
    { class: 'stepper', 'aria-label': 'lifecycle' },
    steps.map((s, i) => {
      const label = i === reached && i === last ? STATE_LABEL[t.state] : i === reached ? STATE_LABEL[t.state] : s;
      const cls = i < reached ? (happened[i] ? 'past' : 'skipped') : i === reached ? `now state-${t.state}` : 'future';
      return h('li', { class: cls, 'aria-current': i === reached ? 'step' : undefined }, label);
    }),
  );
}

/**
 * What a task's LLM calls added up to: calls, tokens (input, output, cache), cost, time.
 * @param {ClutchEvent[]} calls
 */
export function llmTotals(calls) {
  const sum = { calls: 0, input: 0, output: 0, cache: 0, cost: 0, ms: 0 };
  for (const e of calls) {
    const u = e.payload?.usage || {};
    const n = (/** @type {unknown} */ v) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
    sum.calls++;
    sum.input += n(u.input_tokens);
    sum.output += n(u.output_tokens);
    sum.cache += n(u.cache_read_tokens) + n(u.cache_write_tokens);
    sum.cost += n(u.cost_usd);
    sum.ms += n(e.payload?.duration_ms);
  }
  return sum;
}

/** `3 LLM calls · 1,200 in / 300 out tokens · $0.0042 · 2.1 s`. @param {ReturnType<typeof llmTotals>} s */
export function llmTotalsText(s) {
  const parts = [`${s.calls} LLM call${s.calls === 1 ? '' : 's'}`, `${formatNumber(s.input)} in / ${formatNumber(s.output)} out tokens`];
  if (s.cache) parts.push(`${formatNumber(s.cache)} cache`);
  parts.push(formatUsd(s.cost));
  parts.push(s.ms >= 1000 ? `${(s.ms / 1000).toFixed(1)} s` : `${s.ms} ms`);
  return parts.join(' · ');
}

/**
 * What a planned task's card adds: its holder and since when (the lease its heartbeats keep), why it
 * last moved, its dependencies by name, its checkpoints.
 * @param {Task} t
 * @param {RenderContext} ctx
 */
function plannedDetail(t, ctx) {
  return [
    t.holder && h('p', { class: 'muted lease-line' }, 'Held by ', who(t.holder), t.claimedAt ? [' since ', timeEl(t.claimedAt)] : '', ' — its lease lasts while its heartbeats come'),
    t.statusReason && t.state !== 'completed' && h('p', { class: 'muted reason-line' }, `${STATE_LABEL[t.state]}: ${t.statusReason.replace('_', ' ')}`),
    t.dependsOn.length > 0 && h('p', { class: 'deps-line' }, 'After ', t.dependsOn.map((d, i) => [i ? ', ' : '', depLink(d, t.run_id, ctx)])),
    t.checkpoints.length > 0 &&
      h('ol', { class: 'checkpoints', 'aria-label': 'checkpoints' }, t.checkpoints.map((c) => h('li', null, checkpointEl(c.payload || {}), ' ', h('span', { class: 'muted' }, 'by ', who(c.from.agent_id), ' ', timeEl(c.ts))))),
  ];
}

/**
 * A link to a task by its name, in its state's colour.
 * @param {string} id
 * @param {string} runId
 * @param {RenderContext} ctx
 */
export function depLink(id, runId, ctx) {
  const d = ctx.store.tasks.get(id);
  return h('a', { href: ctx.taskHref(id, runId), class: `dep state-${d?.state || 'pending'}`, 'data-task': id, title: d ? `${d.title}: ${STATE_LABEL[d.state]}` : id }, d?.title || shortId(id));
}

/**
 * What a workflow root's card adds: its planned tasks by state.
 * @param {Task} t
 * @param {RenderContext} ctx
 */
function workflowDetail(t, ctx) {
  const planned = t.planned.map((id) => ctx.store.tasks.get(id)).filter((p) => p && p.state !== 'cancelled');
  if (!planned.length) return null;
  const done = planned.filter((p) => p?.state === 'completed').length;
  return h('p', { class: 'muted plan-line' }, `${done} of ${planned.length} tasks completed: `, planned.map((p, i) => [i ? ', ' : '', depLink(/** @type {Task} */ (p).task_id, t.run_id, ctx)]));
}

/**
 * A task's LLM calls: their totals, each call folded to a line (model, tokens, time), and the text
 * streaming for the call under way.
 * @param {Task} t
 */
function llmDetail(t) {
  if (!t.llmCalls.length && !t.streaming) return null;
  const totals = llmTotals(t.llmCalls);
  return h(
    'div',
    { class: 'llm-calls' },
    t.llmCalls.length > 0 && h('p', { class: 'muted llm-totals' }, llmTotalsText(totals)),
    t.llmCalls.map((e) => {
      const c = /** @type {import('../types.js').LlmCall} */ (/** @type {unknown} */ (e.payload));
      const u = c.usage || {};
      const details = h(
        'details',
        { class: 'llm-call', 'data-turn': String(c.turn) },
        h('summary', null, h('strong', null, `call ${c.turn}`), ` ${c.model} · ${formatNumber(u.input_tokens || 0)} in / ${formatNumber(u.output_tokens || 0)} out · ${formatUsd(u.cost_usd || 0)} · ${c.duration_ms} ms`),
      );
      details.addEventListener('toggle', () => {
        if (details.open && details.childElementCount === 1) details.append(llmCallEl(c));
      });
      return details;
    }),
    t.streaming && !isTerminal(t.state) && h('div', { class: 'llm-streaming', 'aria-live': 'polite' }, h('span', { class: 'muted' }, `call ${t.streaming.turn}, streaming: `), h('span', { class: 'llm-text' }, t.streaming.text)),
  );
}

/**
 * The outcome of a task: a result (a planned task's `outcome`, a payload by its renderer, or text),
 * an error, a timeout or a cancel.
 * @param {Task} t
 */
function outcomeEl(t) {
  const outcome = t.outcome;
  if (!outcome) return null;
  if (outcome.type === 'task.error') return errorBlock(outcome);
  if (outcome.type === 'task.result') {
    const p = outcome.payload || {};
    if (t.kind === 'workflow_task' && typeof p.outcome === 'string') {
      return h('div', { class: 'outcome' }, h('strong', null, 'Outcome: '), p.outcome, p.outcome_detail !== undefined && p.outcome_detail !== null && rawJson(p.outcome_detail, 'detail'));
    }
    return h('div', { class: 'outcome' }, payloadText(p) && !hasRenderer(outcome) && foldedText(/** @type {string} */ (payloadText(p))), payloadBlock(outcome));
  }
  return h('p', { class: 'muted' }, outcome.type === 'task.timeout' ? 'Timed out' : 'Cancelled', payloadText(outcome.payload) ? ` — ${payloadText(outcome.payload)}` : '', ' by ', who(outcome.from.agent_id));
}

/**
 * The card of a task: its state (updated in place as its events arrive), who asked and who works on
 * it, what it requires, its progress, how it was routed; a planned task's holder, dependencies and
 * checkpoints; a workflow's tasks; its LLM calls; its result or error.
 * @param {Task} t
 * @param {RenderContext} ctx
 */
export function renderTaskCard(t, ctx) {
  const routing = t.routing?.payload;
  const card = h(
    'article',
    { class: `ev task-card state-border-${t.state}`, 'data-task': t.task_id, 'data-state': t.state, 'data-kind': t.kind, 'data-seq': String(t.events[0]?.seq ?? '') },
    avatar(t.requester || t.events[0]?.from.agent_id || 'agent:?'),
    h(
      'div',
      { class: 'ev-main' },
      h(
        'div',
        { class: 'ev-head' },
        t.requester && who(t.requester),
        h('span', { class: 'type-badge type-task' }, t.kind === 'workflow' ? 'workflow' : t.kind === 'workflow_task' ? 'planned task' : 'task'),
        h('a', { class: 'task-title', href: ctx.taskHref(t.task_id, t.run_id), 'data-primary': '' }, t.title),
        h('span', { class: 'meta' }, t.events[0] && timeEl(t.events[0].ts), h('span', { class: 'seq' }, shortId(t.task_id))),
      ),
      h(
        'div',
        { class: 'card-line' },
        stateChip(t.state),
        t.kind !== 'workflow_task' && t.assignee && t.assignee !== ORCHESTRATOR && h('span', { class: 'assignee' }, 'by ', who(t.assignee)),
        t.requires.length > 0 && h('span', { class: 'requires' }, t.requires.map((r) => h('code', { class: 'cap' }, r))),
        t.attempt > 1 && h('span', { class: 'attempt' }, `attempt ${t.attempt}`),
        t.usage && h('span', { class: 'muted spent', title: 'what its progress and results reported' }, spentText(t.usage)),
        h('span', { class: 'muted count' }, `${t.events.length} event${t.events.length === 1 ? '' : 's'}`),
      ),
      stepper(t),
      (t.state === 'running' || t.state === 'in_progress' || (t.percent !== undefined && !isTerminal(t.state))) &&
        (t.percent !== undefined || t.progressMessage || t.kind === 'routed') &&
        h('div', { class: 'progress-line' }, barEl(t.percent ?? 0, 100, 'progress', t.percent !== undefined ? `${Math.round(t.percent)}%` : '…', 'plain'), t.progressMessage && h('span', null, t.progressMessage)),
      t.kind === 'workflow_task' && plannedDetail(t, ctx),
      t.kind === 'workflow' && workflowDetail(t, ctx),
      routing && t.routing?.type === 'routing.decision' && h('p', { class: 'muted routed-line' }, 'Routed to ', who(String(routing.selected || '?')), typeof routing.scores?.[routing.selected] === 'number' ? ` (score ${routing.scores[routing.selected].toFixed(2)})` : '', routing.reason ? ` — ${routing.reason}` : ''),
      t.routing?.type === 'routing.failure' && h('p', { class: 'routing-failed' }, 'No agent matched', routing?.reason ? ` — ${routing.reason}` : ''),
      llmDetail(t),
      outcomeEl(t),
    ),
  );
  return card;
}
