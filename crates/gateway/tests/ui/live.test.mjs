// Live views: messages posted through the API appear in the sidebar and the timeline as they happen,
// task cards change state in place as the daemon routes them and agents answer, and each message type
// is rendered for what it is, the daemon's own verdicts (routing failures, timeouts, retries,
// refused tool calls) included.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Store } from '../../ui/js/store.js';
import { Agent, ask, daemonAndBrowser, events, live, msg, newId, post, story, taskIn, withPage } from './support.mjs';

const env = daemonAndBrowser();

/**
 * The states a task's card goes through as the page folds the daemon's events for it, in order.
 * @param {string} taskId
 */
async function statesOf(taskId) {
  const store = new Store();
  /** @type {string[]} */
  const states = [];
  for (const e of await events(env.daemon.url, { task_id: taskId })) {
    store.addNow([e]);
    const t = store.tasks.get(taskId);
    if (t) states.push(t.state);
  }
  return states;
}

test('a message posted through the API appears live in the sidebar and its thread, with unread counts', async (t) => {
  await withPage(env.browser, t.name, env.daemon.url, async (page) => {
    await live(page);
    const [a, b] = [newId('thr'), newId('thr')];
    await post(env.daemon.url, msg({ thread_id: a, payload: { text: 'first words in A' } }));
    const linkA = page.locator(`.sidebar a[data-id="${a}"]`);
    await linkA.locator('.badge', { hasText: '1' }).waitFor();
    assert.equal(await linkA.locator('.item-title').textContent(), 'first words in A');

    await linkA.click();
    await page.locator('.timeline .chat-text', { hasText: 'first words in A' }).waitFor();
    await post(env.daemon.url, msg({ thread_id: a, from: { agent_id: 'agent:ida' }, payload: { text: 'second words in A' } }));
    await page.locator('.timeline .chat-text', { hasText: 'second words in A' }).waitFor();
    assert.equal(await linkA.locator('.badge').count(), 0, 'the thread in view has nothing unread');

    await post(env.daemon.url, [msg({ thread_id: b, payload: { text: 'over in B' } }), msg({ thread_id: b, payload: { text: 'more in B' } })]);
    const linkB = page.locator(`.sidebar a[data-id="${b}"]`);
    await linkB.locator('.badge', { hasText: '2' }).waitFor();
    const order = await page.locator('.sidebar ul[aria-label=threads] a[data-id]').evaluateAll((els) => els.map((e) => e.getAttribute('data-id')));
    assert.deepEqual(order.slice(0, 2), [b, a], 'newest activity first');

    await page.locator('.sidebar-filter').fill('over in');
    await page.locator(`.sidebar a[data-id="${a}"]`).waitFor({ state: 'detached' });
    assert.equal(await linkB.count(), 1, 'the filter keeps matching threads');
  });
});

