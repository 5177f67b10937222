// Takes the screenshots in docs/screenshots/ (run by scripts/screenshots): a daemon filled with a
// small team's work, each view in light and dark, at a laptop's size. The team plays itself through the
// API (agents register and answer what the daemon routes to them), so the routing decisions, queued
// task, budget notice and status change on the pictures are the daemon's own. The README's `oauth`
// workflow is worked over HTTP (setup completed with its checkpoints, google in progress), a built-in
// LLM agent answers a task against a local fake Anthropic server, and a mirror session waits for its
// members.
// CLUTCH_SCREENSHOTS_DIR writes them elsewhere (to look before replacing the committed ones).

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Agent, ask, startDaemon, launch, post, msg, newId, story, live, until, eventually, request, taskIn, ROOT } from './support.mjs';
import { llmConfig, startFakeLlm } from './fake-llm.mjs';

const OUT = process.env.CLUTCH_SCREENSHOTS_DIR || path.join(ROOT, 'docs', 'screenshots');
const VIEWPORT = { width: 1440, height: 900 };

/**
 * The story (research, review, a failed fetch), and an ops thread: release checks running on tess (who
 * spends past its token budget), a deploy that depends on them, queued while the only ops agent is
 * busy; amy stops heartbeating and goes stale.
 * @param {string} url
 */
async function seed(url) {
  const s = await story(url);
  const tess = await new Agent(url, 'tess', { display: { name: 'tess', desc: 'Tester: runs the release checks' }, capabilities: [{ id: 'skill:testing', version: '3.1.0' }], limits: { max_concurrency: 2 }, budget: { tokens: 60_000, cost_usd: 2 } }).register();
  const ops = await new Agent(url, 'ops', { display: { name: 'ops', desc: 'Operator: deploys and watches services' }, capabilities: [{ id: 'skill:ops', version: '1.0.0', tools: ['tool:kubectl'] }], limits: { max_concurrency: 1 }, budget: { tokens: 50_000 } }).register();
  const amy = await new Agent(url, 'amy', { display: { name: 'amy', desc: 'Writer: release notes and summaries' }, capabilities: [{ id: 'skill:writing', version: '2.0.0' }], limits: { max_concurrency: 2 } }).register();
  const alive = [s.ken, s.ida, tess, ops].map((a) => a.keepAlive(1000));

  const base = { thread_id: newId('thr'), run_id: newId('run') };
  const [checks, watch, deploy] = [newId('task'), newId('task'), newId('task')];
  await post(url, msg({ ...base, from: { agent_id: 'user:lin' }, payload: { text: 'Deploy 2.4 to staging once the checks pass, please.' } }));
  await ask(url, { ...base, task_id: watch, from: { agent_id: 'user:lin' }, requires: ['skill:ops'], payload: { goal: 'Watch the staging error rate' } });
  const w = await ops.delivery(watch);
  await ops.accept(w);
  await ops.progress(w, { percent: 20, message: 'error rate 0.2%' });
  await ask(url, { ...base, task_id: checks, from: { agent_id: 'user:lin' }, requires: ['skill:testing'], payload: { goal: 'Run the release checks for 2.4' } });
  const c = await tess.delivery(checks);
  await tess.accept(c);
  await tess.progress(c, { percent: 65, message: '212 of 326 tests passed so far', usage: { tokens: 64_000, cost_usd: 1.31 } });
  await ask(url, { ...base, task_id: deploy, from: { agent_id: 'user:lin' }, requires: ['skill:ops'], meta: { depends_on: [checks] }, payload: { goal: 'Deploy 2.4 to staging' } });
  await post(url, msg({ thread_id: s.thread, run_id: s.run, from: { agent_id: 'user:ada' }, payload: { text: 'Thanks both. Can we get the appendix another way?' } }));
  const oauth = await workflow(url, s.ken);
  const llm = await ask(url, { thread_id: newId('thr'), run_id: newId('run'), requires: ['skill:summarise'], payload: { goal: 'Summarise the Q3 report: revenue up 12% on services, hardware flat, margin up.' } });
  await taskIn(url, llm.task_id, 'completed');
  const session = await request(url, 'POST', '/v1/positions/mirror/invoke', { input: 'Is the 2.4 release safe to ship?', agents: { Reflector: 'agent:ken', Verifier: 'user:lin' }, agent_id: 'user:lin' });
  if (session.status !== 201) throw new Error(`mirror: ${session.status} ${JSON.stringify(session.body)}`);
  // amy has not heartbeated since it registered.
  await eventually(async () => (await request(url, 'GET', `/v1/agents/${amy.id}`)).body?.status === 'stale', 'amy to go stale');
  return { s, ops: base, oauth, llm, stop: () => alive.forEach((stop) => stop()) };
}

