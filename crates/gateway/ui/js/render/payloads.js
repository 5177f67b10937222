// Renderers for structured payloads, chosen by `payload_type` (its version suffix aside): a research
// summary with findings and citations, code review findings by severity, budget and agent status
// notices. A payload without a renderer is shown as raw JSON.

import { h, safeUrl, nameOf, shortId, localTime } from '../util.js';
import { jsonEl, barEl } from '../components/elements.js';

/** @typedef {import('../types.js').ClutchEvent} ClutchEvent */
/** @typedef {(payload: Record<string, any>, event: ClutchEvent) => HTMLElement} Renderer */

/** @type {Map<string, Renderer>} renderers by payload type without its `.vN` suffix */
const renderers = new Map();

/** @param {string} payloadType */
function baseName(payloadType) {
  return payloadType.replace(/\.v\d+$/, '');
}

/**
 * Adds a renderer for a payload type (any version).
 * @param {string} payloadType e.g. `research.summary.v1`
 * @param {Renderer} render
 */
export function register(payloadType, render) {
  renderers.set(baseName(payloadType), render);
}

/** Whether a renderer exists for this event's payload. @param {ClutchEvent} e */
export function hasRenderer(e) {
  return Boolean(e.payload_type && renderers.has(baseName(e.payload_type)));
}

/**
 * The payload rendered for what it is, or null when there is no renderer for it (or it failed on
 * an unexpected shape, in which case raw JSON is the honest answer).
 * @param {ClutchEvent} e
 * @returns {HTMLElement | null}
 */
export function renderPayload(e) {
  const render = e.payload_type && renderers.get(baseName(e.payload_type));
  if (!render) return null;
  try {
    return render(e.payload || {}, e);
  } catch {
    return null;
  }
}

/**
 * A collapsible raw JSON block.
 * @param {unknown} value
 * @param {string} label
 * @param {boolean} [open]
 */
export function rawJson(value, label = 'payload', open = false) {
  const details = h('details', { class: 'raw' }, h('summary', null, label));
  if (open) details.open = true;
  // The JSON is built only when first opened: most rows are never expanded.
  const fill = () => {
    if (details.open && details.childElementCount === 1) details.appendChild(jsonEl(value));
  };
  details.addEventListener('toggle', fill);
  fill();
  return details;
}

/**
 * The payload rendered by type when possible, raw JSON (collapsed) otherwise.
 * @param {ClutchEvent} e
 */
export function payloadBlock(e) {
  const rendered = renderPayload(e);
  if (!rendered) return rawJson(e.payload, e.payload_type ? `payload (${e.payload_type})` : 'payload');
  return h('div', { class: 'payload' }, rendered, rawJson(e.payload, 'raw JSON'));
}

/** @param {unknown} v @returns {any[]} */
function list(v) {
  return Array.isArray(v) ? v : [];
}

/** @param {...unknown} values @returns {string} */
function text(...values) {
  for (const v of values) if (typeof v === 'string' && v) return v;
  for (const v of values) if (typeof v === 'number') return String(v);
  return '';
}

/** @param {any} c */
function citationTitle(c) {
  return typeof c === 'string' ? c : text(c?.title, c?.name, c?.url, c?.source);
}

register('research.summary.v1', (p) => {
  const citations = list(p.citations ?? p.sources);
  /** A finding's reference to a citation: its 1-based number, or the citation's `id`. @param {unknown} ref */
  const cite = (ref) => {
    const n = typeof ref === 'number' ? ref : citations.findIndex((c) => c?.id === ref) + 1;
    return h('sup', { class: 'cite', title: n > 0 ? citationTitle(citations[n - 1]) : String(ref) }, `[${n > 0 ? n : String(ref)}]`);
  };
  return h(
    'section',
    { class: 'r-research' },
    p.title && h('h4', null, text(p.title)),
    (p.summary || p.text) && h('p', { class: 'r-summary' }, text(p.summary, p.text)),
    list(p.findings).length > 0 &&
      h(
        'ol',
        { class: 'r-findings', 'aria-label': 'findings' },
        list(p.findings).map((f) =>
          h(
            'li',
            null,
            typeof f === 'string' ? f : text(f.claim, f.text, f.finding, f.summary),
            typeof f?.confidence === 'number' && h('span', { class: 'confidence' }, ` ${Math.round(f.confidence * 100)}%`),
            list(f?.citations).map((c) => [' ', cite(c)]),
          ),
        ),
      ),
    citations.length > 0 &&
      h(
        'ol',
        { class: 'r-citations', 'aria-label': 'citations' },
        citations.map((c) => {
          const url = safeUrl(c?.url);
          const title = citationTitle(c);
          return h(
            'li',
            null,
            url ? h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, title) : title,
            c?.source && c?.title && h('span', { class: 'muted' }, ` — ${text(c.source)}`),
          );
        }),
      ),
  );
});

