// Live views: messages posted through the API appear in the sidebar and the timeline as they happen,
// task cards change state in place, and each message type is rendered for what it is.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { daemonAndBrowser, live, msg, newId, post, postAll, story, withPage } from './support.mjs';

const env = daemonAndBrowser();

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

test('a task card changes state in place: requested, routed, accepted, progress, result', async (t) => {
  await withPage(env.browser, t.name, env.daemon.url, async (page) => {
    await live(page);
    const s = { thread_id: newId('thr'), run_id: newId('run'), task_id: newId('task') };
    const orch = { agent_id: 'agent:orchestrator' };
    await post(env.daemon.url, msg({ ...s, payload: { text: 'kick-off' } }));
    await page.locator(`.sidebar a[data-id="${s.thread_id}"]`).click();
    const card = page.locator(`.task-card[data-task="${s.task_id}"]`);
    /** @param {Record<string, any>} m @param {string} state */
    const step = async (m, state) => {
      await post(env.daemon.url, msg({ ...s, ...m }));
      await page.locator(`.task-card[data-task="${s.task_id}"][data-state="${state}"]`).waitFor();
      assert.equal(await card.count(), 1, 'one card per task, updated in place');
    };
    await step({ type: 'task.request', from: { agent_id: 'user:ada' }, to: [orch], requires: ['skill:research'], payload: { goal: 'Find the answer' } }, 'requested');
    assert.match(await card.locator('.task-title').textContent() || '', /Find the answer/);
    assert.equal(await card.locator('.cap').textContent(), 'skill:research');
    await step({ type: 'routing.decision', from: orch, payload: { selected: 'agent:ken', candidates: ['agent:ken'], scores: { 'agent:ken': 0.9 }, reason: 'only match' } }, 'routed');
    await step({ type: 'task.request', from: orch, to: [{ agent_id: 'agent:ken' }], payload: { goal: 'Find the answer' } }, 'routed');
    await step({ type: 'task.accept', payload: {} }, 'accepted');
    await step({ type: 'task.progress', payload: { percent: 40, message: 'halfway there' } }, 'running');
    assert.equal(await card.locator('clutch-bar').getAttribute('value'), '40');
    assert.match(await card.textContent() || '', /halfway there/);
    await step({ type: 'task.result', payload_type: 'research.summary.v1', payload: { summary: 'It is 42.', findings: [{ claim: 'The answer is 42', citations: [1] }], citations: [{ title: 'The Guide', url: 'https://example.com/guide' }] } }, 'done');
    assert.equal(await card.locator('.r-findings li').count(), 1);
    assert.equal(await card.locator('.r-citations a').getAttribute('href'), 'https://example.com/guide');
    assert.equal(await card.locator('.stepper [aria-current=step]').textContent(), 'done');
    // The routing decision has its own row, a table of candidates and scores with the reason.
    const routing = page.locator('.ev-routing-decision');
    assert.match(await routing.textContent() || '', /only match/);
    assert.equal(await routing.locator('tr.selected td.num').textContent(), '0.900');
  });
});

test('each message type is rendered for what it is', async (t) => {
  const s = story();
  await postAll(env.daemon.url, s.messages);
  await withPage(env.browser, t.name, `${env.daemon.url}/#/thread/${s.thread}`, async (page) => {
    await live(page);
    // Chat as conversation.
    await page.locator('.ev-chat-message .chat-text', { hasText: 'summarise the Q3 report' }).waitFor();
    // Errors highlighted with code and retryable flag, inside the failed task's card.
    const failed = page.locator(`.task-card[data-task="${s.failing}"]`);
    assert.equal(await failed.getAttribute('data-state'), 'failed');
    assert.equal(await failed.locator('.error-code').textContent(), 'UPSTREAM_TIMEOUT');
    assert.equal(await failed.locator('.retryable').textContent(), 'retryable');
    // Code review findings by severity.
    const review = page.locator(`.task-card[data-task="${s.review}"]`);
    assert.deepEqual(await review.locator('.r-findings-table .sev').allTextContents(), ['high', 'low']);
    // Tool calls collapsed, with their JSON when opened.
    const call = page.locator('.ev-tool-call details.tool');
    assert.equal(await call.evaluate((d) => /** @type {HTMLDetailsElement} */ (d).open), false);
    await call.locator('summary').click();
    assert.match(await call.locator('clutch-json').textContent() || '', /"query": "Q3 report revenue"/);
    // Relative timestamps, absolute on hover.
    const time = page.locator('.ev-chat-message time').first();
    assert.match(await time.textContent() || '', /ago|just now/);
    assert.match(await time.getAttribute('title') || '', /\d{4}-\d\d-\d\dT/);
    // A payload type without a renderer shows raw JSON.
    await post(env.daemon.url, msg({ thread_id: s.thread, run_id: s.run, type: 'chat.message', payload_type: 'unknown.thing.v3', payload: { answer: 42 } }));
    const raw = page.locator('.ev-chat-message', { hasText: 'unknown.thing.v3' });
    await raw.locator('details.raw summary').click();
    assert.match(await raw.locator('clutch-json').textContent() || '', /"answer": 42/);
  });
});
