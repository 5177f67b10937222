// LLM calls in the browser: a real built-in LLM agent of the daemon (`agent:summariser`) works a task
// against a local fake Anthropic server. Its first call uses a tool (`emit`), its second streams the
// answer slowly; the page shows the text while it streams, then each call as LangSmith shows a run
// (provider and model, system prompt, the messages with the tool use and its result, the answer,
// stop reason, tokens, cost, latency), the task's and the run's totals, and the agent's model.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ask, daemonAndBrowser, events, live, newId, taskIn, withPage, eventually } from './support.mjs';
import { llmConfig, startFakeLlm } from './fake-llm.mjs';

const ANSWER = 'Revenue grew 12% on services. Hardware was flat. The outlook is cautious but the margin improved for the third quarter running.';

const fake = await startFakeLlm((body, n) =>
  n === 1
    ? { text: 'Reading the report first.', tool: { name: 'emit', input: { message: 'read the report, writing the summary' } } }
    : { text: ANSWER, drip: 180 },
);
const env = daemonAndBrowser(undefined, { files: { 'clutch.toml': llmConfig(fake.url) }, env: { CLUTCH_TEST_LLM_KEY: 'test-key' } });

test.after(() => fake.close());

test("an LLM agent's calls: streamed text live, then messages, answer and usage, with totals", async (t) => {
  const url = env.daemon.url;
  const base = { thread_id: newId('thr'), run_id: newId('run') };
  await withPage(env.browser, t.name, `${url}/#/run/${base.run_id}`, async (page) => {
    await live(page);
    const { task_id: task } = await ask(url, { ...base, requires: ['skill:summarise'], payload: { goal: 'Summarise the Q3 report: revenue up 12% on services, hardware flat.' } });
    const card = page.locator(`.task-card[data-task="${task}"]`);
    // The second call's text shows while it streams, before its record is stored.
    await card.locator('.llm-streaming').waitFor({ timeout: 15_000 });
    assert.match(await card.locator('.llm-streaming').textContent() || '', /call 2, streaming: Revenue/);
    await taskIn(url, task, 'completed');
    await page.locator(`.task-card[data-task="${task}"][data-state="completed"]`).waitFor();
    assert.equal(await card.locator('.llm-streaming').count(), 0, 'the stream ended with its call');

    // Totals of the task's calls, from the records: two calls, their tokens and cost.
    const calls = (await events(url, { task_id: task, type: 'task.progress' })).filter((e) => e.payload_type === 'clutch.llm.call.v1');
    assert.equal(calls.length, 2);
    const input = calls.reduce((s, e) => s + e.payload.usage.input_tokens, 0);
    assert.match(await card.locator('.llm-totals').textContent() || '', new RegExp(`^2 LLM calls · ${input.toLocaleString('en-US')} in / \\d+ out tokens · 24 cache · \\$0\\.\\d{4} · \\d+`));
    assert.match(await page.locator('.run-view .view-sub').textContent() || '', /2 LLM calls/);

    // The first call opened: model, system prompt, the request's messages, the answer with its tool use.
    const first = card.locator('details.llm-call[data-turn="1"]');
    assert.match(await first.locator('summary').textContent() || '', /call 1 fake-model-1/);
    await first.locator('summary').click();
    const view = first.locator('.r-llm');
    await view.waitFor();
    assert.equal(await view.locator('.llm-model').textContent(), 'fake/fake-model-1');
    assert.equal(await view.locator('.llm-stop').textContent(), 'tool use');
    assert.match(await view.locator('.llm-system').textContent() || '', /You summarise text in three sentences/);
    assert.match(await view.locator('.llm-messages .llm-user').textContent() || '', /Summarise the Q3 report/);
    assert.match(await view.locator('.llm-answer').textContent() || '', /Reading the report first\.calls emit/);
    const figures = Object.fromEntries(await view.locator('.llm-usage > div').evaluateAll((ds) => ds.map((d) => [d.getAttribute('data-figure'), d.querySelector('dd')?.textContent])));
    assert.equal(figures.input, calls[0].payload.usage.input_tokens.toLocaleString('en-US'));
    assert.equal(figures.output, calls[0].payload.usage.output_tokens.toLocaleString('en-US'));
    assert.equal(figures['cache read'], '12');
    assert.match(figures.cost, /^\$0\.\d{4}$/);
    assert.match(figures.latency, /^\d+ ms$|^\d+(\.\d)? s$/);
    assert.equal(figures.retries, '0');

    // The second call: what it was sent (the tool's result), and the answer, folded as it is long.
    const second = card.locator('details.llm-call[data-turn="2"]');
    await second.locator('summary').click();
    const view2 = second.locator('.r-llm');
    await view2.waitFor();
    assert.equal(await view2.locator('.llm-stop').textContent(), 'end turn');
    assert.match(await view2.locator('.llm-messages .llm-tools').textContent() || '', /tool result for toolu_1/);
    assert.match(await view2.locator('.llm-answer').textContent() || '', /Revenue grew 12% on services/);
    assert.match(await card.locator('.outcome').textContent() || '', /Revenue grew 12%/);

    // Every event shown: each record renders as a call, not as a bare progress row.
    await page.locator('.filter-bar input[name=every]').check();
    await page.locator('.ev-task-progress .r-llm').first().waitFor();
    assert.equal(await page.locator('.ev-task-progress .r-llm').count(), 2);

    // The agent's page names the model it runs on, not "(its default model)".
    await page.goto(`${url}/#/agent/agent:summariser`);
    await eventually(async () => (await page.locator('[data-runs-on]').textContent()) === 'fake/fake-model-1', 'the agent card to name its model');
  });
});