test('a task card changes state in place: requested, queued, routed, accepted, progress, result', async (t) => {
  const url = env.daemon.url;
  // lee does maths and has one slot, which another task takes; ola does not do maths.
  const lee = await new Agent(url, 'lee', { capabilities: [{ id: 'skill:math', version: '1.2.0' }], limits: { max_concurrency: 1 } }).register();
  await new Agent(url, 'ola', { capabilities: [{ id: 'skill:poetry', version: '1.0.0' }] }).register();
  const other = await ask(url, { requires: ['skill:math'], payload: { goal: 'Something else first' } });
  const busy = await lee.delivery(other.task_id);
  await lee.accept(busy);
  await withPage(env.browser, t.name, url, async (page) => {
    await live(page);
    const s = { thread_id: newId('thr'), run_id: newId('run'), task_id: newId('task') };
    await post(url, msg({ thread_id: s.thread_id, run_id: s.run_id, payload: { text: 'kick-off' } }));
    await page.locator(`.sidebar a[data-id="${s.thread_id}"]`).click();
    const card = page.locator(`.task-card[data-task="${s.task_id}"]`);
    /** @param {string} state */
    const reaches = async (state) => {
      await page.locator(`.task-card[data-task="${s.task_id}"][data-state="${state}"]`).waitFor();
      assert.equal(await card.count(), 1, 'one card per task, updated in place');
    };

    // lee is at its limit and ola lacks the skill: the daemon queues the task.
    await ask(url, { ...s, requires: ['skill:math'], prefers: ['skill:math@^1.2'], payload: { goal: 'Find the answer' } });
    await reaches('queued');
    assert.match(await card.locator('.task-title').textContent() || '', /Find the answer/);
    assert.equal(await card.locator('.cap').textContent(), 'skill:math');
    const failure = page.locator('.ev-routing-failure');
    await failure.waitFor();
    assert.match(await failure.textContent() || '', /No agent matched .*queued until one can take it/);
    assert.match(await failure.locator('tr', { hasText: 'lee' }).textContent() || '', /at its concurrency limit \(1\/1\)/);
    assert.match(await failure.locator('tr', { hasText: 'ola' }).textContent() || '', /lacks required capability skill:math/);

    // lee finishes the other task; the freed slot lets the daemon route this one to it.
    await lee.result(busy, { text: 'done with that' });
    await reaches('routed');
    const delivery = await lee.delivery(s.task_id);
    assert.equal(delivery.attempt, 1);
    assert.equal(await card.locator('.assignee .who').textContent(), 'lee');
    await lee.accept(delivery);
    await reaches('accepted');
    await lee.progress(delivery, { percent: 40, message: 'halfway there', usage: { input_tokens: 1200, output_tokens: 34, cost_usd: 0.0042, requests: 1 } });
    await reaches('running');
    assert.equal(await card.locator('clutch-bar').getAttribute('value'), '40');
    assert.match(await card.textContent() || '', /halfway there/);
    // What the agent reported spending shows on the card, summed as the daemon sums it.
    await card.locator('.spent', { hasText: '1,234 tokens · $0.0042 · 1 request' }).waitFor();
    await lee.result(delivery, { summary: 'It is 42.', findings: [{ claim: 'The answer is 42', citations: [1] }], citations: [{ title: 'The Guide', url: 'https://example.com/guide' }] }, 'research.summary.v1');
    await reaches('completed');
    assert.equal(await card.locator('.r-findings li').count(), 1);
    assert.equal(await card.locator('.r-citations a').getAttribute('href'), 'https://example.com/guide');
    assert.equal(await card.locator('.stepper [aria-current=step]').textContent(), 'completed');
    // The daemon's routing decision has its own row: the candidates and scores, who was left out and
    // why, and the reason in words.
    const routing = page.locator('.ev-routing-decision');
    assert.match(await routing.textContent() || '', /matched requires\[skill:math\].*only eligible agent/);
    assert.equal(await routing.locator('tr.selected td.num').textContent(), '1.000');
    await routing.locator('.excluded-list summary', { hasText: '1 excluded' }).click();
    assert.match(await routing.locator('tr.excluded', { hasText: 'ola' }).textContent() || '', /lacks required capability skill:math/);
    // Folded by the page's own logic, the daemon's events for the task went through every state, in
    // order (requested lasts only until the router looks at it, so it is checked here).
    assert.deepEqual(await statesOf(s.task_id), ['requested', 'queued', 'routed', 'routed', 'accepted', 'running', 'completed']);

    // The run's view sums its tasks' usage in its summary line, as `GET /v1/runs/{id}/tasks` has it.
    await page.goto(`${url}/#/run/${s.run_id}`);
    const tree = await (await fetch(`${url}/v1/runs/${s.run_id}/tasks`)).json();
    assert.equal(tree.usage.tokens, 1234);
    assert.equal(tree.tasks[0].usage.tokens, 1234);
    await page.locator('.run-view .view-sub', { hasText: '1 tasks · 1,234 tokens · $0.0042 · 1 request' }).waitFor();
  });
});

