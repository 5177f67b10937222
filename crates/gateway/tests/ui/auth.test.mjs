// Authentication: the page asks for a token only when the daemon answers 401, keeps it, and sends it
// as a bearer header on requests and as access_token on the stream. (The daemon without tokens is
// stood in for by answering 401 in the browser until the token is presented.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { daemonAndBrowser, live, withPage } from './support.mjs';

const env = daemonAndBrowser();

test('no token is asked for while the daemon does not want one', async (t) => {
  await withPage(env.browser, t.name, env.daemon.url, async (page) => {
    await live(page);
    assert.equal(await page.locator('dialog.auth-dialog').count(), 0);
    assert.equal(await page.evaluate(() => localStorage.getItem('clutch.token')), null);
  });
});

test('a 401 asks for a token, which is then kept and used on requests and the stream', async (t) => {
  await withPage(env.browser, t.name, 'about:blank', async (page) => {
    /** @type {string[]} */
    const seen = [];
    await page.route(/\/v1\/(events|messages|agents|runs)/, async (route) => {
      const auth = route.request().headers().authorization;
      seen.push(auth || '');
      if (auth !== 'Bearer s3cret') {
        await route.fulfill({ status: 401, json: { error: { code: 'UNAUTHORIZED', message: 'a bearer token is required', retryable: false } } });
      } else {
        await route.continue();
      }
    });
    /** @type {string[]} */
    const sockets = [];
    page.on('websocket', (ws) => sockets.push(ws.url()));
    await page.goto(env.daemon.url);
    const dialog = page.locator('dialog.auth-dialog');
    await dialog.waitFor();
    assert.match(await dialog.textContent() || '', /a bearer token is required/);
    await dialog.locator('input[name=token]').fill('s3cret');
    await dialog.locator('button[value=ok]').click();
    await page.waitForFunction(() => /** @type {any} */ (window).__clutch?.stream?.stats.connects > 0 || document.querySelector('.conn[data-status]'));
    await page.waitForFunction(() => localStorage.getItem('clutch.token') === '"s3cret"');
    assert.ok(seen.includes('Bearer s3cret'), `the retried request carries the token: ${seen}`);
    await page.waitForFunction(() => true);
    await page.waitForTimeout(200);
    assert.ok(sockets.some((u) => new URL(u).searchParams.get('access_token') === 's3cret'), `the stream carries it: ${sockets}`);

    // A reload asks no more: the token is kept.
    seen.length = 0;
    await page.reload();
    await page.waitForFunction(() => document.querySelector('.sidebar'));
    assert.equal(await page.locator('dialog.auth-dialog').count(), 0);
    assert.ok(seen.length > 0 && seen.every((a) => a === 'Bearer s3cret'), `${seen}`);
  });
});
