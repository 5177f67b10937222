// The tools panel: the servers of tools the daemon runs (`GET /v1/tools`), each with its state
// (ready, starting, restarting), restarts, last error and tools (what they do, from their
// annotations); and the calls waiting for approval (`GET /v1/approvals`), each with Approve and Deny.
// Re-read when events suggest a change (a call, an approval, a decision), never on a timer.

import { h, perFrame, debounce, nameOf, localTime } from '../util.js';
import { href } from '../router.js';
import { decideRow, rawJson } from '../render/payloads.js';

/** @typedef {import('../api-types.js').ToolServer} ToolServer */
/** @typedef {import('../api-types.js').Approval} Approval */

/** Events that may change what the panel shows. @param {import('../types.js').ClutchEvent} e */
function relevant(e) {
  return e.type.startsWith('tool.') || (e.type === 'chat.system' && (e.payload_type || '').startsWith('clutch.approval.'));
}

/** What a tool does, in a few words. @param {import('../api-types.js').ToolAnnotations} a */
function does(a) {
  if (a.read_only) return 'read-only';
  return `${a.destructive ? 'destructive' : 'writes'}${a.idempotent ? ', idempotent' : ''}`;
}

export class ToolsView {
  /** @param {import('../api.js').Api} api @param {import('../store.js').Store} store */
  constructor(api, store) {
    this.api = api;
    /** @type {ToolServer[]} */
    this.servers = [];
    /** @type {Approval[]} */
    this.pending = [];
    this.error = '';
    this.loaded = false;
    this.servedList = h('div', { class: 'tool-servers' });
    this.pendingList = h('div', { class: 'approvals' });
    this.note = h('p', { class: 'muted view-sub' });
    this.el = h(
      'div',
      { class: 'tools-view' },
      h('header', { class: 'view-head' }, h('div', null, h('h1', { class: 'view-title' }, 'Tools'), this.note)),
      h('h2', { class: 'section-title' }, 'Waiting for approval'),
      this.pendingList,
      h('h2', { class: 'section-title' }, 'Servers'),
      this.servedList,
    );
    this.render = perFrame(() => this.draw());
    this.reload = debounce(() => void this.load(), 300);
    this.unsubscribe = store.subscribe((change) => {
      if (change.reset || change.events.some(relevant)) this.reload();
    });
    void this.load();
  }

  async load() {
    try {
      const [tools, approvals] = await Promise.all([this.api.json('/v1/tools'), this.api.json('/v1/approvals')]);
      this.servers = /** @type {import('../api-types.js').Tools} */ (tools).servers;
      this.pending = /** @type {import('../api-types.js').Approvals} */ (approvals).pending;
      this.error = '';
    } catch (e) {
      this.error = String(/** @type {Error} */ (e).message || e);
    }
    this.loaded = true;
    this.render();
  }

  draw() {
    const ready = this.servers.filter((s) => s.state === 'ready').length;
    const origin = !this.loaded ? 'Loading…' : this.error ? `Could not read the tools: ${this.error}` : 'As the daemon reports them.';
    /** @param {number} n @param {string} one */
    const count = (n, one) => `${n} ${one}${n === 1 ? '' : 's'}`;
    this.note.textContent = `${count(this.servers.length, 'server')} · ${ready} ready · ${count(this.pending.length, 'call')} waiting. ${origin}`;
    this.pendingList.replaceChildren(
      ...(this.pending.length ? this.pending.map((a) => this.approvalRow(a)) : [h('p', { class: 'empty' }, 'No call is waiting for approval.')]),
    );
    this.servedList.replaceChildren(
      ...(this.servers.length
        ? this.servers.map(serverCard)
        : [h('p', { class: 'empty' }, 'No tool server is declared: add [[mcp_servers]] to clutch.toml.')]),
    );
  }

  /** @param {Approval} a */
  approvalRow(a) {
    return h(
      'article',
      { class: 'r-approval approval-row', 'data-call': a.call_id },
      h(
        'p',
        null,
        h('strong', null, a.tool),
        ' called by ',
        h('a', { href: href.agent(a.caller) }, nameOf(a.caller)),
        ` (${a.reason}) · `,
        h('a', { href: href.thread(a.thread_id) }, 'thread'),
        ` · expires ${localTime(a.expires_at)}`,
      ),
      rawJson(a.args, 'arguments'),
      decideRow(a.call_id),
    );
  }

  destroy() {
    this.unsubscribe();
  }
}

/** @param {ToolServer} s */
function serverCard(s) {
  return h(
    'article',
    { class: `tool-server state-border-${s.state === 'ready' ? 'completed' : 'failed'}`, 'data-server': s.name },
    h(
      'header',
      null,
      h('span', { class: `status status-${s.state === 'ready' ? 'online' : 'offline'}` }, s.state),
      ' ',
      h('strong', null, s.name),
      h('span', { class: 'muted' }, ` ${s.transport} · ${s.tools.length} tools${s.restarts ? ` · restarted ${s.restarts}×` : ''}`),
    ),
    s.error && h('p', { class: 'error-text' }, s.error),
    h(
      'ul',
      { class: 'tool-list' },
      s.tools.map((t) => h('li', null, h('code', null, t.name), h('span', { class: 'muted' }, ` ${does(t.annotations)}`), t.description ? ` — ${t.description.split('\n')[0]}` : '')),
    ),
  );
}
