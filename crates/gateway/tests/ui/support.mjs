// Shared by the browser tests, the performance check and the screenshot script: start the real
// `clutch serve`, play agents and people through its API (register, ask, accept, report), and drive
// Debian's chromium with playwright-core. Nothing the daemon alone may say is posted: its routing
// decisions, deliveries, routing failures, timeouts, budget and status notices appear because the
// tests' agents and people gave it reason to.

import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
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
  const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];
  // A page fulfilled from disk (CLUTCH_UI_FROM_DISK) has no address of its own, and chromium would
  // then refuse its WebSocket to the daemon on loopback (local network access checks).
  if (process.env.CLUTCH_UI_FROM_DISK) args.push('--disable-features=LocalNetworkAccessChecks');
  return chromium.launch({ executablePath: chromiumPath(), args });
}

/**
 * Engine settings of every test daemon unless a test asks otherwise: agents that do not heartbeat stay
 * online for the length of a test file (the tests speak for their agents and do not keep them alive),
 * so no status change or AGENT_UNAVAILABLE failover lands in the middle of what a test counts. Tests
 * about liveness start a daemon with short timers (`env`).
 */
const ENGINE_DEFAULTS = {
  CLUTCH_ENGINE_STALE_AFTER: '600000ms',
  CLUTCH_ENGINE_OFFLINE_AFTER: '1200000ms',
};

/**
 * Starts `clutch serve` on a free port (or `port`) over `dataDir` (a new temporary one by default),
 * and waits for its "listening" line. `env` adds or overrides variables (`CLUTCH_ENGINE_*` timers).
 * `files` writes config files (`clutch.toml`, `policy/org.yaml`) into the daemon's working directory.
 * @param {{dataDir?: string, port?: number, env?: Record<string, string>, files?: Record<string, string>}} [options]
 */
