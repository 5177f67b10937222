// Workflows in the browser, and one truth about states. The README's `oauth` workflow (setup, google
// after setup, github after the first task) is created, planned and worked over HTTP as an agent
// works it; the run view names its tasks and their dependencies, shows the plan as a graph with each
// task's live state and holder, its checkpoints (type, summary, files), its outcome or error, and the
// workflow's own status on its root. At every step the state the page shows for each task is the
// state the daemon's views give: GET /v1/tasks/{id} and the task's row of GET /v1/tasks?run=…; a
// routed task is walked through its states the same way.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, ask, daemonAndBrowser, eventually, events, live, msg, newId, post, request, withPage } from './support.mjs';

const env = daemonAndBrowser();

/**
 * A request that must succeed; answers its body.
 * @param {string} method @param {string} route @param {unknown} [body]
 */
async function send(method, route, body) {
  const { status, body: answer } = await request(env.daemon.url, method, route, body);
  if (status >= 300) throw new Error(`${method} ${route}: ${status} ${JSON.stringify(answer)}`);
  return answer;
}

/**
 * The states the daemon's views give each task: its own view's and its list row's.
 * @param {string} run
 * @param {string[]} ids
 */
async function daemonStates(run, ids) {
  const rows = (await send('GET', `/v1/tasks?run=${run}&limit=200`)).items;
  /** @type {Record<string, {view: string, row: string}>} */
  const states = {};
  for (const id of ids) {
    const view = (await send('GET', `/v1/tasks/${id}`)).state;
    const row = rows.find((/** @type {any} */ r) => r.task_id === id)?.state;
    states[id] = { view, row };
  }
  return states;
}

/**
 * Asserts that each task is in its expected state in the daemon's task view, its list row and the
 * page (the tree's row, the task's card when shown, its node in the plan graph when drawn).
 * @param {import('playwright-core').Page} page
 * @param {string} run
 * @param {Record<string, string>} expected task id → state
 * @param {string} step what was just done (for the messages)
 */
async function agree(page, run, expected, step) {
  const ids = Object.keys(expected);
  const daemon = await eventually(async () => {
    const s = await daemonStates(run, ids);
    return ids.every((id) => s[id].view === expected[id]) ? s : null;
  }, `the daemon's views after ${step}: ${JSON.stringify(expected)}`).catch(async (e) => {
    throw new Error(`${e.message}; they say ${JSON.stringify(await daemonStates(run, ids))}`);
  });
  for (const id of ids) assert.equal(daemon[id].row, daemon[id].view, `${step}: GET /v1/tasks?run row of ${id} says ${daemon[id].row}, GET /v1/tasks/${id} says ${daemon[id].view}`);
  await page
    .waitForFunction(
      (want) => Object.entries(want).every(([id, state]) => {
        const shown = [...document.querySelectorAll(`.task-tree li[data-state]`)].filter((li) => li.querySelector(`:scope > .node-wrap a.node-link[data-task="${id}"]`));
        const nodes = [...document.querySelectorAll(`.plan-node[data-task="${id}"], .task-card[data-task="${id}"]`)];
        return shown.length === 1 && shown.every((li) => li.getAttribute('data-state') === state) && nodes.every((n) => n.getAttribute('data-state') === state);
      }),
      expected,
      { timeout: 15_000 },
    )
    .catch(async () => {
      const shown = await page.evaluate((list) => list.map((id) => [id, document.querySelector(`.task-tree li:has(> .node-wrap a.node-link[data-task="${id}"])`)?.getAttribute('data-state')]), ids);
      throw new Error(`${step}: the page shows ${JSON.stringify(shown)}, the daemon ${JSON.stringify(expected)}`);
    });
}

