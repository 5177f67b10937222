// Tool calls that wait for a person: the daemon runs the reference MCP server (npm
// @modelcontextprotocol/server-everything, declared in clutch.toml) and org.yaml asks for approval
// of its echo tool. A call shows as a card with Approve and Deny; a click decides, the decision and
// the call's answer follow live.

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

test('a call waiting for approval is approved or denied from its card, and its answer follows', async (t) => {
  const approved = await call('ship it');
  const denied = await call('not this one');
  await withPage(env.browser, t.name, `${env.daemon.url}/#/thread/${approved.thread}`, async (page) => {
    await live(page);
    const card = page.locator(`.r-approval[data-call="${approved.call}"]`);
    await card.waitFor();
    assert.match(await card.textContent() || '', /mcp:everything\/echo waits for approval \(the policy asks for it\)/);
    assert.match(await card.textContent() || '', /ship it/, 'the arguments are shown');
    await card.locator('button.decide-approve').click();
    await card.locator('.r-approval-status', { hasText: 'approved by user:local' }).waitFor();
    await page.locator(`.r-decided.decided-approved[data-call="${approved.call}"]`).waitFor();
    await page.locator('.r-tool-started', { hasText: 'calling mcp:everything/echo' }).waitFor();
    await page.locator('.ev details.tool summary', { hasText: /✓ result mcp:everything\/echo \d+ ms — Echo: ship it/ }).waitFor();
    assert.equal(await page.locator('.sidebar .item-title', { hasText: 'call mcp:everything/echo' }).count(), 4, 'both threads and runs named by their calls');
    // Deciding twice is refused, and says what stands.
    await card.locator('button.decide-deny').click();
    await card.locator('.r-approval-status', { hasText: 'approved by user:local' }).waitFor();

    await page.goto(`${env.daemon.url}/#/thread/${denied.thread}`);
    const other = page.locator(`.r-approval[data-call="${denied.call}"]`);
    await other.locator('button.decide-deny').click();
    await page.locator(`.r-decided.decided-denied[data-call="${denied.call}"]`).waitFor();
    await page.locator('.ev', { hasText: 'TOOL_DENIED' }).first().waitFor();
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
