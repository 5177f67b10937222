// The composer: a person posts a chat message and a task request (with `requires`) as user:NAME, and
// sees both arrive in the log and in the thread, the request routed by the daemon to an agent that has
// what it requires.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, daemonAndBrowser, live, msg, newId, post, withPage } from './support.mjs';

const env = daemonAndBrowser();

/** @param {string} query */
async function events(query) {
  return (await (await fetch(`${env.daemon.url}/v1/events?${query}`)).json()).events;
}

test('the composer posts a chat message and a task request into the thread as user:NAME', async (t) => {
  const thread = newId('thr');
  const run = newId('run');
  await post(env.daemon.url, msg({ thread_id: thread, run_id: run, payload: { text: 'anyone there?' } }));
  await withPage(env.browser, t.name, `${env.daemon.url}/#/thread/${thread}`, async (page) => {
    await live(page);
    await page.locator('.chat-text', { hasText: 'anyone there?' }).waitFor();
    const composer = page.locator('form.composer');
    await composer.locator('textarea').fill('hello from the browser');
    await composer.locator('textarea').press('Enter');
    await composer.locator('.composer-status.error', { hasText: 'Set your name' }).waitFor();
    await composer.locator('input[name=user]').fill('grace');
    await composer.locator('textarea').press('Enter');
    await page.locator('.timeline .chat-text', { hasText: 'hello from the browser' }).waitFor();
    assert.equal(await composer.locator('textarea').inputValue(), '', 'cleared once posted');

    const [chat] = (await events(`thread_id=${thread}&type=chat.message`)).filter((/** @type {any} */ e) => e.payload.text === 'hello from the browser');
    assert.equal(chat.from.agent_id, 'user:grace');
    assert.equal(chat.run_id, run, 'posted into the thread and run in view');

    // An agent that has both: the daemon routes the request to it.
    await new Agent(env.daemon.url, 'ken', { capabilities: [{ id: 'skill:research', version: '1.0.0' }, { id: 'tool:web' }] }).register();
    await composer.locator('input[value=task]').check();
    await composer.locator('input[name=requires]').fill('skill:research, tool:web');
    await composer.locator('textarea').fill('Find three sources on ULIDs');
    await composer.locator('button[type=submit]').click();
    const card = page.locator('.task-card[data-state=routed]', { hasText: 'Find three sources on ULIDs' });
    await card.waitFor();
    assert.deepEqual(await card.locator('.cap').allTextContents(), ['skill:research', 'tool:web']);
    assert.equal(await card.locator('.assignee .who').textContent(), 'ken');
    assert.match(await page.locator('.ev-routing-decision').textContent() || '', /Selected ken — matched requires\[skill:research, tool:web\]/);

    const [request, delivery] = await events(`thread_id=${thread}&type=task.request`);
    assert.equal(request.from.agent_id, 'user:grace');
    assert.deepEqual(request.to, [{ agent_id: 'agent:orchestrator' }]);
    assert.deepEqual(request.requires, ['skill:research', 'tool:web']);
    assert.equal(request.payload.goal, 'Find three sources on ULIDs');
    assert.equal(delivery.from.agent_id, 'agent:orchestrator');
    assert.deepEqual(delivery.to, [{ agent_id: 'agent:ken' }]);
    assert.equal(delivery.task_id, request.task_id);
    assert.equal(await page.locator(`.task-card[data-task="${request.task_id}"]`).count(), 1, 'the delivery updates the same card');
  });
});

test('a new thread starts from the sidebar and shows up once posted to', async (t) => {
  await withPage(env.browser, t.name, env.daemon.url, async (page) => {
    await live(page);
    await page.evaluate(() => localStorage.setItem('clutch.user', JSON.stringify('lin')));
    await page.reload();
    await live(page);
    await page.locator('.sidebar button', { hasText: 'New' }).click();
    const thread = (await page.evaluate(() => location.hash)).split('/').pop() || '';
    assert.match(thread, /^thr_[0-9A-HJKMNP-TV-Z]{26}$/);
    await page.locator('.composer textarea').fill('a fresh start');
    await page.keyboard.press('Enter');
    await page.locator(`.sidebar a[data-id="${thread}"]`, { hasText: 'a fresh start' }).waitFor();
    const [first] = await events(`thread_id=${thread}`);
    assert.equal(first.from.agent_id, 'user:lin');
  });
});

test('a refused message says why', async (t) => {
  await withPage(env.browser, t.name, `${env.daemon.url}/#/thread/${newId('thr')}`, async (page) => {
    await live(page);
    const composer = page.locator('form.composer');
    await composer.locator('input[name=user]').fill('grace');
    await composer.locator('input[value=task]').check();
    await composer.locator('input[name=requires]').fill('research');
    await composer.locator('textarea').fill('do it');
    await composer.locator('textarea').press('Enter');
    await composer.locator('.composer-status.error', { hasText: 'not a capability' }).waitFor();
    await composer.locator('input[name=to]').fill('nobody');
    await composer.locator('input[name=requires]').fill('');
    await composer.locator('textarea').press('Enter');
    await composer.locator('.composer-status.error', { hasText: 'to[0].agent_id' }).waitFor();
  });
});