/**
 * The README's `oauth` workflow, worked by ken over HTTP: setup done (two checkpoints, an outcome),
 * google in progress with a checkpoint, github waiting for nobody.
 * @param {string} url
 * @param {Agent} ken
 */
async function workflow(url, ken) {
  /** @param {string} method @param {string} route @param {unknown} body */
  const send = async (method, route, body) => {
    const r = await request(url, method, route, body);
    if (r.status >= 300) throw new Error(`${method} ${route}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  const wf = await send('POST', '/v1/workflows', { name: 'oauth', source: 'issue 7', description: 'Sign in with Google and GitHub' });
  await send('PUT', `/v1/workflows/${wf.id}/plan`, { summary: 'OAuth login', tasks: [{ name: 'setup', description: 'Add the OAuth client library and config' }, { name: 'google', depends_on: ['setup'] }, { name: 'github', depends_on: [0] }, { name: 'docs', depends_on: ['google', 'github'] }] });
  const tasks = (await send('GET', `/v1/workflows/${wf.id}`, undefined)).tasks;
  const id = Object.fromEntries(tasks.map((/** @type {any} */ t) => [t.name, t.id]));
  const as = { agent_id: ken.id };
  await send('POST', `/v1/tasks/${id.setup}/claim`, as);
  await send('POST', `/v1/tasks/${id.setup}/status`, { ...as, status: 'in_progress' });
  await send('POST', `/v1/tasks/${id.setup}/checkpoints`, { ...as, type: 'plan', summary: 'use the oauth2 crate; one config section per provider' });
  await send('POST', `/v1/tasks/${id.setup}/checkpoints`, { ...as, type: 'progress', summary: 'deps installed, config parsed', files_changed: ['Cargo.toml', 'src/auth/config.rs'] });
  await send('POST', `/v1/tasks/${id.setup}/status`, { ...as, status: 'completed', outcome: 'OAuth client configured', outcome_detail: { files: ['src/auth/config.rs'] } });
  await send('POST', `/v1/tasks/${id.google}/claim`, as);
  await send('POST', `/v1/tasks/${id.google}/status`, { ...as, status: 'in_progress' });
  await send('POST', `/v1/tasks/${id.google}/checkpoints`, { ...as, type: 'decision', summary: 'PKCE on, refresh tokens stored encrypted', files_changed: ['src/auth/google.rs'] });
  return { run: wf.id, google: id.google };
}

// The LLM agent's provider: its first call uses `emit`, its second answers.
const fake = await startFakeLlm((body, n) =>
  n % 2 === 1
    ? { text: 'Reading the report first.', tool: { name: 'emit', input: { message: 'read the report, writing the summary' } } }
    : { text: 'Revenue grew 12% on services while hardware stayed flat.\n\nMargins improved for the third quarter running; the outlook is cautious.' },
);
// Agents that stop heartbeating go stale after 3 s here (the others are kept alive while this runs).
const daemon = await startDaemon({ env: { CLUTCH_ENGINE_STALE_AFTER: '3000ms', CLUTCH_TEST_LLM_KEY: 'test-key' }, files: { 'clutch.toml': llmConfig(fake.url) } });
const browser = await launch();
/** @type {(() => void) | undefined} */
let stop;
try {
  const seeded = await seed(daemon.url);
  const { s, oauth, llm } = seeded;
  const ops = seeded.ops;
  stop = seeded.stop;
  mkdirSync(OUT, { recursive: true });
  /** @type {[string, string, (page: import('playwright-core').Page) => Promise<void>][]} */
  const views = [
    ['thread', `#/thread/${s.thread}`, async (page) => {
      await page.locator('.timeline .task-card').first().waitFor();
    }],
    ['run', `#/run/${s.run}`, async (page) => {
      await page.locator('.task-tree a.node-link').first().waitFor();
    }],
    ['task', `#/run/${s.run}/task/${s.review}`, async (page) => {
      await page.locator('.task-head .task-card').waitFor();
    }],
    ['workflow', `#/run/${oauth.run}/task/${oauth.google}`, async (page) => {
      await page.locator('.workflow-panel .plan-node').first().waitFor();
      await page.locator('.task-head .task-card .checkpoints').waitFor();
    }],
    ['llm', `#/run/${llm.run_id}/task/${llm.task_id}`, async (page) => {
      await page.locator('.task-head details.llm-call').first().waitFor();
      // The first call opened: the system prompt, the task as sent, the answer with its tool use.
      await page.locator('.task-head details.llm-call[data-turn="1"] > summary').click();
      await page.locator('.task-head .r-llm').waitFor();
    }],
    ['positions', '#/positions', async (page) => {
      await page.locator('.sessions-list tr[data-session]').first().waitFor();
      await page.locator('.position-card').first().waitFor();
    }],
    ['agents', '#/agents', async (page) => {
      await page.locator('.agent-card[data-agent="agent:ken"]').waitFor();
    }],
    ['composer', `#/thread/${ops.thread_id}`, async (page) => {
      await page.locator('.composer input[value=task]').check();
      await page.locator('.composer input[name=user]').fill('lin');
      await page.locator('.composer input[name=requires]').fill('skill:ops tool:kubectl');
      await page.locator('.composer textarea').fill('Roll back staging if the error rate goes above 1%');
    }],
    ['search', '#/?type=task.*&q=review', async (page) => {
      await page.locator('.timeline .vrow').first().waitFor();
    }],
    ['replay', `#/replay/${s.run}`, async (page) => {
      await page.locator('.replay-view[data-state=ready]').waitFor();
      // Up to the review's result (event 13).
      for (let i = 0; i < 13; i++) await page.locator('.replay-controls button[aria-label=step]').click();
      await page.locator(`.task-card[data-task="${s.review}"][data-state=completed]`).waitFor({ state: 'attached' });
    }],
  ];
  for (const scheme of /** @type {const} */ (['light', 'dark'])) {
    const context = await browser.newContext({ viewport: VIEWPORT, colorScheme: scheme, deviceScaleFactor: 1 });
    const page = await context.newPage();
    await page.goto(daemon.url);
    // A first visit counts everything as read; mark a few as new so the sidebar shows unread counts.
    await page.evaluate(() => localStorage.setItem('clutch.baseline', JSON.stringify(20)));
    for (const [name, hash, ready] of views) {
      await page.goto(`${daemon.url}/${hash}`);
      await live(page);
      await ready(page);
      await until(page, () => !document.querySelector('.history-note:not([hidden])'));
      await page.waitForTimeout(250);
      const file = path.join(OUT, `${name}-${scheme}.png`);
      await page.screenshot({ path: file });
      console.log(`screenshots: ${path.relative(ROOT, file)}`);
    }
    await context.close();
  }
} finally {
  stop?.();
  await browser.close();
  await daemon.dispose();
  await fake.close();
}