test('the oauth workflow: names, dependencies by name, holder, checkpoints, outcome, and every state as the daemon says it', async (t) => {
  const url = env.daemon.url;
  const ken = await new Agent(url, 'ken', { capabilities: [{ id: 'skill:code', version: '1.0.0' }] }).register();
  const stop = ken.keepAlive(2_000);
  try {
    const wf = await send('POST', '/v1/workflows', { name: 'oauth', source: 'issue 7' });
    const run = wf.id;
    const root = wf.root_task_id;
    await withPage(env.browser, t.name, `${url}/#/run/${run}`, async (page) => {
      await live(page);
      await agree(page, run, { [root]: 'planning' }, 'creating the workflow');
      assert.equal(await page.locator('.view-title').textContent(), 'workflow oauth');

      await send('PUT', `/v1/workflows/${run}/plan`, { tasks: [{ name: 'setup' }, { name: 'google', depends_on: ['setup'] }, { name: 'github', depends_on: [0] }] });
      const plan = (await send('GET', `/v1/workflows/${run}`)).tasks;
      const id = Object.fromEntries(plan.map((/** @type {any} */ p) => [p.name, p.id]));
      /** @param {Record<string, string>} states by task name, `root` for the root */
      const want = (states) => Object.fromEntries(Object.entries(states).map(([name, s]) => [name === 'root' ? root : id[name], s]));
      await agree(page, run, want({ root: 'in_progress', setup: 'pending', google: 'pending', github: 'pending' }), 'planning');

      // Named by their names, dependencies by name, in the tree and in the plan graph.
      const tree = page.locator('.task-tree');
      assert.deepEqual(await tree.locator('.node-title').allTextContents(), ['workflow oauth', 'setup', 'google', 'github']);
      assert.equal(await tree.locator(`li:has(> .node-wrap a[data-task="${id.google}"]) .deps`).first().textContent(), 'after setup');
      assert.equal(await tree.locator(`li:has(> .node-wrap a[data-task="${id.github}"]) .deps`).first().textContent(), 'after setup');
      const graph = page.locator('.workflow-panel .plan-graph');
      assert.deepEqual(await graph.locator('.plan-node .plan-name').allTextContents(), ['setup', 'google', 'github']);
      assert.equal(await graph.locator('svg.edges path').count(), 2, 'an edge from setup to each dependant');
      assert.match(await page.locator('.workflow-panel .workflow-head').textContent() || '', /0 of 3 tasks completed/);
      assert.doesNotMatch(await page.locator('.run-view').textContent() || '', /task task_/);

      // Claimed, in progress, blocked, released, claimed again: the holder shows while it holds.
      await send('POST', `/v1/tasks/${id.setup}/claim`, { agent_id: ken.id });
      await agree(page, run, want({ root: 'in_progress', setup: 'claimed' }), 'the claim');
      assert.equal(await graph.locator(`.plan-node[data-task="${id.setup}"] .plan-holder`).textContent(), 'ken');
      await send('POST', `/v1/tasks/${id.setup}/status`, { agent_id: ken.id, status: 'in_progress' });
      await agree(page, run, want({ root: 'in_progress', setup: 'in_progress' }), 'in progress');
      await send('POST', `/v1/tasks/${id.setup}/checkpoints`, { agent_id: ken.id, type: 'progress', summary: 'deps installed', files_changed: ['Cargo.toml', 'src/auth.rs'] });
      await send('POST', `/v1/tasks/${id.setup}/status`, { agent_id: ken.id, status: 'blocked', reason: 'waiting for the client secret' });
      await agree(page, run, want({ root: 'blocked', setup: 'blocked', google: 'pending', github: 'pending' }), 'blocked');
      await send('POST', `/v1/tasks/${id.setup}/release`, { agent_id: ken.id, reason: 'someone else has the secret' });
      await agree(page, run, want({ root: 'in_progress', setup: 'pending' }), 'the release');
      assert.equal(await graph.locator(`.plan-node[data-task="${id.setup}"] .plan-holder`).count(), 0, 'released: no holder');
      await send('POST', `/v1/tasks/${id.setup}/claim`, { agent_id: ken.id });
      await agree(page, run, want({ setup: 'claimed' }), 'the second claim');

      // The task's own view: holder, checkpoint with its files, then its outcome.
      await page.locator(`.plan-node[data-task="${id.setup}"]`).click();
      const card = page.locator(`.task-head .task-card[data-task="${id.setup}"]`);
      await card.waitFor();
      assert.match(await card.locator('.lease-line').textContent() || '', /Held by ken since/);
      const checkpoint = card.locator('.checkpoints .r-checkpoint').first();
      assert.equal(await checkpoint.locator('.cp-type').textContent(), 'progress');
      assert.equal(await checkpoint.locator('.cp-summary').textContent(), 'deps installed');
      assert.deepEqual(await checkpoint.locator('.cp-files code').allTextContents(), ['Cargo.toml', 'src/auth.rs']);
      await send('POST', `/v1/tasks/${id.setup}/status`, { agent_id: ken.id, status: 'completed', outcome: 'OAuth client configured' });
      await agree(page, run, want({ root: 'in_progress', setup: 'completed', google: 'pending', github: 'pending' }), 'completing setup');
      assert.match(await card.locator('.outcome').textContent() || '', /Outcome: OAuth client configured/);
      await page.locator('.load-context').click();
      await page.locator('.context-box details.raw[open]').waitFor();
      assert.match(await page.locator('.context-box').textContent() || '', /Context of \d+ tokens/);
      assert.match(await page.locator('.context-box').textContent() || '', /deps installed/);

      // google fails; github completes; nothing else can run: the workflow failed.
      await send('POST', `/v1/tasks/${id.google}/claim`, { agent_id: ken.id });
      await send('POST', `/v1/tasks/${id.google}/status`, { agent_id: ken.id, status: 'failed', error: 'Google refused the redirect URI' });
      await agree(page, run, want({ root: 'in_progress', google: 'failed', github: 'pending' }), 'failing google');
      await send('POST', `/v1/tasks/${id.github}/claim`, { agent_id: ken.id });
      await send('POST', `/v1/tasks/${id.github}/status`, { agent_id: ken.id, status: 'completed', outcome: 'GitHub login works' });
      await agree(page, run, want({ root: 'failed', setup: 'completed', google: 'failed', github: 'completed' }), 'the end');
      await page.locator(`.plan-node[data-task="${id.google}"]`).click();
      const failed = page.locator(`.task-head .task-card[data-task="${id.google}"]`);
      await failed.waitFor();
      assert.match(await failed.locator('.error-block').textContent() || '', /Google refused the redirect URI/);
      assert.match(await page.locator('.workflow-panel .workflow-head').textContent() || '', /2 of 3 tasks completed/);
    });
  } finally {
    stop();
  }
});

