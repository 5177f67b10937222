// Replay: a finished run's events, stepped and played in order, with the tree and the cards changing
// as they did live.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { daemonAndBrowser, story, until, withPage } from './support.mjs';

const env = daemonAndBrowser();

test('replay steps, plays and scrubs through a finished run', async (t) => {
  const s = await story(env.daemon.url);
  await withPage(env.browser, t.name, `${env.daemon.url}/#/run/${s.run}`, async (page) => {
    await page.locator('a.button', { hasText: 'Replay' }).click();
    const view = page.locator('.replay-view[data-state=ready]');
    await view.waitFor();
    assert.equal(await page.locator('.replay-pos').textContent(), `0 / ${s.events}`);
    assert.equal(await page.locator('.task-tree [role=treeitem]').count(), 0, 'nothing played yet');

    const root = page.locator(`.task-card[data-task="${s.root}"]`);
    /** The root task's card reaches `state` (views redraw on the next frame). @param {string} state */
    const rootIs = (state) => page.locator(`.task-card[data-task="${s.root}"][data-state=${state}]`).waitFor();
    const step = page.locator('.replay-controls button[aria-label=step]');
    await step.click(); // the chat message
    await step.click(); // the request
    await rootIs('requested');
    await step.click(); // the daemon's routing decision
    await rootIs('routed');
    await page.keyboard.press('ArrowRight'); // its delivery to ken (keys work on the toolbar)
    await page.keyboard.press('ArrowRight'); // accepted
    await rootIs('accepted');
    await page.locator(`.task-tree li[data-state=accepted] a[data-task="${s.root}"]`).waitFor();

    await page.selectOption('.replay-controls select', '200');
    await page.locator('.replay-controls button[aria-label=play]').click();
    await until(page, (n) => document.querySelector('.replay-view')?.getAttribute('data-position') === String(n), s.events);
    // At the end the timeline has followed the newest events, so the root's card may be scrolled out of
    // its virtualised list; the tree always shows the root.
    await page.locator(`.task-tree li[data-state=completed] a[data-task="${s.root}"]`).waitFor();
    await until(page, () => document.querySelectorAll('.task-tree [role=treeitem]').length === 3);
    assert.equal(await page.locator('.replay-controls button[aria-label=play]').count(), 1, 'stopped at the end');

    // Scrub back: the past is rebuilt exactly (event 8 is ken's first progress report).
    await page.locator('.replay-controls input[type=range]').fill('8');
    await rootIs('running');
    await until(page, (id) => !document.querySelector(`.task-card[data-task="${id}"]`), s.review);
    await page.locator('.replay-controls button[aria-label="step back"]').click();
    assert.equal(await page.locator('.replay-view').getAttribute('data-position'), '7');

    // A task picked in the replayed tree shows its events as of now; the replay keeps its place.
    await page.locator(`.task-tree a[data-task="${s.root}"]`).click();
    await until(page, (id) => location.hash.endsWith(`/task/${id}`) && Boolean(document.querySelector(`.task-head .task-card[data-task="${id}"]`)), s.root);
    assert.equal(await page.locator('.replay-view').getAttribute('data-position'), '7');
    assert.equal(await page.locator('.task-head .task-card').getAttribute('data-state'), 'accepted', 'as of event 7: accepted, no progress yet');
    await page.locator('.replay-controls button[aria-label=step]').click();
    await page.locator('.detail-pane .ev[data-type="task.progress"]').waitFor();
  });
});
