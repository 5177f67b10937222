// Authentication: the page asks for a token only when the daemon answers 401, keeps it, and sends it
// as a bearer header on requests and as access_token on the stream: against a daemon without tokens
// made to answer 401 in the browser until the token is presented, and against a daemon with a real
// API token in its org.yaml.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { daemonAndBrowser, live, msg, newId, startDaemon, withPage } from './support.mjs';

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

test('a daemon with API tokens: the page asks for one and uses it on requests and the stream', async (t) => {
  const token = 'ui-test-admin-token-3f9c2a7e5d1b';
  const config = mkdtempSync(path.join(tmpdir(), 'clutch-ui-policy-'));
  writeFileSync(path.join(config, 'org.yaml'), `tokens:\n  - {name: ui, role: admin, token: "${token}"}\n`);
  const daemon = await startDaemon({ env: { CLUTCH_CONFIG_DIR: config } });
  try {
    await withPage(env.browser, t.name, daemon.url, async (page) => {
      /** @type {string[]} */
      const sockets = [];
      page.on('websocket', (ws) => sockets.push(ws.url()));
      const dialog = page.locator('dialog.auth-dialog');
      await dialog.waitFor();
      assert.match(await dialog.textContent() || '', /this daemon requires an API token/);
      await dialog.locator('input[name=token]').fill(token);
      await dialog.locator('button[value=ok]').click();
      await live(page);
      assert.ok(sockets.some((u) => new URL(u).searchParams.get('access_token') === token), `the stream carries it: ${sockets}`);
      // Events posted with the token arrive live.
      const thread = newId('thr');
      const r = await fetch(`${daemon.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify(msg({ thread_id: thread, from: { agent_id: 'user:ada' }, payload: { text: 'behind a token' } })),
      });
      assert.equal(r.status, 201);
      await page.locator(`.sidebar a[data-id="${thread}"]`, { hasText: 'behind a token' }).waitFor();
      // A reload asks no more: the token is kept.
      await page.reload();
      await live(page);
      assert.equal(await dialog.count(), 0);
    });
  } finally {
    await daemon.dispose();
    rmSync(config, { recursive: true, force: true });
  }
});
