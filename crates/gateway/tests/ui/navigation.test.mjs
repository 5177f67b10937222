// Getting around: run → task → agent by clicking, the agents panel, search and filters, and the
// keyboard.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { daemonAndBrowser, live, postAll, story, until, withPage } from './support.mjs';

const s = story();
const env = daemonAndBrowser((env) => postAll(env.daemon.url, s.messages));

test('click through run, task and agent', async (t) => {
  await withPage(env.browser, t.name, env.daemon.url, async (page) => {
    await live(page);
    await page.locator(`.sidebar a[data-id="${s.run}"]`).click();
    // The tree: the root task with its two subtasks, in their live state colours.
    const tree = page.locator('.task-tree');
    await tree.locator(`a[data-task="${s.root}"]`).waitFor();
    assert.equal(await tree.locator('[role=treeitem]').count(), 3);
    assert.equal(await tree.locator(`[role=treeitem]:has(> .node-wrap a[data-task="${s.root}"]) [role=group] [role=treeitem]`).count(), 2, 'subtasks under their parent');
    assert.equal(await tree.locator(`li[data-state=failed] a[data-task="${s.failing}"]`).count(), 1);

    await tree.locator(`a[data-task="${s.review}"]`).click();
    await until(page, (id) => location.hash.endsWith(`/task/${id}`), s.review);
    const head = page.locator('.task-head .task-card');
    await head.waitFor();
    assert.equal(await head.getAttribute('data-task'), s.review);
    // The task's own events, each as its own row.
    await page.locator('.detail-pane .ev[data-type="task.accept"]').waitFor();
    assert.equal(await page.locator('.detail-pane .timeline .vrow').count(), 4);

    await head.locator('.assignee a.who', { hasText: 'ida' }).click();
    await until(page, () => location.hash === '#/agent/agent%3Aida');
    await page.locator('.agent-view .agent-card .status').waitFor();
    assert.equal(await page.locator('.agent-view .view-title').textContent(), 'ida');
    // Its messages: everything agent:ida sent.
    await until(page, () => document.querySelectorAll('.agent-view .timeline .vrow').length === 3);
    const types = await page.locator('.agent-view .timeline .ev').evaluateAll((els) => els.map((e) => e.getAttribute('data-type')));
    assert.deepEqual(types, ['task.accept', 'task.result', 'task.error']);
  });
});

test('the agents panel shows status, load, capabilities and budgets, derived from events without /v1/agents', async (t) => {
  await withPage(env.browser, t.name, `${env.daemon.url}/#/agents`, async (page) => {
    await live(page);
    const ken = page.locator('.agent-card[data-agent="agent:ken"]');
    await ken.waitFor();
    assert.match(await page.locator('.agents-view .view-sub').textContent() || '', /Derived from the events/);
    assert.equal(await ken.locator('.status').textContent(), 'online');
    assert.match(await ken.textContent() || '', /1,200/, 'token usage from progress reports');
    await ken.locator('a.agent-name').click();
    await until(page, () => location.hash === '#/agent/agent%3Aken');
  });
});

test('the agents panel uses /v1/agents when the daemon has it', async (t) => {
  const agents = [
    { agent_id: 'agent:zed', status: 'stale', card: { agent_id: 'agent:zed', capabilities: [{ id: 'skill:research', version: '1.2.0' }], limits: { max_concurrency: 4 } }, load: { in_flight: 3, max_concurrency: 4 }, success_rate: 0.75, usage: { tokens: 9000, cost_usd: 1.5, requests: 12 }, budget: { tokens: 10000, cost_usd: 5 }, last_seen: new Date().toISOString() },
    { agent_id: 'agent:amy', status: 'offline', card: null, load: { in_flight: 0, max_concurrency: null }, success_rate: null, usage: { tokens: 0, cost_usd: 0, requests: 0 }, budget: null, last_seen: null },
  ];
  await withPage(env.browser, t.name, `${env.daemon.url}/#/agents`, async (page) => {
    await page.route('**/v1/agents', (route) => route.fulfill({ json: { agents } }));
    await page.reload();
    const zed = page.locator('.agent-card[data-agent="agent:zed"]');
    await zed.waitFor();
    assert.equal(await zed.locator('.status').textContent(), 'stale');
    assert.equal(await zed.locator('clutch-bar[label=load]').getAttribute('value'), '3');
    assert.equal(await zed.locator('clutch-bar[label=load]').getAttribute('max'), '4');
    assert.equal(await zed.locator('clutch-bar[label="token budget"]').getAttribute('data-level'), 'high');
    assert.equal(await zed.locator('.cap').textContent(), 'skill:research@1.2.0');
    assert.equal(await page.locator('.agent-card[data-agent="agent:amy"] .status').textContent(), 'offline');
    assert.match(await page.locator('.agents-view .view-sub').textContent() || '', /As the daemon reports them/);
  });
});

