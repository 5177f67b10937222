// The store's logic without a browser: task lifecycles, history merged under live events, filters and
// the names of threads, runs and tasks. (The page modules are plain ES modules, so node runs them as
// they are.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Store, matches, spentBy, SYSTEM_RUN, SYSTEM_THREAD } from '../../ui/js/store.js';
import { newId } from '../../ui/js/util.js';

let seq = 0;
/** An event as the daemon stores it. @param {Record<string, any>} fields */
function ev(fields) {
  seq++;
  return {
    seq: fields.seq ?? seq,
    id: newId('msg'),
    ts: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString(),
    thread_id: 'thr_A',
    run_id: 'run_A',
    task_id: 'task_A',
    from: { agent_id: 'agent:ken' },
    to: [],
    type: 'chat.message',
    payload: {},
    ...fields,
  };
}
const orch = { agent_id: 'agent:orchestrator' };

test('a task goes through its lifecycle and never moves back, except for a retry', () => {
  seq = 0;
  const store = new Store();
  /** @type {string[]} */
  const states = [];
  const add = (/** @type {Record<string, any>} */ f) => {
    store.addNow([ev({ task_id: 'task_T', ...f })]);
    states.push(/** @type {any} */ (store.tasks.get('task_T')).state);
  };
  // As the daemon has it: the request to the orchestrator, its routing decision and delivery (the
  // routed copy, attempt 1), the agent's answers.
  add({ type: 'task.request', from: { agent_id: 'user:ada' }, to: [orch], requires: ['skill:x'], payload: { goal: 'Do X' } });
  add({ type: 'routing.decision', from: orch, payload: { selected: 'agent:ken', candidates: ['agent:ken'], scores: { 'agent:ken': 1 }, excluded: {}, attempt: 1 } });
  add({ type: 'task.request', from: orch, to: [{ agent_id: 'agent:ken' }], requires: ['skill:x'], payload: { goal: 'Do X' }, meta: { clutch_request_id: 'msg_X' } });
  add({ type: 'task.accept', to: [orch], payload: {} });
  add({ type: 'task.progress', to: [orch], payload: { pct: 40, message: 'going' } });
  add({ type: 'task.error', to: [orch], payload: { code: 'X', message: 'x', retryable: true } });
  add({ type: 'task.progress', to: [orch], payload: { percent: 50 } }); // stale progress after the failure
  // Routed again after the backoff: a decision (its envelope's attempt is 1), then delivery attempt 2.
  add({ type: 'routing.decision', from: orch, payload: { selected: 'agent:ida', candidates: ['agent:ida'], scores: { 'agent:ida': 1 }, excluded: {}, attempt: 2 } });
  add({ type: 'task.request', attempt: 2, from: orch, to: [{ agent_id: 'agent:ida' }], requires: ['skill:x'], payload: { goal: 'Do X' } });
  const retried = /** @type {any} */ (store.tasks.get('task_T'));
  assert.equal(retried.outcome, undefined, 'the last attempt\'s error is history');
  assert.equal(retried.percent, undefined);
  assert.equal(retried.progressMessage, undefined);
  add({ type: 'task.accept', attempt: 2, from: { agent_id: 'agent:ida' }, to: [orch], payload: {} });
  add({ type: 'task.result', attempt: 2, from: { agent_id: 'agent:ida' }, to: [orch], payload: { text: 'done' } });
  assert.deepEqual(states, ['requested', 'routed', 'routed', 'accepted', 'running', 'failed', 'failed', 'failed', 'routed', 'accepted', 'completed']);
  const t = /** @type {any} */ (store.tasks.get('task_T'));
  assert.equal(t.title, 'Do X', "named by the requester's request, not the routed copy");
  assert.deepEqual(t.requires, ['skill:x']);
  assert.equal(t.requester, 'user:ada');
  assert.equal(t.assignee, 'agent:ida');
  assert.equal(t.attempt, 2);
  assert.equal(t.percent, 100);
  assert.equal(t.outcome.type, 'task.result');
  assert.deepEqual(t.seen, { routed: true, accepted: true, progress: false }, 'the retry started the steps again');
});