const SEVERITIES = ['critical', 'high', 'medium', 'low', 'info'];

/** @param {unknown} s */
function severityOf(s) {
  const v = String(s || 'info').toLowerCase();
  if (v === 'error' || v === 'blocker') return 'high';
  if (v === 'warning' || v === 'warn') return 'medium';
  if (v === 'note' || v === 'nit') return 'low';
  return SEVERITIES.includes(v) ? v : 'info';
}

/** @type {Renderer} */
const codeReview = (p) => {
  const findings = [...list(p.findings ?? p.issues ?? p.comments)].sort(
    (a, b) => SEVERITIES.indexOf(severityOf(a?.severity)) - SEVERITIES.indexOf(severityOf(b?.severity)),
  );
  /** @type {Record<string, number>} */
  const counts = {};
  for (const f of findings) counts[severityOf(f?.severity)] = (counts[severityOf(f?.severity)] || 0) + 1;
  return h(
    'section',
    { class: 'r-review' },
    h(
      'p',
      { class: 'r-summary' },
      text(p.summary, p.verdict) || `${findings.length} finding${findings.length === 1 ? '' : 's'}`,
      ' ',
      SEVERITIES.filter((s) => counts[s]).map((s) => h('span', { class: `sev sev-${s}` }, `${counts[s]} ${s}`)),
    ),
    findings.length > 0 &&
      h(
        'table',
        { class: 'r-findings-table' },
        h('thead', null, h('tr', null, h('th', null, 'severity'), h('th', null, 'where'), h('th', null, 'finding'))),
        h(
          'tbody',
          null,
          findings.map((f) =>
            h(
              'tr',
              null,
              h('td', null, h('span', { class: `sev sev-${severityOf(f?.severity)}` }, severityOf(f?.severity))),
              h(
                'td',
                { class: 'mono' },
                text(f?.file, f?.path) + (f?.line !== undefined ? `:${text(f.line)}` : ''),
              ),
              h(
                'td',
                null,
                text(f?.message, f?.title, f?.description, f?.text),
                f?.suggestion && h('div', { class: 'suggestion' }, `Suggestion: ${text(f.suggestion)}`),
              ),
            ),
          ),
        ),
      ),
  );
};
register('code_review.findings.v1', codeReview);
register('code.review.v1', codeReview);

// The daemon's notice when an agent or a run crosses a budget: `{scope, id, dimension, used, limit,
// action, message}` (older drafts said `agent_id`, `metric`, `percent`).
register('clutch.budget.v1', (p) => {
  const used = Number(p.used ?? p.value ?? 0);
  const limit = p.limit ?? p.budget;
  const metric = text(p.dimension, p.metric, p.kind, p.resource) || 'budget';
  const pct = typeof p.percent === 'number' ? p.percent : limit ? (used / Number(limit)) * 100 : undefined;
  const agent = text(p.agent_id) || (p.scope === 'run' ? '' : text(p.id));
  const subject = agent ? h('a', { href: `#/agent/${encodeURIComponent(agent)}` }, nameOf(agent)) : p.scope === 'run' && p.id ? h('a', { href: `#/run/${encodeURIComponent(text(p.id))}` }, `run ${shortId(text(p.id))}`) : 'An agent';
  const over = p.exceeded || (limit !== undefined && used >= Number(limit));
  return h(
    'section',
    { class: 'r-budget', 'data-scope': text(p.scope) || 'agent' },
    h(
      'p',
      null,
      h('strong', null, subject),
      over ? ` reached its ${metric} budget` : ` crossed ${pct !== undefined ? `${Math.round(pct)}% of ` : ''}its ${metric} budget`,
      over && pct !== undefined ? ` (${Math.round(pct)}%)` : '',
      p.action ? `: ${text(p.action)}` : '',
    ),
    limit !== undefined && barEl(used, Number(limit), `${metric} budget`, `${used} / ${limit}`),
  );
});

