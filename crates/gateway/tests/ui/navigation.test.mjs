// Getting around: run → task → agent by clicking, the agents panel (as the daemon reports it, and as
// derived from the events when a daemon has no /v1/agents), search and filters, and the keyboard.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, ask, daemonAndBrowser, live, startDaemon, story, until, withPage } from './support.mjs';

/** @type {Awaited<ReturnType<typeof story>>} */
let s;
const env = daemonAndBrowser(async (env) => {
  s = await story(env.daemon.url);
});

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
    assert.equal(await tree.locator(`li[data-state=completed] a[data-task="${s.review}"]`).count(), 1);

    await tree.locator(`a[data-task="${s.review}"]`).click();
    await until(page, (id) => location.hash.endsWith(`/task/${id}`), s.review);
    const head = page.locator('.task-head .task-card');
    await head.waitFor();
    assert.equal(await head.getAttribute('data-task'), s.review);
    // The task's own events, each as its own row: ken's request, the daemon's routing decision and
    // delivery to ida, ida's accept and result.
    await page.locator('.detail-pane .ev[data-type="task.accept"]').waitFor();
    const types = await page.locator('.detail-pane .timeline .ev').evaluateAll((els) => els.map((e) => `${e.getAttribute('data-type')} ${e.querySelector('.ev-head .who')?.textContent}`));
    assert.deepEqual(types, ['task.request ken', 'routing.decision orchestrator', 'task.request orchestrator', 'task.accept ida', 'task.result ida']);

    await head.locator('.assignee a.who', { hasText: 'ida' }).click();
    await until(page, () => location.hash === '#/agent/agent%3Aida');
    await page.locator('.agent-view .agent-card .status').waitFor();
    assert.equal(await page.locator('.agent-view .view-title').textContent(), 'ida');
    // Its messages: everything agent:ida sent (its registration included).
    await until(page, () => document.querySelectorAll('.agent-view .timeline .vrow').length === 4);
    const sent = await page.locator('.agent-view .timeline .ev').evaluateAll((els) => els.map((e) => e.getAttribute('data-type')));
    assert.deepEqual(sent, ['agent.register', 'task.accept', 'task.result', 'task.error']);
  });
});

test('the agents panel shows status, load, capabilities, success and budgets as /v1/agents reports them', async (t) => {
  await withPage(env.browser, t.name, `${env.daemon.url}/#/agents`, async (page) => {
    await live(page);
    const ken = page.locator('.agent-card[data-agent="agent:ken"]');
    await ken.waitFor();
    assert.match(await page.locator('.agents-view .view-sub').textContent() || '', /2 agents · 2 online .*As the daemon reports them/);
    assert.equal(await ken.locator('.status').textContent(), 'online');
    assert.equal(await ken.locator('.cap').textContent(), 'skill:research@1.2.0');
    assert.match(await ken.textContent() || '', /Researcher: reads, searches and summarises/);
    assert.equal(await ken.locator('clutch-bar[label=load]').getAttribute('value'), '0', 'its tasks are done');
    assert.equal(await ken.locator('clutch-bar[label=load]').getAttribute('max'), '4');
    assert.match(await ken.locator('clutch-bar[label="token budget"]').textContent() || '', /1,200 \/ 200k/, 'token usage from progress reports');
    assert.equal(await ken.locator('clutch-bar[label="success rate"]').getAttribute('value'), '100');
    const ida = page.locator('.agent-card[data-agent="agent:ida"]');
    assert.equal(await ida.locator('clutch-bar[label="success rate"]').getAttribute('value'), '50', 'one result, one error');
    assert.deepEqual(await ida.locator('.cap').allTextContents(), ['skill:research@1.0.0', 'skill:code_review@2.1.0', 'skill:archive@1.0.0']);
    assert.equal(await ida.locator('clutch-bar[label="cost budget"]').count(), 0, 'no cost budget, no cost spent');
    await ken.locator('a.agent-name').click();
    await until(page, () => location.hash === '#/agent/agent%3Aken');
  });
});