test("the daemon's own verdicts: queued, routed when a slot frees, no eligible agent, timed out", () => {
  seq = 0;
  const store = new Store();
  const state = (/** @type {string} */ id) => /** @type {any} */ (store.tasks.get(id)).state;
  const request = (/** @type {string} */ id) => ev({ task_id: id, type: 'task.request', from: { agent_id: 'user:ada' }, to: [orch], requires: ['skill:x'], payload: { goal: id } });
  store.addNow([request('task_Q'), ev({ task_id: 'task_Q', type: 'routing.failure', from: orch, payload: { reason: 'busy', excluded: { 'agent:ken': 'at its concurrency limit (1/1)' }, queued: true } })]);
  assert.equal(state('task_Q'), 'queued');
  store.addNow([
    ev({ task_id: 'task_Q', type: 'routing.decision', from: orch, payload: { selected: 'agent:ken', candidates: ['agent:ken'], scores: { 'agent:ken': 0 }, excluded: {}, attempt: 1 } }),
    ev({ task_id: 'task_Q', type: 'task.request', from: orch, to: [{ agent_id: 'agent:ken' }], payload: { goal: 'task_Q' } }),
  ]);
  assert.equal(state('task_Q'), 'routed');
  assert.equal(store.tasks.get('task_Q')?.assignee, 'agent:ken');

  store.addNow([request('task_U'), ev({ task_id: 'task_U', type: 'routing.failure', from: orch, payload: { reason: 'no eligible agent', excluded: {}, queued: false } })]);
  assert.equal(state('task_U'), 'requested', 'a routing failure that is not queued leaves it to the task.error');
  // The daemon's task.error for a task never delivered carries attempt 0.
  store.addNow([ev({ task_id: 'task_U', type: 'task.error', attempt: 0, from: orch, to: [{ agent_id: 'user:ada' }], payload: { code: 'NO_ELIGIBLE_AGENT', message: 'no eligible agent', retryable: false } })]);
  assert.equal(state('task_U'), 'failed');
  assert.equal(store.tasks.get('task_U')?.outcome?.payload.code, 'NO_ELIGIBLE_AGENT');

  store.addNow([
    ev({ task_id: 'task_Q', type: 'task.accept', to: [orch], payload: {} }),
    ev({ task_id: 'task_Q', type: 'task.timeout', from: orch, to: [{ agent_id: 'agent:ken' }, { agent_id: 'user:ada' }], payload: { message: "the task ran past its agent's max_runtime_sec" } }),
  ]);
  assert.equal(state('task_Q'), 'timed_out');
});

test('history loaded later is merged under the live events, and tasks are derived again from all of it', async () => {
  seq = 0;
  const store = new Store();
  store.reset(100);
  // Live: seqs 101.. — the end of task_L (requested in history) and a new task.
  const live = [
    ev({ seq: 101, task_id: 'task_L', type: 'task.accept', payload: {} }),
    ev({ seq: 102, task_id: 'task_L', type: 'task.result', payload: {} }),
    ev({ seq: 103, thread_id: 'thr_B', run_id: 'run_B', task_id: 'task_N', type: 'task.request', from: { agent_id: 'user:ada' }, payload: { goal: 'New' } }),
  ];
  store.addNow(live);
  // Before the history, task_L is known only by its end: no request, so no title or requester yet.
  assert.match(/** @type {any} */ (store.tasks.get('task_L')).title, /^task /);
  assert.equal(store.tasks.get('task_L')?.requester, undefined);
  // History: seqs 1..99, interleaving run_A and run_C, with task_L's request at seq 50.
  const older = [];
  for (let s = 1; s < 100; s++) {
    if (s === 50) older.push(ev({ seq: s, task_id: 'task_L', type: 'task.request', from: { agent_id: 'user:ada' }, payload: { goal: 'Long ago' } }));
    else if (s === 7) older.push(ev({ seq: s, payload: { text: 'first words' } }));
    else older.push(ev({ seq: s, run_id: s % 2 ? 'run_A' : 'run_C', thread_id: s % 2 ? 'thr_A' : 'thr_C', task_id: `task_${s % 5}`, type: 'tool.call', payload: { tool: 't' } }));
  }
  /** @type {any[]} */
  const changes = [];
  store.subscribe((c) => changes.push(c));
  await store.addHistory([...older].reverse().concat(live)); // out of order, with repeats
  const seqs = (/** @type {any[]} */ list) => list.map((e) => e.seq);
  assert.deepEqual(seqs(store.events), [...Array.from({ length: 99 }, (_, i) => i + 1), 101, 102, 103]);
  const runA = seqs(store.eventsOf('run', 'run_A'));
  assert.deepEqual(runA, [...runA].sort((a, b) => a - b), 'run events in seq order');
  assert.equal(runA.at(-1), 102);
  assert.deepEqual(seqs(store.eventsOf('task', 'task_L')), [50, 101, 102]);
  const t = /** @type {any} */ (store.tasks.get('task_L'));
  assert.equal(t.state, 'completed');
  assert.equal(t.title, 'Long ago');
  assert.equal(t.requester, 'user:ada');
  assert.equal(store.threads.get('thr_A')?.title, 'first words', 'the thread is named by its first chat, now known');
  assert.ok(store.runs.has('run_C'), 'runs only in the history appear');
  assert.equal(changes.length, 1);
  assert.equal(changes[0].history, true);
  assert.equal(changes[0].events.length, 99, 'repeats are not counted twice');
});

