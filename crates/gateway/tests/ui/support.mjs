// Shared by the browser tests, the performance check and the screenshot script: start the real
// `clutch serve`, post messages through the API, and drive Debian's chromium with playwright-core.

import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, after } from 'node:test';
import { chromium } from 'playwright-core';
import { newId } from '../../ui/js/util.js';

export { newId };

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const TARGET = process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target');
export const BIN = process.env.CLUTCH_BIN || path.join(TARGET, 'debug', 'clutch');
export const ARTIFACTS = path.join(TARGET, 'ui-test-artifacts');

/** The browser binary: Debian's chromium (the wrapper script at /usr/bin/chromium execs this). */
export function chromiumPath() {
  return process.env.CHROMIUM || '/usr/lib/chromium/chromium';
}

export async function launch() {
  return chromium.launch({
    executablePath: chromiumPath(),
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/**
 * Starts `clutch serve` on a free port (or `port`) over `dataDir` (a new temporary one by default),
 * and waits for its "listening" line.
 * @param {{dataDir?: string, port?: number}} [options]
 */
export async function startDaemon(options = {}) {
  const dataDir = options.dataDir || mkdtempSync(path.join(tmpdir(), 'clutch-ui-'));
  const listen = `127.0.0.1:${options.port || 0}`;
  const child = spawn(BIN, ['serve', '--listen', listen, '--data-dir', dataDir], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, CLUTCH_LOG: 'warn', NO_COLOR: '1' },
  });
  let stderr = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`clutch serve did not start in 20 s:\n${stderr}`)), 20_000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
      // The whole line: stderr may arrive in pieces, and half an address is another address.
      const m = /clutch: listening on (http:\/\/\S+)\n/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`clutch serve exited with ${code}:\n${stderr}`));
    });
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  return {
    url,
    port: Number(new URL(url).port),
    dataDir,
    /** Stops the daemon with SIGTERM (a clean shutdown) and waits for it. */
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
    /** Stops it and removes its data. */
    async dispose() {
      await this.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Posts one message or an array; answers the daemon's JSON.
 * @param {string} url
 * @param {unknown} body
 */
export async function post(url, body) {
  const r = await fetch(`${url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`POST /v1/messages: ${r.status} ${text}`);
  return JSON.parse(text);
}

/** Posts many messages in batches of at most 10,000 (the daemon's limit). @param {string} url @param {unknown[]} messages */
export async function postAll(url, messages) {
  for (let i = 0; i < messages.length; i += 10_000) {
    const { results } = await post(url, messages.slice(i, i + 10_000));
    const bad = results.find((/** @type {any} */ r) => r.error);
    if (bad) throw new Error(`a message was refused: ${JSON.stringify(bad)}`);
  }
}

/**
 * A message with the required fields; `fields` overrides.
 * @param {Record<string, any>} fields
 */
export function msg(fields) {
  return {
    thread_id: fields.thread_id || newId('thr'),
    run_id: fields.run_id || newId('run'),
    task_id: fields.task_id || newId('task'),
    from: { agent_id: 'agent:ken' },
    to: [],
    type: 'chat.message',
    payload: { text: 'hello' },
    ...fields,
  };
}

/**
 * A small story in one thread and run: a chat, a routed research task that completes with findings
 * and citations, a code review subtask with findings, a tool call, and a failed subtask.
 * @returns {{thread: string, run: string, root: string, review: string, failing: string, messages: any[]}}
 */
export function story() {
  const thread = newId('thr');
  const run = newId('run');
  const root = newId('task');
  const review = newId('task');
  const failing = newId('task');
  const chat = newId('task');
  const base = { thread_id: thread, run_id: run };
  const orch = { agent_id: 'agent:orchestrator' };
  const messages = [
    msg({ ...base, task_id: chat, from: { agent_id: 'user:ada' }, payload: { text: 'Can someone summarise the Q3 report and review the parser change?' } }),
    msg({ ...base, task_id: root, type: 'task.request', from: { agent_id: 'user:ada' }, to: [orch], requires: ['skill:research'], payload: { goal: 'Summarise the Q3 report' } }),
    msg({ ...base, task_id: root, type: 'routing.decision', from: orch, payload: { selected: 'agent:ken', candidates: ['agent:ken', 'agent:ida'], scores: { 'agent:ken': 0.82, 'agent:ida': 0.41 }, reason: 'best skill match, lowest load' } }),
    msg({ ...base, task_id: root, type: 'task.request', from: orch, to: [{ agent_id: 'agent:ken' }], requires: ['skill:research'], payload: { goal: 'Summarise the Q3 report' } }),
    msg({ ...base, task_id: root, type: 'task.accept', from: { agent_id: 'agent:ken' }, payload: {} }),
    msg({ ...base, task_id: root, type: 'tool.call', from: { agent_id: 'agent:ken' }, payload: { tool: 'web.search', arguments: { query: 'Q3 report revenue' } } }),
    msg({ ...base, task_id: root, type: 'tool.result', from: { agent_id: 'agent:ken' }, payload: { tool: 'web.search', result: { hits: 3 } } }),
    msg({ ...base, task_id: root, type: 'task.progress', from: { agent_id: 'agent:ken' }, payload: { percent: 40, message: 'reading section 2' } }),
    msg({ ...base, task_id: review, parent_task_id: root, type: 'task.request', from: { agent_id: 'agent:ken' }, to: [orch], requires: ['skill:code_review'], payload: { goal: 'Review the parser change' } }),
    msg({ ...base, task_id: review, parent_task_id: root, type: 'task.request', from: orch, to: [{ agent_id: 'agent:ida' }], payload: { goal: 'Review the parser change' } }),
    msg({ ...base, task_id: review, parent_task_id: root, type: 'task.accept', from: { agent_id: 'agent:ida' }, payload: {} }),
    msg({ ...base, task_id: review, parent_task_id: root, type: 'task.result', from: { agent_id: 'agent:ida' }, payload_type: 'code_review.findings.v1', payload: { summary: 'Two problems', findings: [{ severity: 'high', file: 'src/parse.rs', line: 42, message: 'unchecked index can panic' }, { severity: 'low', file: 'src/parse.rs', line: 7, message: 'name shadows a builtin' }] } }),
    msg({ ...base, task_id: failing, parent_task_id: root, type: 'task.request', from: { agent_id: 'agent:ken' }, to: [orch], payload: { goal: 'Fetch the appendix' } }),
    msg({ ...base, task_id: failing, parent_task_id: root, type: 'task.error', from: { agent_id: 'agent:ida' }, payload: { code: 'UPSTREAM_TIMEOUT', message: 'the archive did not answer', retryable: true } }),
    msg({ ...base, task_id: root, type: 'task.progress', from: { agent_id: 'agent:ken' }, payload: { percent: 90, message: 'writing the summary', usage: { tokens: 1200, cost_usd: 0.04 } } }),
    msg({ ...base, task_id: root, type: 'task.result', from: { agent_id: 'agent:ken' }, payload_type: 'research.summary.v1', payload: { summary: 'Revenue grew 12% on services.', findings: [{ claim: 'Services revenue +18%', citations: [1] }, { claim: 'Hardware flat', citations: [2] }], citations: [{ title: 'Q3 report', url: 'https://example.com/q3.pdf' }, { title: 'Earnings call', url: 'https://example.com/call' }] } }),
    msg({ ...base, task_id: chat, from: { agent_id: 'agent:ken' }, payload: { text: 'Done: summary and review are in.' } }),
  ];
  return { thread, run, root, review, failing, messages };
}

/**
 * Runs `fn` with a fresh page on `url`; on failure saves a screenshot to target/ui-test-artifacts/.
 * @param {import('playwright-core').Browser} browser
 * @param {string} name
 * @param {string} url
 * @param {(page: import('playwright-core').Page) => Promise<void>} fn
 * @param {{colorScheme?: 'light' | 'dark', viewport?: {width: number, height: number}}} [options]
 */
export async function withPage(browser, name, url, fn, options = {}) {
  const context = await browser.newContext({ viewport: options.viewport || { width: 1366, height: 800 }, colorScheme: options.colorScheme || 'light' });
  if (process.env.CLUTCH_UI_FROM_DISK) {
    // Iterating on the UI: serve its files from the work tree instead of the binary (no relink).
    const { readFileSync } = await import('node:fs');
    const types = { html: 'text/html', css: 'text/css', js: 'text/javascript', svg: 'image/svg+xml' };
    await context.route(/\/(ui\/.*)?(\?.*)?(#.*)?$/, (route) => {
      const url = new URL(route.request().url());
      const file = url.pathname === '/' ? 'index.html' : url.pathname.replace(/^\/ui\//, '');
      const ext = /** @type {keyof typeof types} */ (file.split('.').pop());
      route.fulfill({ body: readFileSync(path.join(ROOT, 'crates/gateway/ui', file)), contentType: types[ext] || 'application/octet-stream' });
    });
  }
  const page = await context.newPage();
  /** @type {string[]} */
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/WebSocket|Failed to load resource|ERR_CONNECTION_REFUSED/.test(m.text())) errors.push(m.text());
  });
  try {
    await page.goto(url);
    await fn(page);
    if (errors.length) throw new Error(`errors in the page:\n${errors.join('\n')}`);
  } catch (e) {
    mkdirSync(ARTIFACTS, { recursive: true });
    const file = path.join(ARTIFACTS, `${name.replace(/[^a-z0-9]+/gi, '-')}.png`);
    await page.screenshot({ path: file, fullPage: false }).catch(() => {});
    if (e instanceof Error) e.message += `\n(screenshot: ${file})${errors.length ? `\npage errors:\n${errors.join('\n')}` : ''}`;
    throw e;
  } finally {
    await context.close();
  }
}

/** Waits until the page's stream is live. @param {import('playwright-core').Page} page */
export async function live(page) {
  await page.waitForFunction(() => /** @type {any} */ (window).__clutch?.stream?.status === 'live', null, { timeout: 15_000 });
}

/**
 * Waits until `fn` (run in the page) is truthy.
 * @template A
 * @param {import('playwright-core').Page} page
 * @param {(arg: A) => unknown} fn
 * @param {A} [arg]
 */
export async function until(page, fn, arg) {
  await page.waitForFunction(fn, arg, { timeout: 15_000 });
}

/**
 * @typedef {{daemon: Awaited<ReturnType<typeof startDaemon>>, browser: import('playwright-core').Browser}} Env
 */

/**
 * For a test file: a daemon and a browser started before its tests (then `setup`, in the same hook:
 * node may run a file's top-level hooks together) and stopped after them. A test may replace
 * `daemon` (a restart); the one there at the end is disposed of.
 * @param {(env: Env) => Promise<void>} [setup]
 * @returns {Env}
 */
export function daemonAndBrowser(setup) {
  const env = /** @type {any} */ ({});
  before(async () => {
    [env.daemon, env.browser] = await Promise.all([startDaemon(), launch()]);
    await setup?.(env);
  });
  after(async () => {
    await env.browser?.close();
    await env.daemon?.dispose();
  });
  return env;
}