register('clutch.agent.status.v1', (p) =>
  h(
    'p',
    { class: 'r-status' },
    h('a', { href: `#/agent/${encodeURIComponent(text(p.agent_id))}` }, nameOf(text(p.agent_id))),
    ' is now ',
    h('span', { class: `status status-${text(p.status)}` }, text(p.status)),
    p.previous ? ` (was ${text(p.previous)})` : '',
  ),
);

// A tool call waiting for a person (`clutch.approval.requested.v1`): the tool, its caller and
// arguments, why it waits and until when, with Approve and Deny. A click asks the daemon through a
// bubbling `clutch-decide` event the app answers (renderers hold no API); the decision then arrives
// as its own event.
register('clutch.approval.requested.v1', (p, e) => {
  const r = /** @type {import('../api-types.js').ApprovalRequested} */ (/** @type {unknown} */ (p));
  return h(
    'section',
    { class: 'r-approval', 'data-call': r.call_id, 'data-seq': String(e.seq) },
    h('p', null, h('strong', null, text(r.tool)), ' waits for approval', r.reason === 'destructive' ? ' (it may destroy and is not read-only)' : ' (the policy asks for it)'),
    h('p', { class: 'muted' }, 'called by ', h('a', { href: `#/agent/${encodeURIComponent(text(r.caller))}` }, nameOf(text(r.caller))), `; expires ${localTime(text(r.expires_at))}`),
    rawJson(r.args, 'arguments', true),
    decideRow(r.call_id),
  );
});

/**
 * Approve and Deny for the call `callId`, and where the answer shows: a click raises a bubbling
 * `clutch-decide` event ({callId, verb, status}) that the app answers through the API.
 * @param {string} callId
 */
export function decideRow(callId) {
  const status = h('span', { class: 'r-approval-status', role: 'status' });
  /** @param {'approve' | 'deny'} verb @param {string} label */
  const button = (verb, label) =>
    h(
      'button',
      {
        type: 'button',
        class: `decide decide-${verb}`,
        'data-call': callId,
        /** @param {MouseEvent} ev */
        onclick: (ev) => {
          const target = /** @type {HTMLElement} */ (ev.currentTarget);
          target.dispatchEvent(new CustomEvent('clutch-decide', { bubbles: true, detail: { callId, verb, status } }));
        },
      },
      label,
    );
  return h('p', { class: 'decide-row' }, button('approve', 'Approve'), ' ', button('deny', 'Deny'), ' ', status);
}

// The one decision about a call that waited for approval.
register('clutch.approval.decided.v1', (p) => {
  const d = /** @type {import('../api-types.js').ApprovalDecided} */ (/** @type {unknown} */ (p));
  return h(
    'p',
    { class: `r-decided decided-${text(d.decision)}`, 'data-call': d.call_id },
    h('strong', null, text(d.tool)),
    d.decision === 'expired' ? ' expired without a decision' : ` ${text(d.decision)} by ${nameOf(text(d.by))}`,
    d.note ? `: ${text(d.note)}` : '',
  );
});

// The daemon's note that it is making a tool call.
register('clutch.tool.started.v1', (p) => {
  const s = /** @type {import('../api-types.js').ToolStarted} */ (/** @type {unknown} */ (p));
  return h('p', { class: 'r-tool-started muted' }, `calling ${text(s.tool)}`, s.attempt > 1 ? ` (attempt ${s.attempt})` : '');
});