test("the agents panel follows the daemon live: load, budgets, a budget notice, stale and offline", async (t) => {
  // A daemon of its own, where an agent that stops heartbeating goes stale in 1.5 s and offline in 3 s.
  const daemon = await startDaemon({ env: { CLUTCH_ENGINE_STALE_AFTER: '1500ms', CLUTCH_ENGINE_OFFLINE_AFTER: '3000ms' } });
  /** @type {(() => void)[]} */
  const stops = [];
  try {
    const url = daemon.url;
    const zed = await new Agent(url, 'zed', { capabilities: [{ id: 'skill:research', version: '1.2.0' }], limits: { max_concurrency: 4 }, budget: { tokens: 10_000, cost_usd: 5 } }).register();
    const amy = await new Agent(url, 'amy', { display: { name: 'Amy', desc: 'Writes things up' }, capabilities: [{ id: 'skill:writing', version: '2.0.0' }], budget: { tokens: 1000 } }).register();
    stops.push(zed.keepAlive(200));
    const stopAmy = amy.keepAlive(200);
    stops.push(stopAmy);
    await withPage(env.browser, t.name, `${url}/#/agents`, async (page) => {
      await live(page);
      const zedCard = page.locator('.agent-card[data-agent="agent:zed"]');
      const amyCard = page.locator('.agent-card[data-agent="agent:amy"]');
      await zedCard.waitFor();
      // zed takes three tasks and reports usage on one: 3 of 4 slots, 90% of its token budget.
      for (let i = 0; i < 3; i++) {
        const request = await ask(url, { requires: ['skill:research'], payload: { goal: `Look into item ${i}` } });
        const d = await zed.delivery(request.task_id);
        await zed.accept(d);
        if (i === 0) await zed.progress(d, { percent: 50, usage: { tokens: 9000, cost_usd: 1.5 } });
      }
      await zedCard.locator('clutch-bar[label=load][value="3"]').waitFor();
      assert.equal(await zedCard.locator('clutch-bar[label=load]').getAttribute('max'), '4');
      await zedCard.locator('clutch-bar[label="token budget"][value="9000"]').waitFor();
      assert.equal(await zedCard.locator('clutch-bar[label="token budget"]').getAttribute('data-level'), 'high');
      assert.equal(await zedCard.locator('clutch-bar[label="cost budget"]').getAttribute('data-level'), 'low');
      assert.equal(await zedCard.locator('.cap').textContent(), 'skill:research@1.2.0');

      // amy spends more than its budget on a task: the daemon says so and stops routing to it.
      const request = await ask(url, { requires: ['skill:writing'], payload: { goal: 'Write it up' } });
      const d = await amy.delivery(request.task_id);
      await amy.accept(d);
      await amy.result(d, { text: 'written', usage: { tokens: 1500 } });
      await amyCard.locator('clutch-bar[label="token budget"][value="1500"]').waitFor();
      assert.match(await amyCard.locator('clutch-bar[label="token budget"]').textContent() || '', /1,500 \/ 1,000/);
      assert.equal(await amyCard.locator('clutch-bar[label="token budget"]').getAttribute('data-level'), 'high');
      assert.equal(await amyCard.locator('.agent-name').textContent(), 'Amy');

      // amy falls silent: stale, then offline, as the daemon's status events say; zed stays online.
      stopAmy();
      await amyCard.locator('.status', { hasText: 'stale' }).waitFor();
      await amyCard.locator('.status', { hasText: 'offline' }).waitFor();
      assert.equal(await zedCard.locator('.status').textContent(), 'online');
      assert.match(await page.locator('.agents-view .view-sub').textContent() || '', /2 agents · 1 online · 0 stale · 1 offline/);

      // The daemon's notices in the log: the budget crossing and each status change.
      await page.locator('.sidebar a', { hasText: 'Everything' }).click();
      const budget = page.locator('.ev-chat-system .r-budget');
      await budget.waitFor();
      assert.match(await budget.textContent() || '', /amy reached its tokens budget \(150%\): excluded from routing/);
      assert.equal(await budget.locator('clutch-bar').getAttribute('data-level'), 'high');
      const statuses = await page.locator('.ev-agent-update .r-status').allTextContents();
      assert.deepEqual(statuses.map((x) => x.trim()), ['amy is now stale (was online)', 'amy is now offline (was stale)']);
      // They are filed under the daemon's own thread, named for what it holds.
      assert.equal(await page.locator('.sidebar a[data-id="thr_00000000000000000000000000"] .item-title').textContent(), 'Daemon notices');
    });
  } finally {
    for (const stop of stops) stop();
    await daemon.dispose();
  }
});

test('search and filters by type, agent, task and text', async (t) => {
  await withPage(env.browser, t.name, env.daemon.url, async (page) => {
    await live(page);
    const rows = page.locator('.all-view .timeline .vrow');
    /** The timeline holds `n` rows (only those near the viewport are in the page). @param {number} n */
    const rowsAre = (n) => until(page, (n) => /** @type {any} */ (window).__clutch.view.timeline.list.rows.length === n, n);
    await until(page, () => document.querySelectorAll('.all-view .timeline .vrow').length > 0);
    await page.selectOption('.filter-bar select[name=type]', 'task.error');
    await rowsAre(1);
    assert.equal(await rows.locator('.error-code').textContent(), 'UPSTREAM_TIMEOUT');
    assert.match(await page.evaluate(() => location.hash), /type=task.error/, 'the address keeps the filter');

    await page.selectOption('.filter-bar select[name=type]', '');
    await page.fill('.filter-bar input[name=agent]', 'agent:orchestrator');
    await page.press('.filter-bar input[name=agent]', 'Enter');
    // Events the orchestrator sent or was sent: the three requests for it to route, its three routing
    // decisions and three deliveries, and the seven answers the agents addressed to it (ken's accept,
    // two progress reports and result; ida's accept, result and error).
    await rowsAre(16);
    for (const head of await rows.locator('.ev-head').allTextContents()) assert.match(head, /orchestrator/);

    await page.fill('.filter-bar input[name=agent]', '');
    await page.fill('.filter-bar input[name=task]', s.review);
    await page.press('.filter-bar input[name=task]', 'Enter');
    await rowsAre(5);

    await page.fill('.filter-bar input[name=task]', '');
    await page.fill('.filter-bar input[name=q]', 'unchecked index');
    await page.press('.filter-bar input[name=q]', 'Enter');
    await rowsAre(1);
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
