// Tool calls that wait for a person: the daemon runs the reference MCP server (npm
// @modelcontextprotocol/server-everything, declared in clutch.toml) and org.yaml asks for approval
// of its echo tool. A call shows as one card with Approve and Deny; a click decides, and the card
// follows the call live: its decision, its start, its answer.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { ROOT, daemonAndBrowser, live, msg, newId, post, withPage } from './support.mjs';

const SERVER = path.join(ROOT, 'node_modules/.bin/mcp-server-everything');
const env = daemonAndBrowser(undefined, {
  files: {
    'clutch.toml': `config_dir = "policy"\n[[mcp_servers]]\nname = "everything"\ncommand = ${JSON.stringify(SERVER)}\nargs = ["stdio"]\n`,
    'policy/org.yaml': 'approvals:\n  tools: [mcp:everything/echo]\n',
  },
});

/** Posts a tool.call in a thread of its own; answers its thread and the call's id. @param {string} message */
async function call(message) {
  const thread = newId('thr');
  const ack = await post(
    env.daemon.url,
    msg({ thread_id: thread, from: { agent_id: 'agent:ken' }, type: 'tool.call', payload: { tool: 'mcp:everything/echo', args: { message } } }),
  );
  return { thread, call: ack.id };
}

test('a call is one card: it waits for approval, is approved or denied there, and its answer follows', async (t) => {
  const approved = await call('ship it');
  const denied = await call('not this one');
  await withPage(env.browser, t.name, `${env.daemon.url}/#/thread/${approved.thread}`, async (page) => {
    await live(page);
    const card = page.locator(`.call-card[data-call="${approved.call}"]`);
    await page.locator(`.call-card[data-call="${approved.call}"][data-state="waiting"]`).waitFor();
    assert.match(await card.textContent() || '', /mcp:everything\/echo waits for approval \(the policy asks for it\)/);
    assert.match(await card.textContent() || '', /ship it/, 'the arguments are shown');
    await card.locator('button.decide-approve').click();
    // The card follows the call: decided, started, answered, with its duration and its history.
    await page.locator(`.call-card[data-call="${approved.call}"][data-state="done"]`).waitFor();
    await card.locator('.approval-history .r-decided.decided-approved', { hasText: 'approved by local' }).waitFor();
    assert.match(await card.locator('.approval-history').textContent() || '', /asked for approval \(the policy asks for it\)/);
    assert.equal(await card.locator('button.decide-approve').count(), 0, 'no buttons once decided');
    await card.locator('.r-tool-started', { hasText: 'calling mcp:everything/echo' }).waitFor();
    await card.locator('details.tool summary', { hasText: /✓ result mcp:everything\/echo \d+ ms — Echo: ship it/ }).waitFor();
    assert.match(await card.locator('.call-duration').textContent() || '', /^\d+ ms$/);
    assert.equal(await page.locator('.ev').count(), 1, 'the call, its notes and its answer fold into the card');
    assert.equal(await page.locator('.sidebar .item-title', { hasText: 'call mcp:everything/echo' }).count(), 4, 'both threads and runs named by their calls');
    // Every event on its own row again; deciding twice is refused, and says what stands.
    await page.locator('input[name="every"]').check();
    const request = page.locator(`.r-approval[data-call="${approved.call}"]`);
    await request.locator('button.decide-deny').click();
    await request.locator('.r-approval-status', { hasText: 'approved by user:local' }).waitFor();

    await page.goto(`${env.daemon.url}/#/thread/${denied.thread}`);
    const other = page.locator(`.call-card[data-call="${denied.call}"]`);
    await other.locator('button.decide-deny').click();
    await page.locator(`.call-card[data-call="${denied.call}"][data-state="denied"]`).waitFor();
    await other.locator('.r-decided.decided-denied').waitFor();
    await other.locator('.error-code', { hasText: 'TOOL_DENIED' }).waitFor();
  });
  const pending = await (await fetch(`${env.daemon.url}/v1/approvals`)).json();
  assert.deepEqual(pending.pending, [], 'nothing waits any more');
});

test('the tools panel shows each server, its tools, and the calls waiting, which it can decide', async (t) => {
  const waiting = await call('from the panel');
  await withPage(env.browser, t.name, `${env.daemon.url}/#/tools`, async (page) => {
    await live(page);
    const server = page.locator('.tool-server[data-server="mcp:everything"]');
    await server.waitFor();
    assert.match(await server.locator('header').textContent() || '', /ready mcp:everything stdio · \d+ tools/);
    assert.match(await server.locator('.tool-list').textContent() || '', /mcp:everything\/echo read-only — Echoes back the input string/);
    const row = page.locator(`.approval-row[data-call="${waiting.call}"]`);
    await row.waitFor();
    assert.match(await row.textContent() || '', /mcp:everything\/echo called by ken \(policy\)/);
    await row.locator('button.decide-approve').click();
    // Decided: the panel reads again and the call is no longer listed.
    await row.waitFor({ state: 'detached' });
    assert.equal(await page.locator('.approvals .empty').textContent(), 'No call is waiting for approval.');
  });
  const events = (await (await fetch(`${env.daemon.url}/v1/events?thread_id=${waiting.thread}`)).json()).events;
  assert.ok(events.some((/** @type {any} */ e) => e.type === 'tool.result'), 'made once approved');
});