// A position's session. Its records (`clutch.session.v1`): the phase, the workflow step, a note; a
// message between members (`clutch.session.message.v1`): its type and content; a warning to the team
// (`clutch.session.warning.v1`): a member failed or looped.
register('clutch.session.v1', (p) =>
  h(
    'p',
    { class: 'r-session' },
    h('span', { class: `phase phase-${text(p.phase).toLowerCase()}` }, text(p.phase)),
    p.step ? ` ${text(p.step)}` : '',
    p.note ? ` — ${text(p.note)}` : '',
  ),
);

register('clutch.session.message.v1', (p, e) =>
  h(
    'div',
    { class: 'r-said' },
    h('span', { class: 'said-type' }, text(p.type)),
    ' → ',
    e.to.map((r) => nameOf(r.agent_id)).join(', '),
    h('div', { class: 'said-content' }, saidContent(p.content)),
  ),
);

/**
 * What a member said: text as it is; a verdict's points as a list (and why it was unreadable); a
 * vote as its proposal; anything else as JSON.
 * @param {unknown} c
 */
function saidContent(c) {
  if (typeof c === 'string') return c;
  const o = /** @type {Record<string, unknown>} */ (c && typeof c === 'object' && !Array.isArray(c) ? c : {});
  if (Array.isArray(o.points)) {
    return h(
      'ul',
      { class: 'said-points' },
      o.points.map((point) => h('li', null, text(point))),
      o.unreadable ? h('li', { class: 'muted' }, `unreadable, counted as a discrepancy: ${text(o.unreadable)}`) : null,
    );
  }
  if (typeof o.proposal === 'number' && Object.keys(o).length === 1) return `proposal ${o.proposal}`;
  return jsonEl(c);
}

register('clutch.session.warning.v1', (p) =>
  h('p', { class: 'r-session-warning' }, h('strong', null, text(p.code)), ' ', text(p.message)),
);

// Workflows. The root's request (`clutch.workflow.v1`): its name and source; a plan
// (`clutch.workflow.plan.v1`): its tasks in order with their dependencies; a planned task's request
// (`clutch.workflow.task.v1`): its name and description; a planned task's move
// (`clutch.workflow.status.v1`): the status and why; a checkpoint (`clutch.checkpoint.v1`): its type,
// summary and files; the holder's plan of the task (`clutch.workflow.task_plan.v1`).
register('clutch.workflow.v1', (p) =>
  h('p', { class: 'r-workflow' }, 'Workflow ', h('strong', null, text(p.name)), p.source ? ` from ${text(p.source)}` : '', p.description ? ` — ${text(p.description)}` : ''),
);

register('clutch.workflow.plan.v1', (p) => {
  const tasks = list(p.tasks);
  /** @type {Map<string, string>} */
  const names = new Map(tasks.map((t) => [text(t?.id), text(t?.name)]));
  return h(
    'section',
    { class: 'r-plan' },
    h('p', null, h('strong', null, `Plan of ${tasks.length} task${tasks.length === 1 ? '' : 's'}`), p.summary ? ` — ${text(p.summary)}` : ''),
    h(
      'ol',
      { class: 'r-plan-tasks' },
      tasks.map((t) =>
        h('li', null, h('span', { class: 'plan-name' }, text(t?.name)), list(t?.depends_on).length > 0 && h('span', { class: 'muted' }, ` after ${list(t.depends_on).map((d) => names.get(d) || shortId(String(d))).join(', ')}`)),
      ),
    ),
  );
});

register('clutch.workflow.task.v1', (p) =>
  h('p', { class: 'r-planned' }, 'Planned ', h('strong', null, text(p.name)), p.description ? ` — ${text(p.description)}` : '', p.parallel_group ? h('span', { class: 'muted' }, ` (group ${text(p.parallel_group)})`) : ''),
);

