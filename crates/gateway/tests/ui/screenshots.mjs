// Takes the screenshots in docs/screenshots/ (run by scripts/screenshots): a daemon filled with a
// small team's work, each view in light and dark, at a laptop's size.

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, launch, postAll, msg, newId, story, live, until, ROOT } from './support.mjs';

const OUT = path.join(ROOT, 'docs', 'screenshots');
const VIEWPORT = { width: 1440, height: 900 };

/** Spreads timestamps over the last hour so relative times read naturally. @param {any[]} messages @param {number} spanMs */
function spread(messages, spanMs) {
  const start = Date.now() - spanMs;
  return messages.map((m, i) => ({ ...m, ts: new Date(start + (spanMs * i) / messages.length).toISOString() }));
}

/** A card as an agent registers it. @param {string} name @param {string} desc @param {string[]} caps @param {number} max @param {Record<string, number>} budget */
function register(name, desc, caps, max, budget) {
  const agent_id = `agent:${name}`;
  return msg({
    type: 'agent.register',
    from: { agent_id },
    payload: { card: { v: 'clutch/0.1', agent_id, display: { name, desc }, capabilities: caps.map((id) => ({ id, version: '1.0.0' })), limits: { max_concurrency: max }, budget } },
  });
}

function seed() {
  const ops = { thread_id: newId('thr'), run_id: newId('run') };
  const s = story();
  const orch = { agent_id: 'agent:orchestrator' };
  const deploy = newId('task');
  const checks = newId('task');
  const messages = [
    register('ken', 'Researcher: reads, searches and summarises', ['skill:research', 'tool:web'], 4, { tokens: 200000, cost_usd: 5 }),
    register('ida', 'Reviewer: code review and tests', ['skill:code_review', 'skill:testing'], 2, { tokens: 100000, cost_usd: 2 }),
    register('ops', 'Operator: deploys and watches services', ['skill:ops', 'tool:kubectl'], 1, { tokens: 50000 }),
    msg({ ...ops, from: { agent_id: 'user:lin' }, payload: { text: 'Deploy 2.4 to staging once the checks pass, please.' } }),
    msg({ ...ops, task_id: checks, type: 'task.request', from: { agent_id: 'user:lin' }, to: [orch], requires: ['skill:testing'], payload: { goal: 'Run the release checks for 2.4' } }),
    msg({ ...ops, task_id: checks, type: 'routing.decision', from: orch, payload: { selected: 'agent:ida', candidates: ['agent:ida', 'agent:ken'], scores: { 'agent:ida': 0.91, 'agent:ken': 0.22 }, reason: 'only agent with skill:testing' } }),
    msg({ ...ops, task_id: checks, type: 'task.accept', from: { agent_id: 'agent:ida' }, payload: {} }),
    msg({ ...ops, task_id: checks, type: 'task.progress', from: { agent_id: 'agent:ida' }, payload: { percent: 65, message: '212 of 326 tests passed so far', usage: { tokens: 64000, cost_usd: 1.31 } } }),
    msg({ ...ops, task_id: deploy, type: 'task.request', from: { agent_id: 'user:lin' }, to: [orch], requires: ['skill:ops'], meta: { depends_on: [checks] }, payload: { goal: 'Deploy 2.4 to staging' } }),
    msg({ ...ops, task_id: deploy, type: 'routing.failure', from: orch, payload: { reason: 'the only ops agent is at its concurrency limit', excluded: { 'agent:ops': 'at max_concurrency (1)', 'agent:ken': 'lacks skill:ops' }, queued: true } }),
    msg({ ...ops, type: 'chat.system', from: orch, payload_type: 'clutch.budget.v1', payload: { agent_id: 'agent:ida', metric: 'tokens', used: 82000, limit: 100000, percent: 82 } }),
    msg({ ...ops, type: 'agent.update', from: orch, payload_type: 'clutch.agent.status.v1', payload: { agent_id: 'agent:ops', status: 'stale', previous: 'online' } }),
    ...s.messages,
    msg({ thread_id: s.thread, run_id: s.run, from: { agent_id: 'user:ada' }, payload: { text: 'Thanks both. Can we get the appendix another way?' } }),
  ];
  return { messages: spread(messages, 50 * 60 * 1000), s, ops };
}

const daemon = await startDaemon();
const browser = await launch();
try {
  const { messages, s, ops } = seed();
  await postAll(daemon.url, messages);
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
      for (let i = 0; i < 12; i++) await page.locator('.replay-controls button[aria-label=step]').click();
      await page.locator(`.task-card[data-task="${s.review}"][data-state=done]`).waitFor({ state: 'attached' });
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
  await browser.close();
  await daemon.dispose();
}