export async function startDaemon(options = {}) {
  const dataDir = options.dataDir || mkdtempSync(path.join(tmpdir(), 'clutch-ui-'));
  const listen = `127.0.0.1:${options.port || 0}`;
  const env = { ...process.env, ...ENGINE_DEFAULTS, ...options.env, CLUTCH_LOG: 'warn', NO_COLOR: '1' };
  // Config files (clutch.toml, policy/org.yaml...) go into a directory of their own, the daemon's
  // working directory, where it finds clutch.toml.
  let cwd;
  if (options.files) {
    cwd = mkdtempSync(path.join(tmpdir(), 'clutch-ui-config-'));
    for (const [name, text] of Object.entries(options.files)) {
      mkdirSync(path.dirname(path.join(cwd, name)), { recursive: true });
      writeFileSync(path.join(cwd, name), text);
    }
  }
  const child = spawn(BIN, ['serve', '--listen', listen, '--data-dir', dataDir], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env,
    cwd,
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
 * A request to the API; answers `{status, body}` (the parsed JSON, or null).
 * @param {string} url
 * @param {string} method
 * @param {string} route
 * @param {unknown} [body]
 * @returns {Promise<{status: number, body: any}>}
 */
export async function request(url, method, route, body) {
  /** @type {RequestInit} */
  const init = { method };
  if (body !== undefined) {
    init.headers = { 'content-type': 'application/json' };
    init.body = JSON.stringify(body);
  }
  const r = await fetch(`${url}${route}`, init);
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

/**
 * Posts one message or an array; answers the daemon's JSON. A refused message throws, with the
 * daemon's answer in the error's message.
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

/** The daemon's own sender: routing, deliveries, timeouts, notices. */
export const ORCHESTRATOR = 'agent:orchestrator';
const ORCH = { agent_id: ORCHESTRATOR };

/**
 * Polls `probe` every 20 ms until it answers something truthy (which it answers), for 15 s at most.
 * @template T
 * @param {() => Promise<T>} probe
 * @param {string} what what is waited for (for the error)
 * @returns {Promise<NonNullable<T>>}
 */
export async function eventually(probe, what) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const value = await probe();
    if (value) return /** @type {NonNullable<T>} */ (value);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * `GET /v1/events` with a query (one page, up to the daemon's page size).
 * @param {string} url
 * @param {Record<string, string | number>} query
 * @returns {Promise<any[]>}
 */
export async function events(url, query) {
  const q = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
  const { status, body } = await request(url, 'GET', `/v1/events?${q}`);
  if (status !== 200) throw new Error(`GET /v1/events?${q}: ${status} ${JSON.stringify(body)}`);
  return body.events;
}

/** A task as the daemon tracks it (`GET /v1/tasks/{id}`), or null. @param {string} url @param {string} id */
export async function taskState(url, id) {
  const { status, body } = await request(url, 'GET', `/v1/tasks/${id}`);
  return status === 200 ? body : null;
}

/**
 * Waits until the daemon's task `id` is in one of `states` (`routed`, `queued`, `failed`...); answers it.
 * @param {string} url
 * @param {string} id
 * @param {string[]} states
 */
export function taskIn(url, id, ...states) {
  return eventually(async () => {
    const t = await taskState(url, id);
    return t && states.includes(t.state) ? t : null;
  }, `task ${id} to be ${states.join(' or ')}`);
}

/**
 * An agent as a test plays it, through the API only: it registers its AgentCard, heartbeats when
 * told to, waits for the daemon to deliver it a task, and answers about that delivery like the
 * example worker does (same thread, run, task and attempt, addressed to the orchestrator).
 */
export class Agent {
  /**
   * @param {string} url
   * @param {string} name `ken` for `agent:ken`
   * @param {Record<string, any>} [card] the AgentCard without its agent_id
   */
  constructor(url, name, card = {}) {
    this.url = url;
    this.id = `agent:${name}`;
    this.card = { agent_id: this.id, ...card };
  }

  /** `POST /v1/agents` with the card (an `agent.register`, or `agent.update` the second time). */
  async register() {
    const { status, body } = await request(this.url, 'POST', '/v1/agents', this.card);
    if (status !== 201) throw new Error(`POST /v1/agents ${this.id}: ${status} ${JSON.stringify(body)}`);
    return this;
  }

  async heartbeat() {
    const { status, body } = await request(this.url, 'POST', `/v1/agents/${this.id}/heartbeat`);
    if (status !== 200) throw new Error(`heartbeat ${this.id}: ${status} ${JSON.stringify(body)}`);
    return body;
  }

  /**
   * Heartbeats every `ms` until the returned function is called.
   * @param {number} ms
   */
  keepAlive(ms) {
    const timer = setInterval(() => void this.heartbeat().catch(() => {}), ms);
    return () => clearInterval(timer);
  }

  /**
   * Waits for the daemon to deliver task `taskId` to this agent (the routed copy of its request,
   * from the orchestrator) with at least `attempt`; answers that delivery.
   * @param {string} taskId
   * @param {number} [attempt]
   */
  delivery(taskId, attempt = 1) {
    return eventually(async () => {
      const list = await events(this.url, { task_id: taskId, type: 'task.request' });
      return list.findLast((e) => e.from.agent_id === ORCHESTRATOR && e.to.some((/** @type {any} */ r) => r.agent_id === this.id) && (e.attempt || 1) >= attempt);
    }, `the delivery of ${taskId} (attempt ${attempt}) to ${this.id}`);
  }

  /**
   * A message about a delivered task, as this agent; `fields` overrides.
   * @param {any} d the delivery
   * @param {string} type
   * @param {Record<string, any>} payload
   * @param {Record<string, any>} [fields]
   */
  say(d, type, payload, fields = {}) {
    return post(this.url, {
      thread_id: d.thread_id,
      run_id: d.run_id,
      task_id: d.task_id,
      ...(d.parent_task_id ? { parent_task_id: d.parent_task_id } : {}),
      from: { agent_id: this.id },
      to: [ORCH],
      type,
      attempt: d.attempt || 1,
      payload,
      ...fields,
    });
  }

  /** @param {any} d */
  accept(d) {
    return this.say(d, 'task.accept', {});
  }

  /** @param {any} d @param {Record<string, any>} payload */
  progress(d, payload) {
    return this.say(d, 'task.progress', payload);
  }

  /** @param {any} d @param {Record<string, any>} payload @param {string} [payloadType] */
  result(d, payload, payloadType) {
    return this.say(d, 'task.result', payload, payloadType ? { payload_type: payloadType } : {});
  }

  /** @param {any} d @param {{code: string, message: string, retryable: boolean}} payload */
  error(d, payload) {
    return this.say(d, 'task.error', payload);
  }

  /** A tool call in the task's context (refused unless the tool is on the card). @param {any} d @param {string} tool @param {unknown} args */
  toolCall(d, tool, args) {
    return this.say(d, 'tool.call', { tool, arguments: args }, { to: [] });
  }

  /** @param {any} d @param {string} tool @param {unknown} result */
  toolResult(d, tool, result) {
    return this.say(d, 'tool.result', { tool, result }, { to: [] });
  }
}

/**
 * Asks the orchestrator for work: a `task.request` the daemon routes. `fields` gives `requires`,
 * `prefers`, `payload`, ids and sender (a `user:` by default). Answers the request as posted.
 * @param {string} url
 * @param {Record<string, any>} fields
 */
export async function ask(url, fields) {
  const m = msg({ type: 'task.request', from: { agent_id: 'user:ada' }, to: [ORCH], ...fields });
  await post(url, m);
  return m;
}

/**
 * A small story told through the real daemon, in one thread and run: two agents register; a person
 * chats and asks for a research task, which the daemon routes (by preference) to ken; ken accepts,
 * calls a tool on its card, reports progress, asks for a code review (routed to ida, who accepts and
 * returns findings) and for the appendix (routed to ida, who fails it), then reports usage and its
 * summary; a closing chat. Each step waits for the daemon's routing, so the log's order is fixed:
 * `events` is how many events the run holds (the daemon's routing decisions and deliveries included).
 * @param {string} url
 * @returns {Promise<{thread: string, run: string, root: string, review: string, failing: string, chat: string, events: number, ken: Agent, ida: Agent}>}
 */
export async function story(url) {
  const ken = await new Agent(url, 'ken', {
    display: { name: 'ken', desc: 'Researcher: reads, searches and summarises' },
    capabilities: [{ id: 'skill:research', version: '1.2.0', tags: ['reports'], tools: ['web.search'] }],
    limits: { max_concurrency: 4 },
    budget: { tokens: 200_000, cost_usd: 5 },
  }).register();
  const ida = await new Agent(url, 'ida', {
    display: { name: 'ida', desc: 'Reviewer: code review, and an archive reader' },
    capabilities: [
      { id: 'skill:research', version: '1.0.0' },
      { id: 'skill:code_review', version: '2.1.0' },
      { id: 'skill:archive', version: '1.0.0' },
    ],
    limits: { max_concurrency: 2 },
    budget: { tokens: 100_000 },
  }).register();
  const thread = newId('thr');
  const run = newId('run');
  const [root, review, failing, chat] = [newId('task'), newId('task'), newId('task'), newId('task')];
  const base = { thread_id: thread, run_id: run };

  await post(url, msg({ ...base, task_id: chat, from: { agent_id: 'user:ada' }, payload: { text: 'Can someone summarise the Q3 report and review the parser change?' } }));
  // Both agents do research; ken's version matches the preference.
  await ask(url, { ...base, task_id: root, requires: ['skill:research'], prefers: ['skill:research@^1.2'], payload: { goal: 'Summarise the Q3 report' } });
  const r = await ken.delivery(root);
  await ken.accept(r);
  await ken.toolCall(r, 'web.search', { query: 'Q3 report revenue' });
  await ken.toolResult(r, 'web.search', { hits: 3 });
  await ken.progress(r, { percent: 40, message: 'reading section 2' });

  await ask(url, { ...base, task_id: review, parent_task_id: root, from: { agent_id: ken.id }, requires: ['skill:code_review'], payload: { goal: 'Review the parser change' } });
  const rv = await ida.delivery(review);
  await ida.accept(rv);
  await ida.result(rv, { summary: 'Two problems', findings: [{ severity: 'high', file: 'src/parse.rs', line: 42, message: 'unchecked index can panic' }, { severity: 'low', file: 'src/parse.rs', line: 7, message: 'name shadows a builtin' }] }, 'code_review.findings.v1');

  await ask(url, { ...base, task_id: failing, parent_task_id: root, from: { agent_id: ken.id }, requires: ['skill:archive'], payload: { goal: 'Fetch the appendix' } });
  const f = await ida.delivery(failing);
  await ida.error(f, { code: 'UPSTREAM_TIMEOUT', message: 'the archive did not answer', retryable: false });

  await ken.progress(r, { percent: 90, message: 'writing the summary', usage: { tokens: 1200, cost_usd: 0.04 } });
  await ken.result(r, { summary: 'Revenue grew 12% on services.', findings: [{ claim: 'Services revenue +18%', citations: [1] }, { claim: 'Hardware flat', citations: [2] }], citations: [{ title: 'Q3 report', url: 'https://example.com/q3.pdf' }, { title: 'Earnings call', url: 'https://example.com/call' }] }, 'research.summary.v1');
  await post(url, msg({ ...base, task_id: chat, from: { agent_id: ken.id }, payload: { text: 'Done: summary and review are in.' } }));
  await taskIn(url, failing, 'failed');
  const count = (await events(url, { run_id: run, limit: 1000 })).length;
  return { thread, run, root, review, failing, chat, events: count, ken, ida };
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
 * `daemon` (a restart); the one there at the end is disposed of. `options` go to `startDaemon`.
 * @param {(env: Env) => Promise<void>} [setup]
 * @param {{env?: Record<string, string>, files?: Record<string, string>}} [options]
 * @returns {Env}
 */
export function daemonAndBrowser(setup, options = {}) {
  const env = /** @type {any} */ ({});
  before(async () => {
    [env.daemon, env.browser] = await Promise.all([startDaemon(options), launch()]);
    await setup?.(env);
  });
  after(async () => {
    await env.browser?.close();
    await env.daemon?.dispose();
  });
  return env;
}