test("a task's usage is what its progress and results reported, every attempt summed, history included", async () => {
  seq = 0;
  const store = new Store();
  store.reset(100);
  const at = (/** @type {number} */ s, /** @type {string} */ task, /** @type {Record<string, any>} */ f) => ev({ seq: s, task_id: task, to: [orch], ...f });
  store.addNow([
    at(101, 'task_U', { type: 'task.progress', attempt: 2, payload: { usage: { input_tokens: 1000, output_tokens: 200, cost_usd: 0.004, requests: 1 } } }),
    at(102, 'task_U', { type: 'task.result', attempt: 2, payload: { text: 'ok', usage: { tokens: 50, cost_usd: 0.001, requests: 1 } } }),
    at(103, 'task_V', { type: 'task.progress', payload: { usage: { tokens: -5, cost_usd: 'lots', requests: 2 } } }),
    at(104, 'task_W', { type: 'task.progress', payload: { percent: 10 } }),
  ]);
  const usage = (/** @type {string} */ id) => store.tasks.get(id)?.usage;
  assert.deepEqual(usage('task_U'), { tokens: 1250, cost_usd: 0.005, requests: 2 });
  assert.deepEqual(usage('task_V'), { tokens: 0, cost_usd: 0, requests: 2 }, 'what is not a count counts as nothing');
  assert.equal(usage('task_W'), undefined, 'nothing reported, no usage');
  // The first attempt's spending arrives later as history: it is added, not lost to the retry, and
  // the events already held are not counted twice.
  await store.addHistory([
    at(10, 'task_U', { type: 'task.request', from: { agent_id: 'user:ada' }, payload: { goal: 'Spend' } }),
    at(11, 'task_U', { type: 'task.progress', payload: { usage: { tokens: 300, cost_usd: 0.002, requests: 1 } } }),
    at(101, 'task_U', { type: 'task.progress', attempt: 2, payload: { usage: { input_tokens: 1000, output_tokens: 200, cost_usd: 0.004, requests: 1 } } }),
  ]);
  const u = /** @type {any} */ (usage('task_U'));
  assert.deepEqual([u.tokens, u.requests, u.cost_usd.toFixed(6)], [1550, 3, '0.007000']);
  const run = /** @type {any} */ (spentBy(store.tasksOf('run_A')));
  assert.deepEqual([run.tokens, run.requests, run.cost_usd.toFixed(6)], [1550, 5, '0.007000']);
  assert.equal(spentBy([]), undefined);
});

test('filters match type (with wildcards), sender or recipient, task and parent, and every word of the text', () => {
  seq = 0;
  const e = ev({ type: 'tool.call', from: { agent_id: 'agent:ken' }, to: [{ agent_id: 'agent:ida' }], task_id: 'task_K', parent_task_id: 'task_P', payload: { tool: 'web.search', arguments: { query: 'Quarterly Report' } } });
  assert.ok(matches(e, {}));
  assert.ok(matches(e, { type: 'tool.call' }));
  assert.ok(matches(e, { type: 'tool.*' }));
  assert.ok(!matches(e, { type: 'task.*' }));
  assert.ok(matches(e, { agent: 'agent:ken' }) && matches(e, { agent: 'agent:ida' }));
  assert.ok(!matches(e, { agent: 'agent:zed' }));
  assert.ok(matches(e, { task: 'task_K' }) && matches(e, { task: 'task_P' }));
  assert.ok(matches(e, { q: 'quarterly web.search' }));
  assert.ok(!matches(e, { q: 'quarterly annual' }));
});

