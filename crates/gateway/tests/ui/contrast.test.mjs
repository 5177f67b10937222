// Contrast of every badge and chip, in the light and the dark theme: the WCAG 2 contrast ratio of its
// computed text colour on its computed background (the nearest ancestor's that is not transparent,
// translucent layers blended) is at least 4.5. Measured on real pages (a story's run, a workflow's run,
// a finished session, the agents and positions pages) and on one badge of every kind the UI draws
// (every task state, tool call state, severity, status, phase, message type, checkpoint type), made
// by the UI's own modules in the page.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, daemonAndBrowser, live, request, story, until, withPage } from './support.mjs';

const env = daemonAndBrowser(async ({ daemon }) => {
  const s = await story(daemon.url);
  const ken = await new Agent(daemon.url, 'kai', { capabilities: [{ id: 'skill:code', version: '1.0.0' }] }).register();
  const wf = (await request(daemon.url, 'POST', '/v1/workflows', { name: 'oauth' })).body;
  await request(daemon.url, 'PUT', `/v1/workflows/${wf.id}/plan`, { tasks: [{ name: 'setup' }, { name: 'google', depends_on: ['setup'] }, { name: 'github', depends_on: ['setup'] }] });
  const tasks = (await request(daemon.url, 'GET', `/v1/workflows/${wf.id}`)).body.tasks;
  await request(daemon.url, 'POST', `/v1/tasks/${tasks[0].id}/claim`, { agent_id: ken.id });
  await request(daemon.url, 'POST', `/v1/tasks/${tasks[0].id}/checkpoints`, { agent_id: ken.id, type: 'progress', summary: 'deps installed', files_changed: ['Cargo.toml'] });
  await request(daemon.url, 'POST', `/v1/tasks/${tasks[0].id}/status`, { agent_id: ken.id, status: 'completed', outcome: 'done' });
  await request(daemon.url, 'POST', `/v1/tasks/${tasks[1].id}/claim`, { agent_id: ken.id });
  await request(daemon.url, 'POST', `/v1/tasks/${tasks[1].id}/status`, { agent_id: ken.id, status: 'blocked', reason: 'waiting for a secret' });
  Object.assign(pages, { run: `#/run/${s.run}`, workflow: `#/run/${wf.id}`, agents: '#/agents', positions: '#/positions' });
});

/** @type {Record<string, string>} */
const pages = {};

const BADGES = '.state, .type-badge, .sev, .status, .phase, .badge, .chip, .cap, .retryable, .cp-type, .llm-stop, a.dep, .error-code';

/**
 * Every visible badge on the page with its contrast ratio, measured from computed colours.
 * @param {import('playwright-core').Page} page
 * @returns {Promise<{what: string, ratio: number, fg: string, bg: string}[]>}
 */
function measure(page) {
  return page.evaluate((selector) => {
    /** @param {string} c @returns {number[]} r, g, b, a */
    const parse = (c) => {
      const m = c.match(/rgba?\(([^)]+)\)/);
      if (!m) return [0, 0, 0, 0];
      const parts = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
      return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
    };
    /** @param {number[]} top @param {number[]} under */
    const blend = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
    /** @param {Element} el */
    const background = (el) => {
      /** @type {number[][]} */
      const layers = [];
      for (let e = /** @type {Element | null} */ (el); e; e = e.parentElement) {
        const c = parse(getComputedStyle(e).backgroundColor);
        if (c[3] > 0) layers.push(c);
        if (c[3] >= 1) break;
      }
      let color = [255, 255, 255, 1];
      for (const layer of layers.reverse()) color = blend(layer, color);
      return color;
    };
    /** @param {number[]} c */
    const luminance = (c) => {
      const [r, g, b] = c.slice(0, 3).map((v) => {
        const s = v / 255;
        return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    return [...document.querySelectorAll(selector)]
      .filter((el) => el instanceof HTMLElement && el.offsetParent !== null && (el.textContent || '').trim())
      .map((el) => {
        const bg = background(el);
        const fg = blend(parse(getComputedStyle(el).color), bg);
        const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
        return { what: `${el.className} "${(el.textContent || '').trim().slice(0, 30)}"`, ratio: (hi + 0.05) / (lo + 0.05), fg: fg.join(','), bg: bg.join(',') };
      });
  }, BADGES);
}

/** One badge of every kind the UI draws, made by its own modules, on the page. @param {import('playwright-core').Page} page */
async function everyKind(page) {
  await page.evaluate(async () => {
    const { stateChip, STATE_LABEL } = await import('/ui/js/render/events.js');
    const box = document.createElement('div');
    box.className = 'badge-fixture';
    box.style.cssText = 'position: fixed; inset: auto 0 0 0; z-index: 99; background: var(--panel); padding: 8px; display: flex; flex-wrap: wrap; gap: 4px;';
    for (const s of Object.keys(STATE_LABEL)) box.append(stateChip(/** @type {any} */ (s)));
    /** @param {string} cls @param {string} text */
    const add = (cls, text) => {
      const el = document.createElement('span');
      el.className = cls;
      el.textContent = text;
      box.append(el);
    };
    for (const k of ['done', 'failed', 'denied', 'expired', 'in-doubt', 'waiting', 'running', 'approved', 'called']) add(`state call-state state-${k}`, k);
    for (const k of ['critical', 'high', 'medium', 'low', 'info']) add(`sev sev-${k}`, k);
    for (const k of ['online', 'stale', 'offline']) add(`status status-${k}`, k);
    for (const k of ['running', 'completed', 'error', 'timeout']) add(`phase phase-${k}`, k.toUpperCase());
    for (const k of ['task', 'tool', 'routing', 'agent', 'chat']) add(`type-badge type-${k}`, `${k}.x`);
    for (const k of ['plan', 'progress', 'decision', 'error', 'recovery', 'complete']) add(`cp-type cp-${k}`, k);
    add('retryable yes', 'retryable');
    add('retryable no', 'not retryable');
    add('badge', '3');
    add('chip', 'mirror');
    add('llm-stop', 'end turn');
    document.body.append(box);
  });
}

for (const theme of /** @type {const} */ (['light', 'dark'])) {
  test(`every badge and chip reads at a contrast of 4.5 or more in the ${theme} theme`, async (t) => {
    /** @type {{what: string, ratio: number, fg: string, bg: string, page: string}[]} */
    const low = [];
    let measured = 0;
    for (const [name, hash] of Object.entries(pages)) {
      await withPage(env.browser, `${t.name} ${name}`, `${env.daemon.url}/${hash}`, async (page) => {
        await live(page);
        await until(page, (want) => document.documentElement.dataset.theme === want, theme);
        await page.locator(BADGES).first().waitFor();
        if (name === 'run') await everyKind(page);
        const found = await measure(page);
        measured += found.length;
        low.push(...found.filter((f) => f.ratio < 4.5).map((f) => ({ ...f, page: name })));
      }, { colorScheme: theme });
    }
    assert.ok(measured > 60, `only ${measured} badges measured`);
    assert.deepEqual(low, [], `badges under 4.5:\n${low.map((l) => `${l.page}: ${l.what} ${l.ratio.toFixed(2)} (${l.fg} on ${l.bg})`).join('\n')}`);
  });
}