register('clutch.workflow.status.v1', (p) =>
  h(
    'p',
    { class: 'r-status-change' },
    'Now ',
    h('span', { class: `state state-${text(p.status)}`, 'data-state': text(p.status) }, text(p.status).replace('_', ' ')),
    p.reason ? ` — ${text(p.reason).replace('_', ' ')}` : '',
    p.note ? `: ${text(p.note)}` : '',
    p.previous_agent ? ` (was held by ${nameOf(text(p.previous_agent))})` : '',
  ),
);

register('clutch.checkpoint.v1', (p) => checkpointEl(p));

/**
 * A checkpoint: its type, its summary, the files it changed, its detail folded.
 * @param {Record<string, any>} p
 */
export function checkpointEl(p) {
  const files = list(p.files_changed);
  return h(
    'div',
    { class: 'r-checkpoint', 'data-type': text(p.type) },
    h('span', { class: `cp-type cp-${text(p.type)}` }, text(p.type)),
    ' ',
    h('span', { class: 'cp-summary' }, text(p.summary)),
    files.length > 0 && h('ul', { class: 'cp-files', 'aria-label': 'files changed' }, files.map((f) => h('li', null, h('code', null, text(f))))),
    p.detail !== undefined && p.detail !== null && rawJson(p.detail, 'detail'),
  );
}

register('clutch.workflow.task_plan.v1', (p) => h('div', { class: 'r-task-plan' }, h('strong', null, 'Plan of the task'), typeof p.plan === 'string' ? h('p', { class: 'chat-text' }, p.plan) : jsonEl(p.plan)));

// An LLM agent's model call (`clutch.llm.call.v1`): provider and model, what was sent (the system
// prompt and tools on the first call, the turns added since the previous call), the answer, why it
// stopped, tokens, cost, time. Streamed text (`clutch.llm.text.v1`) is shown as it comes.
register('clutch.llm.call.v1', (p) => llmCallEl(/** @type {import('../types.js').LlmCall} */ (/** @type {unknown} */ (p))));

register('clutch.llm.text.v1', (p) => h('p', { class: 'r-llm-text chat-text' }, h('span', { class: 'muted' }, `turn ${text(p.turn)} · streaming: `), text(p.text)));

/** Text longer than this (characters) or with more lines is folded to its start. */
const FOLD_CHARS = 400;
const FOLD_LINES = 6;

/**
 * A block of text, folded to its first lines when long.
 * @param {string} body
 * @param {string} [cls]
 */
export function foldedText(body, cls = '') {
  const lines = body.split('\n');
  if (body.length <= FOLD_CHARS && lines.length <= FOLD_LINES) return h('div', { class: `llm-text ${cls}` }, body);
  const head = lines.slice(0, 3).join('\n').slice(0, 240);
  const details = h('details', { class: `llm-fold ${cls}` }, h('summary', null, h('span', { class: 'llm-text' }, `${head}…`), h('span', { class: 'muted' }, ` (${body.length.toLocaleString()} characters)`)));
  details.addEventListener('toggle', () => {
    if (details.open && details.childElementCount === 1) details.append(h('div', { class: 'llm-text' }, body));
  });
  return details;
}

/** The reason a model stopped, in words. @param {unknown} stop */
function stopText(stop) {
  if (typeof stop === 'string') return stop.replace(/_/g, ' ');
  if (stop && typeof stop === 'object') return `other: ${text(.../** @type {unknown[]} */ (Object.values(stop)))}`;
  return '';
}

/** @param {unknown} ref */
function artifactHref(ref) {
  return `/v1/artifacts/${encodeURIComponent(String(ref))}`;
}

/**
 * One part of a turn: text (folded when long), a tool use with its input, a tool's result.
 * @param {any} part
 */
function partEl(part) {
  if (part?.type === 'text') return foldedText(text(part.text));
  if (part?.type === 'tool_use') {
    return h('div', { class: 'llm-tool-use' }, h('span', { class: 'llm-part-mark' }, 'calls '), h('code', null, text(part.name)), ' ', h('span', { class: 'muted mono' }, text(part.id)), rawJson(part.input, 'input', false));
  }
  if (part?.type === 'tool_result') {
    return h(
      'div',
      { class: `llm-tool-result${part.is_error ? ' is-error' : ''}` },
      h('span', { class: 'llm-part-mark' }, part.is_error ? 'tool error for ' : 'tool result for '),
      h('span', { class: 'muted mono' }, text(part.tool_use_id)),
      foldedText(text(part.content)),
    );
  }
  return jsonEl(part);
}