test('each message type is rendered for what it is', async (t) => {
  const s = await story(env.daemon.url);
  await withPage(env.browser, t.name, `${env.daemon.url}/#/thread/${s.thread}`, async (page) => {
    await live(page);
    // Chat as conversation.
    await page.locator('.ev-chat-message .chat-text', { hasText: 'summarise the Q3 report' }).waitFor();
    // The routed copies of the requests fold into their tasks' cards: one card per task.
    assert.equal(await page.locator('.timeline .task-card').count(), 3);
    // Errors highlighted with code and retryable flag, inside the failed task's card.
    const failed = page.locator(`.task-card[data-task="${s.failing}"]`);
    assert.equal(await failed.getAttribute('data-state'), 'failed');
    assert.equal(await failed.locator('.error-code').textContent(), 'UPSTREAM_TIMEOUT');
    assert.equal(await failed.locator('.retryable').textContent(), 'not retryable');
    // Code review findings by severity.
    const review = page.locator(`.task-card[data-task="${s.review}"]`);
    assert.deepEqual(await review.locator('.r-findings-table .sev').allTextContents(), ['high', 'low']);
    assert.match(await review.locator('.assignee').textContent() || '', /ida/);
    // A tool call as a card: the tool, where the call stands (no adapter serves it: called, for an
    // agent to answer), its arguments folded, with their JSON when opened.
    const call = page.locator('.ev-tool-call.call-card');
    assert.equal(await call.getAttribute('data-state'), 'called');
    assert.equal(await call.locator('.call-state').textContent(), 'called');
    const args = call.locator('details.raw', { hasText: 'arguments' });
    assert.equal(await args.evaluate((d) => /** @type {HTMLDetailsElement} */ (d).open), false);
    await args.locator('summary').click();
    assert.match(await args.locator('clutch-json').textContent() || '', /"query": "Q3 report revenue"/);
    // Relative timestamps, absolute on hover.
    const time = page.locator('.ev-chat-message time').first();
    assert.match(await time.textContent() || '', /ago|just now/);
    assert.match(await time.getAttribute('title') || '', /\d{4}-\d\d-\d\dT/);
    // A tool that is not on ken's card is refused, and the daemon answers the call with a tool.error.
    // (Outside the research task: the daemon refuses anything about a task that has ended.)
    const { results } = await post(env.daemon.url, [msg({ thread_id: s.thread, run_id: s.run, type: 'tool.call', payload: { tool: 'shell.exec', arguments: { cmd: 'ls' } } })]);
    assert.equal(results[0].error?.code, 'FORBIDDEN');
    const refused = page.locator('.ev-tool-error');
    await refused.waitFor();
    assert.equal(await refused.locator('.error-code').textContent(), 'FORBIDDEN');
    assert.match(await refused.locator('.ev-head').textContent() || '', /orchestrator.*ken/);
    assert.match(await refused.textContent() || '', /shell\.exec is not among the tools on agent:ken's card/);
    // A payload type without a renderer shows raw JSON.
    await post(env.daemon.url, msg({ thread_id: s.thread, run_id: s.run, type: 'chat.message', payload_type: 'unknown.thing.v3', payload: { answer: 42 } }));
    const raw = page.locator('.ev-chat-message', { hasText: 'unknown.thing.v3' });
    await raw.locator('details.raw summary').click();
    assert.match(await raw.locator('clutch-json').textContent() || '', /"answer": 42/);
  }, { viewport: { width: 1366, height: 2400 } }); // the whole story on screen (the list is virtualised)
});

test("the daemon's verdicts show on the cards: no eligible agent, a timeout, a retry", async (t) => {
  const url = env.daemon.url;
  // tim may run a task for one second only; rex fails once, then succeeds.
  const tim = await new Agent(url, 'tim', { capabilities: [{ id: 'skill:slow', version: '1.0.0' }], limits: { max_runtime_sec: 1 } }).register();
  const rex = await new Agent(url, 'rex', { capabilities: [{ id: 'skill:flaky', version: '1.0.0' }] }).register();
  const base = { thread_id: newId('thr'), run_id: newId('run') };
  await post(url, msg({ ...base, from: { agent_id: 'user:ada' }, payload: { text: 'Three tasks that will not go smoothly' } }));
  await withPage(env.browser, t.name, `${url}/#/thread/${base.thread_id}`, async (page) => {
    await live(page);
    /** @param {string} id @param {string} state */
    const cardIn = (id, state) => page.locator(`.task-card[data-task="${id}"][data-state="${state}"]`);

    // Nobody has the skill: a routing failure (not queued) and the daemon's task.error end it.
    const none = await ask(url, { ...base, requires: ['skill:astrology'], payload: { goal: 'Read the stars' } });
    const unroutable = cardIn(none.task_id, 'failed');
    await unroutable.waitFor();
    assert.equal(await unroutable.locator('.error-code').textContent(), 'NO_ELIGIBLE_AGENT');
    assert.equal(await unroutable.locator('.retryable').textContent(), 'not retryable');
    assert.match(await unroutable.locator('.routing-failed').textContent() || '', /No agent matched — no eligible agent among \d+ registered/);
    const failure = page.locator('.ev-routing-failure');
    assert.doesNotMatch(await failure.textContent() || '', /queued/);
    assert.match(await failure.locator('tr', { hasText: 'tim' }).textContent() || '', /lacks required capability skill:astrology/);
    assert.deepEqual(await statesOf(none.task_id), ['requested', 'requested', 'failed']);

    // A task running past tim's max_runtime_sec gets the daemon's task.timeout.
    const slow = await ask(url, { ...base, requires: ['skill:slow'], payload: { goal: 'Take your time' } });
    const d = await tim.delivery(slow.task_id);
    await tim.accept(d);
    await tim.progress(d, { percent: 10, message: 'still going' });
    const timedOut = cardIn(slow.task_id, 'timed_out');
    await timedOut.waitFor();
    assert.match(await timedOut.textContent() || '', /Timed out — the task ran past its agent's max_runtime_sec by orchestrator/);
    assert.equal(await timedOut.locator('.stepper [aria-current=step]').textContent(), 'timed out');
    await taskIn(url, slow.task_id, 'timed_out');

    // A retryable error: the card shows the failure as retrying (the daemon's notice that it will
    // route the task again), then the daemon routes it again (attempt 2) and the same card starts
    // over, without the old error.
    const flaky = await ask(url, { ...base, requires: ['skill:flaky'], payload: { goal: 'Try, try again' } });
    const first = await rex.delivery(flaky.task_id);
    await rex.accept(first);
    await rex.error(first, { code: 'RATE_LIMITED', message: 'too many requests upstream', retryable: true });
    const failedOnce = cardIn(flaky.task_id, 'retrying');
    await failedOnce.waitFor();
    assert.equal(await failedOnce.locator('.retryable').textContent(), 'retryable');
    const again = await rex.delivery(flaky.task_id, 2);
    assert.equal(again.attempt, 2);
    const rerouted = cardIn(flaky.task_id, 'routed');
    await rerouted.waitFor();
    assert.equal(await rerouted.locator('.card-line .attempt').textContent(), 'attempt 2');
    assert.equal(await rerouted.locator('.error-block').count(), 0, 'the old error is history');
    await rex.accept(again);
    await rex.result(again, { text: 'worked the second time' });
    await cardIn(flaky.task_id, 'completed').waitFor();
    assert.equal(await page.locator(`.task-card[data-task="${flaky.task_id}"]`).count(), 1);
    assert.equal(await page.locator('.ev-routing-decision:has(tr.selected:has-text("rex"))').count(), 2, 'routed twice, each decision its own row');
    assert.deepEqual(await statesOf(flaky.task_id), ['requested', 'routed', 'routed', 'accepted', 'failed', 'retrying', 'routed', 'routed', 'accepted', 'completed']);
  });
});
