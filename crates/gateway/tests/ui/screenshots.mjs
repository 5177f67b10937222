// Takes the screenshots in docs/screenshots/ (run by scripts/screenshots): a daemon filled with a
// small team's work, each view in light and dark, at a laptop's size. The team plays itself through the
// API (agents register and answer what the daemon routes to them), so the routing decisions, queued
// task, budget notice and status change on the pictures are the daemon's own.
// CLUTCH_SCREENSHOTS_DIR writes them elsewhere (to look before replacing the committed ones).

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Agent, ask, startDaemon, launch, post, msg, newId, story, live, until, eventually, request, ROOT } from './support.mjs';

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
  // amy has not heartbeated since it registered.
  await eventually(async () => (await request(url, 'GET', `/v1/agents/${amy.id}`)).body?.status === 'stale', 'amy to go stale');
  return { s, ops: base, stop: () => alive.forEach((stop) => stop()) };
}

// Agents that stop heartbeating go stale after 3 s here (the others are kept alive while this runs).
const daemon = await startDaemon({ env: { CLUTCH_ENGINE_STALE_AFTER: '3000ms' } });
const browser = await launch();
/** @type {(() => void) | undefined} */
let stop;
try {
  const seeded = await seed(daemon.url);
  const { s, ops } = seeded;
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
    ['workflow', `#/run/${ops.run_id}`, async (page) => {
      await page.locator('.task-tree .deps').waitFor();
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
}
