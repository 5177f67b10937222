// Seed 000 §10 in the page: a person asks for work in the composer; a LangGraph planner (an example
// agent on the Python client, a process of its own) takes it and delegates the writing through the hub;
// the router gives it to an AutoGen team (another process, another venv) whose writer and critic speak
// in the same thread; the planner asks the person to confirm, she answers in the run view, and the
// answer lands. The agents run from the venvs scripts/test-python makes (.tools/venv-langgraph,
// .tools/venv-autogen); without them the test fails and says how to make them.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ROOT, daemonAndBrowser, events, eventually, live, newId, taskState, withPage } from './support.mjs';

const env = daemonAndBrowser();

/**
 * An example agent (clients/python/examples/SCRIPT) run by the venv's Python; resolves once it reads its inbox.
 * @param {string} venv @param {string} script @param {string[]} args
 */
async function exampleAgent(venv, script, args) {
  const python = path.join(ROOT, '.tools', venv, 'bin', 'python');
  assert.ok(existsSync(python), `${python} is missing: run scripts/test-python (it makes the adapters' venvs) first`);
  const child = spawn(python, [path.join(ROOT, 'clients/python/examples', script), '--url', env.daemon.url, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start:\n${log}`)), 60_000);
    child.stderr.on('data', (chunk) => {
      log += chunk;
      if (/reading its inbox/.test(log)) {
        clearTimeout(timer);
        resolve(undefined);
      }
    });
    child.on('exit', (code) => reject(new Error(`${script} exited with ${code}:\n${log}`)));
  });
  return child;
}

test('a person asks in the page; a LangGraph planner delegates to an AutoGen team; she confirms; one thread', async (t) => {
  const team = await exampleAgent('venv-autogen', 'autogen_team.py', []);
  const planner = await exampleAgent('venv-langgraph', 'langgraph_agent.py', ['--confirm']);
  t.after(() => {
    team.kill();
    planner.kill();
  });
  const thread = newId('thr');
  await withPage(env.browser, t.name, `${env.daemon.url}/#/thread/${thread}`, async (page) => {
    await live(page);
    await page.evaluate(() => localStorage.setItem('clutch.user', JSON.stringify('ada')));
    await page.reload();
    await live(page);
    const composer = page.locator('form.composer');
    await composer.locator('input[value=task]').check();
    await composer.locator('input[name=requires]').fill('skill:plan');
    await composer.locator('textarea').fill('How do I start a book club?');
    await composer.locator('textarea').press('Enter');

    // The team's members speak in the person's thread, each under their own name, marked with the framework.
    const draft = page.locator('.timeline .ev-chat-message', { hasText: 'Draft for' });
    await draft.waitFor({ timeout: 30_000 });
    assert.equal(await draft.locator('.speaker').textContent(), ' · writer');
    assert.equal(await draft.locator('.framework').textContent(), 'autogen');
    const approval = page.locator('.timeline .ev-chat-message', { hasText: 'APPROVE' });
    await approval.waitFor();
    assert.equal(await approval.locator('.speaker').textContent(), ' · critic');
    const [request] = await events(env.daemon.url, { thread_id: thread, type: 'task.request' });
    assert.equal(request.from.agent_id, 'user:ada');
    assert.equal(request.payload.goal, 'How do I start a book club?');

    // The planner asks her to confirm: the run view shows the question with a box to answer it.
    await page.goto(`${env.daemon.url}/#/run/${request.run_id}`);
    await live(page);
    const turn = page.locator('form.turn');
    await turn.waitFor({ timeout: 30_000 });
    assert.match((await turn.locator('.turn-goal').textContent()) || '', /Send this answer\?.*Draft for/);
    await turn.locator('textarea').fill('yes, send it');
    await turn.locator('button[type=submit]').click();
    await eventually(async () => (await taskState(env.daemon.url, request.task_id))?.state === 'completed', 'the planner answers');
    await turn.waitFor({ state: 'detached' });

    // One thread holds it all: the routed delegation to the team, its chat, the question, the answer.
    const all = await events(env.daemon.url, { run_id: request.run_id, limit: 1000 });
    assert.deepEqual([...new Set(all.map((/** @type {any} */ e) => e.thread_id))], [thread]);
    const delegated = all.find((/** @type {any} */ e) => e.type === 'routing.decision' && e.payload.selected === 'agent:scribes');
    assert.ok(delegated, 'the router gave the writing to the AutoGen team');
    const result = all.find((/** @type {any} */ e) => e.type === 'task.result' && e.task_id === request.task_id);
    assert.match(result.payload.text, /From the writer: Draft for.*yes, send it/);
    await page.goto(`${env.daemon.url}/#/thread/${thread}`);
    await live(page);
    await page.locator('.timeline', { hasText: 'From the writer' }).waitFor();
    // `CLUTCH_SCREENSHOTS=1` refreshes docs/frameworks' picture of the story.
    if (process.env.CLUTCH_SCREENSHOTS) await page.screenshot({ path: path.join(ROOT, 'docs/screenshots/frameworks-story-light.png') });
  });
});
