// Positions in the browser: the list of positions, the "Start" dialog (a bad agent id refused in
// place, then a mirror started with an agent of the test and the page's person playing its roles),
// and the run view's session panel following the session live: its team, its phase, the person's
// turns answered in place, the messages between the members, and the outcome.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, daemonAndBrowser, eventually, events, post, request, withPage } from './support.mjs';

const env = daemonAndBrowser();

/**
 * Plays `agent` in the session of run `run`: answers each turn given to it by name, with `answer`.
 * @param {string} url
 * @param {string} run
 * @param {string} agent
 * @param {(turn: any) => string} answer
 * @param {number} turns how many turns to answer
 */
async function play(url, run, agent, answer, turns) {
  /** @type {Set<string>} */
  const done = new Set();
  while (done.size < turns) {
    const given = await eventually(async () => {
      const list = await events(url, { run_id: run, type: 'task.request' });
      return list.find((/** @type {any} */ e) => e.from.agent_id === 'agent:positions' && e.to[0]?.agent_id === agent && !done.has(e.task_id));
    }, `a turn for ${agent}`);
    for (const [type, payload] of /** @type {const} */ ([['task.accept', {}], ['task.result', { text: answer(given) }]])) {
      await post(url, {
        thread_id: given.thread_id, run_id: run, task_id: given.task_id, parent_task_id: given.parent_task_id,
        from: { agent_id: agent }, to: [{ agent_id: 'agent:positions' }], type, payload,
      });
    }
    done.add(given.task_id);
  }
}