/**
 * A conversation's turn: who (user, assistant) and its parts.
 * @param {any} turn
 */
function turnEl(turn) {
  const role = text(turn?.role) || 'user';
  const parts = list(turn?.content);
  // A user turn made only of tool results is what the tools said.
  const shown = role === 'user' && parts.length > 0 && parts.every((x) => x?.type === 'tool_result') ? 'tools' : role;
  return h('li', { class: `llm-msg llm-${shown}`, 'data-role': shown }, h('span', { class: 'llm-role' }, shown), h('div', { class: 'llm-parts' }, parts.map(partEl)));
}

/** @param {number} ms */
function durationText(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(ms >= 10_000 ? 0 : 1)} s` : `${ms} ms`;
}

/**
 * The view of one model call, as LangSmith shows a run.
 * @param {import('../types.js').LlmCall} c
 */
export function llmCallEl(c) {
  const usage = c.usage || {};
  const response = c.response || {};
  const request = c.request || { added: [] };
  const answered = text(response.model);
  const num = (/** @type {unknown} */ v) => (typeof v === 'number' ? v : 0);
  const retries = typeof c.retries === 'number' ? c.retries : Math.max(0, num(usage.requests) - 1);
  const added = request.added;
  const artifact = added && typeof added === 'object' && !Array.isArray(added) && 'artifact' in added ? /** @type {{artifact: string, size?: number}} */ (added) : null;
  /** @type {[string, string][]} */
  const figures = [
    ['input', num(usage.input_tokens).toLocaleString()],
    ['output', num(usage.output_tokens).toLocaleString()],
    ['cache read', num(usage.cache_read_tokens).toLocaleString()],
    ['cache write', num(usage.cache_write_tokens).toLocaleString()],
    ['cost', `$${num(usage.cost_usd).toFixed(num(usage.cost_usd) > 0 && num(usage.cost_usd) < 0.01 ? 4 : 2)}`],
    ['latency', durationText(num(c.duration_ms))],
    ['retries', String(retries)],
  ];
  return h(
    'section',
    { class: 'r-llm', 'data-turn': String(c.turn ?? '') },
    h(
      'p',
      { class: 'llm-head' },
      h('strong', { class: 'llm-model' }, `${text(c.provider)}/${text(c.model)}`),
      answered && answered !== c.model && h('span', { class: 'muted' }, ` answered by ${answered}`),
      h('span', { class: 'muted' }, ` · call ${text(c.turn)}`),
      stopText(response.stop) && h('span', { class: `llm-stop stop-${text(response.stop)}` }, stopText(response.stop)),
    ),
    h('dl', { class: 'llm-usage' }, figures.map(([k, v]) => h('div', { 'data-figure': k }, h('dt', null, k), h('dd', null, v)))),
    request.system && h('div', { class: 'llm-system' }, h('span', { class: 'llm-role' }, 'system'), foldedText(request.system)),
    list(request.tools).length > 0 && h('p', { class: 'llm-tools muted' }, 'tools offered: ', list(request.tools).map((t) => h('code', { class: 'cap' }, text(t)))),
    artifact
      ? h('p', { class: 'llm-added' }, 'sent: ', h('a', { href: artifactHref(artifact.artifact), target: '_blank', rel: 'noopener' }, `the new turns (${num(artifact.size).toLocaleString()} bytes, stored as an artifact)`))
      : list(added).length > 0 && h('ol', { class: 'llm-messages', 'aria-label': 'sent' }, list(added).map(turnEl)),
    h('div', { class: 'llm-answer', 'aria-label': 'answer' }, h('span', { class: 'llm-role' }, 'answer'), h('div', { class: 'llm-parts' }, list(response.content).map(partEl))),
  );
}