test("the daemon's own thread and run are named for what they hold, not by their first event", async () => {
  seq = 0;
  const store = new Store();
  const system = { thread_id: SYSTEM_THREAD, run_id: SYSTEM_RUN, task_id: 'task_00000000000000000000000000' };
  const card = { v: 'clutch/0.1', agent_id: 'agent:amy', budget: { tokens: 1000 } };
  store.addNow([
    ev({ ...system, type: 'agent.register', from: { agent_id: 'agent:amy' }, payload: card }),
    ev({ ...system, type: 'chat.system', from: orch, payload_type: 'clutch.budget.v1', payload: { scope: 'agent', id: 'agent:amy', dimension: 'tokens', used: 1500, limit: 1000, action: 'excluded from routing', message: 'agent agent:amy reached its tokens budget (1500 of 1000): excluded from routing' } }),
  ]);
  assert.equal(store.threads.get(SYSTEM_THREAD)?.title, 'Daemon notices');
  assert.equal(store.runs.get(SYSTEM_RUN)?.title, 'Daemon notices');
  assert.equal(store.threads.get(SYSTEM_THREAD)?.listed, true, 'listed once it holds more than registrations');
  await store.addHistory([ev({ ...system, seq: 0.5, type: 'agent.register', from: { agent_id: 'agent:bob' }, payload: { ...card, agent_id: 'agent:bob' } })]);
  assert.equal(store.threads.get(SYSTEM_THREAD)?.title, 'Daemon notices', 'still, with history loaded');
});

test('a workflow and its planned tasks are named by their names, not by their payloads', () => {
  seq = 0;
  const store = new Store();
  const root = { thread_id: 'thr_W', run_id: 'run_W', task_id: 'task_W' };
  store.addNow([
    ev({ ...root, type: 'task.request', from: { agent_id: 'user:ada' }, payload_type: 'clutch.workflow.v1', payload: { name: 'oauth', source: 'issue 7', description: 'Sign in with Google and GitHub' } }),
    ev({ ...root, type: 'task.progress', from: { agent_id: 'user:ada' }, payload_type: 'clutch.workflow.plan.v1', payload: { summary: 'two steps', tasks: [] } }),
    ev({ ...root, task_id: 'task_S', parent_task_id: 'task_W', type: 'task.request', from: { agent_id: 'user:ada' }, payload_type: 'clutch.workflow.task.v1', payload: { name: 'setup', description: 'install the SDKs', depends_on: [], order: 0 } }),
  ]);
  assert.equal(store.threads.get('thr_W')?.title, 'workflow oauth');
  assert.equal(store.runs.get('run_W')?.title, 'workflow oauth');
  assert.equal(store.tasks.get('task_W')?.title, 'workflow oauth');
  assert.equal(store.tasks.get('task_S')?.title, 'setup');
});

test("a tool call's events are filed under the call, whatever order they arrive in", async () => {
  seq = 0;
  const store = new Store();
  const call = ev({ type: 'tool.call', payload: { tool: 'mcp:files/write_file', args: { path: 'a' } } });
  const requested = ev({ from: orch, type: 'chat.system', payload_type: 'clutch.approval.requested.v1', payload: { call_id: call.id, tool: 'mcp:files/write_file' } });
  const decided = ev({ from: orch, type: 'chat.system', payload_type: 'clutch.approval.decided.v1', payload: { call_id: call.id, decision: 'approved', by: 'user:ada' } });
  const started = ev({ from: orch, type: 'chat.system', payload_type: 'clutch.tool.started.v1', payload: { call_id: call.id, attempt: 1 } });
  const answer = ev({ from: orch, type: 'tool.error', payload: { code: 'TOOL_FAILED', message: 'no', retryable: false, details: { call_id: call.id } } });
  const unrelated = ev({ from: orch, type: 'chat.system', payload: { call_id: call.id, text: 'not a note about the call' } });
  // The answer and the decision arrive live; the rest is history loaded afterwards.
  store.addNow([decided, answer, unrelated]);
  await store.addHistory([call, requested, started]);
  const c = /** @type {any} */ (store.calls.get(call.id));
  assert.deepEqual(
    [c.call?.seq, c.requested?.seq, c.decided?.seq, c.started.map((/** @type {any} */ s) => s.seq), c.answer?.seq],
    [call.seq, requested.seq, decided.seq, [started.seq], answer.seq],
  );
  assert.equal(store.calls.size, 1);
});