test('start a mirror from the dialog and follow its session live', async (t) => {
  const url = env.daemon.url;
  await new Agent(url, 'ida', { capabilities: [{ id: 'skill:review', version: '1.0.0' }] }).register();
  await withPage(env.browser, t.name, `${url}/#/positions`, async (page) => {
    const card = page.locator('.position-card[data-position="mirror"]');
    await card.waitFor();
    assert.equal(await page.locator('.position-card').count(), 6, 'the six shipped positions');
    await card.locator('button.start').click();
    const dialog = page.locator('dialog.position-dialog');
    await dialog.waitFor();
    await dialog.locator('textarea[name=input]').fill('Is 6 × 7 equal to 42?');
    // A bad id is refused by the daemon and said in the dialog, which stays open.
    await dialog.locator('input[name="role-Reflector"]').fill('ida');
    await dialog.locator('input[name="role-Verifier"]').fill('user:kat');
    await dialog.locator('input[name=as]').fill('kat');
    await dialog.locator('button[value=start]').click();
    await dialog.locator('.error', { hasText: 'agents.Reflector' }).waitFor();
    await dialog.locator('input[name="role-Reflector"]').fill('agent:ida');
    await dialog.locator('button[value=start]').click();
    await page.waitForURL(/#\/run\/run_/);
    const run = decodeURIComponent(page.url().split('#/run/')[1]);
    const panel = page.locator('.session-panel');
    await panel.locator('.team li[data-agent="agent:ida"]', { hasText: 'Reflector' }).waitFor();
    assert.match(await panel.textContent() || '', /mirror/);

    // ida plays its turns over HTTP; kat, the page's person, answers hers in the panel.
    const answer = (/** @type {any} */ turn) =>
      String(turn.payload.goal).includes('Compare') ? JSON.stringify({ verdict: 'CONSENSUS', points: ['both 42'] }) : `${turn.to[0].agent_id} found 42`;
    const ida = play(url, run, 'agent:ida', answer, 2);
    for (const expected of [/Analyse/, /Compare/]) {
      await panel.locator('form.turn').first().waitFor();
      const id = await panel.locator('form.turn').first().getAttribute('data-task');
      const turn = panel.locator(`form.turn[data-task="${id}"]`);
      const goal = (await turn.locator('.turn-goal').textContent()) || '';
      assert.match(goal, expected);
      if (expected.source === 'Compare') {
        // A structured turn: the verdict is a choice, which must be made; the points a line each.
        await turn.locator('button[type=submit]').click();
        await turn.locator('.turn-status.error', { hasText: 'Choose verdict' }).waitFor();
        await turn.locator('select[name=field-verdict]').selectOption({ label: 'CONSENSUS' });
        await turn.locator('textarea[name=field-points]').fill('both 42\nsame method');
      } else {
        // An empty answer is said in place, and nothing is sent.
        await turn.locator('button[type=submit]').click();
        await turn.locator('.turn-status.error', { hasText: 'Write an answer' }).waitFor();
        await turn.locator('textarea[name=answer]').fill('kat found 42');
      }
      await turn.locator('button[type=submit]').click();
      await turn.waitFor({ state: 'detached' });
    }
    await ida;
    const results = await events(url, { run_id: run, type: 'task.result' });
    const kat = results.find((/** @type {any} */ e) => e.from.agent_id === 'user:kat' && e.payload.structured);
    assert.deepEqual(kat?.payload.structured, { verdict: 'CONSENSUS', points: ['both 42', 'same method'] });
    await page.locator('.session-panel[data-phase="COMPLETED"]').waitFor();
    assert.match(await panel.locator('.session-outcome').textContent() || '', /CONSENSUS/);
    assert.match(await panel.locator('.count').textContent() || '', /^4 messages$/);
    await page.locator('.r-said .said-type', { hasText: 'RESULTS' }).first().waitFor();
    assert.equal(await page.locator('.r-said .said-type', { hasText: 'CONSENSUS' }).count(), 2);
  });
});

test('the turn box shows once the person sets their name; messages render once; labels once; the positions page lists sessions', async (t) => {
  const url = env.daemon.url;
  await new Agent(url, 'ivy', { capabilities: [{ id: 'skill:review', version: '1.0.0' }] }).register();
  const invoked = await request(url, 'POST', '/v1/positions/mirror/invoke', { input: 'Is 2 + 2 equal to 4?', agents: { Reflector: 'agent:ivy', Verifier: 'user:lee' }, agent_id: 'user:lee' });
  assert.equal(invoked.status, 201, JSON.stringify(invoked.body));
  const run = invoked.body.session_id;
  await withPage(env.browser, t.name, `${url}/#/run/${run}`, async (page) => {
    const panel = page.locator('.session-panel');
    await panel.locator('.team li[data-agent="user:lee"]').waitFor();
    // The page does not know its person yet: no turn box; the name set in the composer shows it, no reload.
    const ivy = play(url, run, 'agent:ivy', (turn) => (String(turn.payload.goal).includes('Compare') ? JSON.stringify({ verdict: 'CONSENSUS', points: ['4'] }) : 'ivy found 4'), 2);
    await eventually(async () => (await events(url, { run_id: run, type: 'task.request' })).some((e) => e.to[0]?.agent_id === 'user:lee'), "lee's turn");
    assert.equal(await panel.locator('form.turn').count(), 0);
    await page.locator('.composer input[name=user]').fill('lee');
    await page.locator('.composer input[name=user]').press('Enter');
    await panel.locator('form.turn').first().waitFor({ timeout: 5_000 });

    // The session's head names the position once (the mirror position is of the mirror pattern).
    const head = (await panel.locator('.session-head').textContent()) || '';
    assert.doesNotMatch(head, /mirror\s*mirror/i);

    const firstTurn = panel.locator(`form.turn[data-task="${await panel.locator('form.turn').first().getAttribute('data-task')}"]`);
    await firstTurn.locator('textarea[name=answer]').fill('lee found 4');
    await firstTurn.locator('button[type=submit]').click();
    await firstTurn.waitFor({ state: 'detached' });
    const secondTurn = panel.locator('form.turn:has(select[name=field-verdict])');
    await secondTurn.waitFor();
    await secondTurn.locator('select[name=field-verdict]').selectOption({ label: 'CONSENSUS' });
    await secondTurn.locator('button[type=submit]').click();
    await ivy;
    await page.locator('.session-panel[data-phase="COMPLETED"]').waitFor();

    // Each message between the members is shown once: its content appears in one row only.
    const said = page.locator('.r-said', { hasText: 'ivy found 4' });
    await said.first().waitFor();
    const rows = await page.locator('.timeline-rows article').evaluateAll((els) => els.filter((el) => (el.textContent || '').includes('ivy found 4')).map((el) => (el.textContent || '').split('ivy found 4').length - 1));
    assert.ok(rows.length > 0);
    for (const n of rows) assert.equal(n, 1, `a row shows the message ${n} times`);

    // The positions page: the session listed, with its phase; no card says its pattern twice.
    await page.goto(`${url}/#/positions`);
    const row = page.locator(`.sessions-list tr[data-session="${run}"]`);
    await row.waitFor();
    assert.equal(await row.locator('.phase').textContent(), 'COMPLETED');
    assert.match(await row.textContent() || '', /Reflector ivy, Verifier lee/);
    for (const title of await page.locator('.position-card h2').allTextContents()) assert.doesNotMatch(title, /\b(\w+)\b.*\b\1\b/i, title);
  });
});