test('search and filters by type, agent, task and text', async (t) => {
  await withPage(env.browser, t.name, env.daemon.url, async (page) => {
    await live(page);
    const rows = page.locator('.all-view .timeline .vrow');
    await until(page, () => document.querySelectorAll('.all-view .timeline .vrow').length > 0);
    await page.selectOption('.filter-bar select[name=type]', 'task.error');
    await until(page, () => document.querySelectorAll('.all-view .timeline .vrow').length === 1);
    assert.equal(await rows.locator('.error-code').textContent(), 'UPSTREAM_TIMEOUT');
    assert.match(await page.evaluate(() => location.hash), /type=task.error/, 'the address keeps the filter');

    await page.selectOption('.filter-bar select[name=type]', '');
    await page.fill('.filter-bar input[name=agent]', 'agent:orchestrator');
    await page.press('.filter-bar input[name=agent]', 'Enter');
    // Events the agent sent or was sent: the three routed requests and the routing decision it made,
    // and the two requests sent to it.
    await until(page, () => document.querySelectorAll('.all-view .timeline .vrow').length === 6);
    for (const head of await rows.locator('.ev-head').allTextContents()) assert.match(head, /orchestrator/);

    await page.fill('.filter-bar input[name=agent]', '');
    await page.fill('.filter-bar input[name=task]', s.review);
    await page.press('.filter-bar input[name=task]', 'Enter');
    await until(page, () => document.querySelectorAll('.all-view .timeline .vrow').length === 4);

    await page.fill('.filter-bar input[name=task]', '');
    await page.fill('.filter-bar input[name=q]', 'unchecked index');
    await page.press('.filter-bar input[name=q]', 'Enter');
    await until(page, () => document.querySelectorAll('.all-view .timeline .vrow').length === 1);
    assert.match(await rows.textContent() || '', /unchecked index can panic/);
  });
});

test('keyboard: shortcuts, arrow keys through sidebar and timeline, visible focus', async (t) => {
  await withPage(env.browser, t.name, `${env.daemon.url}/#/thread/${s.thread}`, async (page) => {
    await live(page);
    await page.locator('.timeline .vrow').first().waitFor();
    await page.keyboard.press('/');
    assert.equal(await page.evaluate(() => document.activeElement?.className), 'sidebar-filter');
    await page.keyboard.press('ArrowDown');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Everything');
    await page.keyboard.press('Escape');
    await page.keyboard.press('t');
    assert.equal(await page.evaluate(() => document.activeElement?.classList.contains('timeline-rows')), true);
    await page.keyboard.press('Home');
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('data-index')), '0');
    await page.keyboard.press('ArrowDown');
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('data-index')), '1');
    const outline = await page.evaluate(() => getComputedStyle(/** @type {Element} */ (document.activeElement)).outlineStyle);
    assert.notEqual(outline, 'none', 'focus is visible');
    // Enter on a task card opens the task.
    const cardIndex = await page.locator('.vrow:has(.task-card)').first().getAttribute('data-index');
    await page.evaluate((i) => /** @type {any} */ (window).__clutch.view.timeline.list.setFocus(Number(i)), cardIndex);
    await page.keyboard.press('Enter');
    await until(page, () => location.hash.includes('/task/'));
    await page.keyboard.press('g');
    await page.keyboard.press('a');
    await until(page, () => location.hash === '#/agents');
  });
});
