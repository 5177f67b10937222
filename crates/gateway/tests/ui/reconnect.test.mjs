// The stream survives the daemon and the network: after a restart or a dropped connection the page
// reconnects with its cursor and shows every event exactly once, including those posted while it was
// away.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { daemonAndBrowser, live, msg, newId, postAll, startDaemon, until, withPage } from './support.mjs';

const env = daemonAndBrowser();

test('reconnects after the daemon restarts, without losing or repeating events', async (t) => {
  const thread = newId('thr');
  const run = newId('run');
  /** @param {number} from @param {number} n */
  const batch = (from, n) => Array.from({ length: n }, (_, i) => msg({ thread_id: thread, run_id: run, payload: { text: `message ${from + i}` } }));
  await postAll(env.daemon.url, batch(0, 50));
  await withPage(env.browser, t.name, `${env.daemon.url}/#/thread/${thread}`, async (page) => {
    await live(page);
    await until(page, () => /** @type {any} */ (window).__clutch.store.threads.values().next().value?.events.length === 50);

    // Stop the daemon (it sends the final frame with the cursor), post nothing meanwhile, restart it
    // on the same port and data, and post more: they arrive through the resumed stream.
    await env.daemon.stop();
    await until(page, () => /** @type {any} */ (window).__clutch.stream.status === 'reconnecting');
    const ends = await page.evaluate(() => /** @type {any} */ (window).__clutch.stream.stats.endFrames);
    assert.deepEqual(ends.map((/** @type {any} */ f) => [f.frame, f.last_seq]), [['shutdown', 50]]);
    env.daemon = await startDaemon({ dataDir: env.daemon.dataDir, port: env.daemon.port });
    await postAll(env.daemon.url, batch(50, 25));
    await live(page);
    await until(page, () => /** @type {any} */ (window).__clutch.store.head === 75);

    // And once more, this time killed without a final frame in between appends.
    await env.daemon.stop();
    env.daemon = await startDaemon({ dataDir: env.daemon.dataDir, port: env.daemon.port });
    await postAll(env.daemon.url, batch(75, 25));
    await until(page, () => /** @type {any} */ (window).__clutch.store.head === 100);

    const seqs = await page.evaluate(() => /** @type {any} */ (window).__clutch.store.events.map((/** @type {any} */ e) => e.seq));
    assert.deepEqual(seqs, Array.from({ length: 100 }, (_, i) => i + 1), 'every event once, in order');
    // The timeline shows them all, once each.
    await page.locator('.timeline-rows').focus();
    await page.keyboard.press('End');
    await page.locator('.chat-text', { hasText: 'message 99' }).waitFor();
    assert.equal(await page.evaluate(() => /** @type {any} */ (window).__clutch.view.timeline.list.rows.length), 100);
    const stats = await page.evaluate(() => /** @type {any} */ (window).__clutch.stream.stats);
    assert.equal(stats.gaps, 0);
    assert.ok(stats.connects >= 3, `connected ${stats.connects} times`);
  });
});

test('resumes after a dropped connection, with what was posted meanwhile', async (t) => {
  const thread = newId('thr');
  /** @param {number} from @param {number} n */
  const batch = (from, n) => Array.from({ length: n }, (_, i) => msg({ thread_id: thread, payload: { text: `blip ${from + i}` } }));
  await withPage(env.browser, t.name, `${env.daemon.url}/#/thread/${thread}`, async (page) => {
    await live(page);
    const head = await page.evaluate(() => /** @type {any} */ (window).__clutch.stream.lastSeq);
    await postAll(env.daemon.url, batch(0, 10));
    await until(page, (n) => /** @type {any} */ (window).__clutch.store.head === n, head + 10);
    // The connection drops (as on a network blip); events keep coming while it is down.
    const connects = await page.evaluate(() => {
      const app = /** @type {any} */ (window).__clutch;
      app.stream.socket.close();
      return app.stream.stats.connects;
    });
    await postAll(env.daemon.url, batch(10, 700)); // more than the bulk threshold: pages, then the socket
    await postAll(env.daemon.url, batch(710, 10));
    await until(page, (n) => /** @type {any} */ (window).__clutch.store.head === n, head + 720);
    // The pages may bring every event before the new socket is open: wait for it too.
    await until(page, (n) => /** @type {any} */ (window).__clutch.stream.stats.connects > n, connects);
    await live(page);
    const { seqs, stats } = await page.evaluate(() => {
      const app = /** @type {any} */ (window).__clutch;
      return { seqs: app.store.eventsOf('thread', location.hash.split('/').pop()).map((/** @type {any} */ e) => e.seq), stats: app.stream.stats };
    });
    assert.deepEqual(seqs, Array.from({ length: 720 }, (_, i) => head + 1 + i), 'every event once, in order');
    assert.ok(stats.connects > connects, 'reconnected');
    assert.equal(stats.gaps, 0);
    await page.locator('.chat-text', { hasText: 'blip 719' }).waitFor();
  });
});
