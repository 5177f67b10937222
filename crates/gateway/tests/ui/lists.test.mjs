// Every run of the log is reachable: the sidebar lists the daemon's threads and runs (`GET
// /v1/threads`, `/v1/runs`) a page at a time as each list is scrolled, merged with what the live
// stream brings, and its box searches every message (`GET /v1/search`). The page here holds only the
// newest 100 events (`?history=100`; 20,000 by default), so the oldest run is known to it only
// through those endpoints.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { shortId } from '../../ui/js/util.js';
import { daemonAndBrowser, eventually, live, msg, newId, post, request, until, withPage } from './support.mjs';

/** Runs after the old one, two events each: three pages of 50 runs, the old one on the third. */
const NEWER = 130;
/** What the page holds at start: the newest events only. */
const HISTORY = 100;

const old = { thread_id: newId('thr'), run_id: newId('run') };
/** A run on the third page of the list, which a live message moves to the top. */
let revived = { thread_id: '', run_id: '' };
/** The seq of the old run's first message. */
let oldSeq = 0;

const env = daemonAndBrowser(async ({ daemon }) => {
  const url = daemon.url;
  const messages = [
    // Brackets and markup in the text stay text: only the daemon's marks of the match are highlighted.
    msg({ ...old, from: { agent_id: 'user:ada' }, payload: { text: '[ops] The Zanzibar rollout failed on node <b>seven</b>' } }),
    msg({ ...old, from: { agent_id: 'agent:ken' }, payload: { text: 'Rolling back now; node seven is drained.' } }),
  ];
  for (let i = 0; i < NEWER; i++) {
    const scope = { thread_id: newId('thr'), run_id: newId('run') };
    if (i === 10) revived = scope;
    messages.push(
      msg({ ...scope, from: { agent_id: 'user:ada' }, payload: { text: `Routine check number ${i}` } }),
      msg({ ...scope, from: { agent_id: 'agent:ken' }, payload: { text: `Check ${i} is fine.` } }),
    );
  }
  const { results } = await post(url, messages);
  oldSeq = results[0].seq;
  const head = results[results.length - 1].seq;
  // The lists and the search index follow the log a little behind it.
  await eventually(async () => (await request(url, 'GET', '/v1/runs?limit=1')).body?.as_of >= head, 'the lists to reach the head');
  await eventually(async () => (await request(url, 'GET', '/v1/search?q=zanzibar')).body?.items?.length, 'the search index to hold the old run');
});

/** The page with only the newest events held. */
const start = () => `${env.daemon.url}/?history=${HISTORY}`;

test("scrolling the sidebar's runs fetches older pages until the oldest run, which opens with its messages", async (t) => {
  await withPage(env.browser, t.name, start(), async (page) => {
    await live(page);
    const runs = page.locator('.sidebar ul[aria-label=runs]');
    const links = runs.locator('a[data-id]');
    await until(page, () => document.querySelectorAll('.sidebar ul[aria-label=runs] a[data-id]').length >= 50);
    assert.equal(await page.evaluate((id) => /** @type {any} */ (window).__clutch.store.runs.has(id), old.run_id), false, 'the page does not hold the old run');
    assert.equal(await links.count(), 50, 'the first page');
    assert.equal(await runs.locator(`a[data-id="${old.run_id}"]`).count(), 0);

    // A run on a page not fetched yet speaks: it appears at the top, live.
    await post(env.daemon.url, msg({ ...revived, from: { agent_id: 'agent:ida' }, payload: { text: 'Check 10 again: still fine.' } }));
    await until(page, (id) => document.querySelector('.sidebar ul[aria-label=runs] a[data-id]')?.getAttribute('data-id') === id, revived.run_id);
    assert.equal(await links.count(), 51);

    // Scrolled to its end, the list fetches the next page, and again, until the oldest run shows.
    let pages = 1;
    while (!(await runs.locator(`a[data-id="${old.run_id}"]`).count())) {
      await runs.locator('.page-end button.more').waitFor();
      const shown = await links.count();
      await runs.evaluate((el) => el.scrollTo(0, el.scrollHeight));
      await until(page, (n) => document.querySelectorAll('.sidebar ul[aria-label=runs] a[data-id]').length > n, shown);
      pages++;
      assert.ok(pages <= 3, 'three pages hold every run');
    }
    assert.equal(pages, 3);
    assert.equal(await links.count(), NEWER + 1, 'each run once, the revived one included');
    assert.equal(await runs.locator('.page-end').count(), 0, 'nothing more to fetch');
    const item = runs.locator(`a[data-id="${old.run_id}"]`);
    assert.equal(await item.locator('.item-title').textContent(), '[ops] The Zanzibar rollout failed on node <b>seven</b>');
    assert.ok(await item.locator('time').count(), 'its last activity');

    await item.click();
    await until(page, (id) => location.hash === `#/run/${id}`, old.run_id);
    const texts = page.locator('.run-view .timeline .chat-text');
    await texts.filter({ hasText: 'Rolling back now' }).waitFor();
    assert.deepEqual(await texts.allTextContents(), ['[ops] The Zanzibar rollout failed on node <b>seven</b>', 'Rolling back now; node seven is drained.']);
    assert.equal(await item.getAttribute('aria-current'), 'page');
  });
});

test('the box searches every message: a result, its match marked, opens its run at the message', async (t) => {
  await withPage(env.browser, t.name, start(), async (page) => {
    await live(page);
    await page.locator('.sidebar-filter').fill('zanzibar');
    const hit = page.locator('.sidebar ul[aria-label="search results"] a.hit');
    await hit.first().waitFor();
    assert.equal(await hit.count(), 1, 'one message has the word');
    assert.equal(await hit.getAttribute('data-seq'), String(oldSeq));
    const snippet = hit.locator('.hit-snippet');
    assert.deepEqual(await snippet.locator('mark').allTextContents(), ['Zanzibar']);
    assert.equal(await snippet.textContent(), '[ops] The Zanzibar rollout failed on node <b>seven</b>', 'brackets and markup of the text stay text');
    assert.equal(await snippet.locator('b').count(), 0);
    assert.match(await hit.locator('.hit-head').textContent() || '', /chat\.message\s*ada/);
    assert.ok(await hit.locator('.hit-head time').count(), 'its time');
    assert.equal(await hit.locator('.hit-run').textContent(), shortId(old.run_id), 'its run (not loaded: by its id)');
    // The lists are filtered by the box too: no thread or run loaded has the word in its title.
    assert.equal(await page.locator('.sidebar ul[aria-label=runs] a[data-id]').count(), 0);

    await hit.click();
    await until(page, ([id, seq]) => location.hash === `#/run/${id}?at=${seq}`, [old.run_id, oldSeq]);
    const target = page.locator('.run-view .timeline .is-target');
    await target.waitFor();
    assert.equal(await target.getAttribute('data-seq'), String(oldSeq));
    assert.match(await target.textContent() || '', /The Zanzibar rollout failed/);
    await page.locator('.run-view .timeline .chat-text', { hasText: 'Rolling back now' }).waitFor();

    // Fewer than two characters: no search.
    await page.locator('.sidebar-filter').fill('z');
    await hit.first().waitFor({ state: 'detached' });
    assert.equal(await page.locator('.sidebar ul[aria-label="search results"]').isHidden(), true);
  });
});