test('a routed task walks requested, routed, accepted, running, retrying and completed as the daemon says', async (t) => {
  const url = env.daemon.url;
  const rex = await new Agent(url, 'rex', { capabilities: [{ id: 'skill:flaky', version: '1.0.0' }] }).register();
  const base = { thread_id: newId('thr'), run_id: newId('run') };
  await post(url, msg({ ...base, from: { agent_id: 'user:ada' }, payload: { text: 'One flaky task' } }));
  await withPage(env.browser, t.name, `${url}/#/run/${base.run_id}`, async (page) => {
    await live(page);
    const flaky = await ask(url, { ...base, requires: ['skill:flaky'], payload: { goal: 'Try, try again' } });
    const task = flaky.task_id;
    const first = await rex.delivery(task);
    await agree(page, base.run_id, { [task]: 'routed' }, 'routing');
    await rex.accept(first);
    await agree(page, base.run_id, { [task]: 'accepted' }, 'the accept');
    await rex.progress(first, { percent: 30, message: 'trying' });
    await agree(page, base.run_id, { [task]: 'running' }, 'progress');
    await rex.error(first, { code: 'RATE_LIMITED', message: 'too many requests upstream', retryable: true });
    // The daemon notes the retry, then routes the task again: retrying until then.
    const notice = await eventually(async () => (await events(url, { task_id: task, type: 'chat.system' })).find((e) => e.payload_type === 'clutch.task.retry.v1'), 'the retry notice');
    assert.ok(notice);
    const again = await rex.delivery(task, 2);
    await agree(page, base.run_id, { [task]: 'routed' }, 'routing again');
    await rex.accept(again);
    await rex.result(again, { text: 'worked the second time' });
    await agree(page, base.run_id, { [task]: 'completed' }, 'the result');
  });
});
