// The agents panel: every agent with its status (online / stale / offline), load against
// `max_concurrency`, capabilities, success rate and budget usage as bars; and one agent's page with
// its messages. Uses `GET /v1/agents` (the agents as `api-types.js` types them).

import { h, perFrame, debounce, formatNumber, formatUsd, timeEl, nameOf } from '../util.js';
import { barEl } from '../components/elements.js';
import { href } from '../router.js';
import { Timeline } from './timeline.js';
import { LLM_CALL_PAYLOAD } from '../store.js';

/** @typedef {import('../types.js').Agent} Agent */

const ORDER = { online: 0, stale: 1, offline: 2, removed: 3 };

/** Agent events and task outcomes change what the panel shows. @param {string} type */
function relevant(type) {
  return type.startsWith('agent.') || type.startsWith('task.') || type.startsWith('routing.') || type === 'chat.system';
}

/**
 * The agents as the daemon reports them. Re-read when events suggest a change (never on a timer).
 */
class AgentSource {
  /**
   * @param {import('../api.js').Api} api
   * @param {import('../store.js').Store} store
   * @param {() => void} onChange
   */
  constructor(api, store, onChange) {
    this.api = api;
    this.store = store;
    this.onChange = onChange;
    /** @type {Agent[]} */
    this.reported = [];
    this.loaded = false;
    this.error = '';
    this.reload = debounce(() => void this.load(), 500);
    this.unsubscribe = store.subscribe((change) => {
      if (!change.events.some((e) => relevant(e.type)) && !change.reset) return;
      this.reload();
    });
    void this.load();
  }

  async load() {
    try {
      this.reported = await this.api.agents();
      this.error = '';
    } catch (e) {
      this.error = String(/** @type {Error} */ (e).message || e);
    }
    this.loaded = true;
    this.onChange();
  }

  /** @returns {Agent[]} */
  agents() {
    return [...this.reported].sort((a, b) => (ORDER[a.status] ?? 3) - (ORDER[b.status] ?? 3) || a.agent_id.localeCompare(b.agent_id));
  }

  destroy() {
    this.unsubscribe();
  }
}

/**
 * `provider/model` of a built-in LLM agent (its card's `meta.llm`); null for other agents. A card
 * that leaves the model to its provider is named by the model its last recorded call used, when the
 * page holds one.
 * @param {Agent['card']} card
 * @param {import('../store.js').Store} [store]
 * @returns {string | null}
 */
function runsOn(card, store) {
  const runtime = /** @type {{provider?: unknown, model?: unknown} | undefined} */ (card.meta?.llm);
  if (!runtime || typeof runtime.provider !== 'string') return null;
  if (typeof runtime.model === 'string') return `${runtime.provider}/${runtime.model}`;
  const calls = store?.bySender.get(card.agent_id) || [];
  let last;
  for (let i = calls.length - 1; i >= 0 && !last; i--) if (calls[i].payload_type === LLM_CALL_PAYLOAD && typeof calls[i].payload?.model === 'string') last = calls[i];
  return last ? `${runtime.provider}/${last.payload.model}` : `${runtime.provider} (its default model)`;
}

/** @param {Agent} a @param {import('../store.js').Store} [store] */
function agentCard(a, store) {
  const card = a.card;
  const caps = card.capabilities || [];
  const usage = a.usage;
  const budget = a.budget || {};
  const max = a.load.max_concurrency ?? null;
  const inFlight = a.load.in_flight;
  return h(
    'article',
    { class: `agent-card status-border-${a.status}`, 'data-agent': a.agent_id },
    h(
      'header',
      null,
      h('span', { class: `status status-${a.status}` }, a.status),
      h('a', { href: href.agent(a.agent_id), class: 'agent-name', 'data-primary': '' }, card.display?.name || nameOf(a.agent_id)),
      h('span', { class: 'muted mono' }, a.agent_id),
    ),
    card.display?.desc && h('p', { class: 'muted' }, String(card.display.desc)),
    h(
      'dl',
      { class: 'agent-facts' },
      runsOn(card, store) ? [h('dt', null, 'runs on'), h('dd', { class: 'mono', 'data-runs-on': '' }, runsOn(card, store))] : null,
      h('dt', null, 'load'),
      h('dd', null, barEl(inFlight, max, 'load', max ? `${inFlight} / ${max}` : `${inFlight} in flight`)),
      budget.tokens != null || usage.tokens
        ? [h('dt', null, 'tokens'), h('dd', null, barEl(usage.tokens || 0, budget.tokens, 'token budget', budget.tokens ? `${formatNumber(usage.tokens || 0)} / ${formatNumber(budget.tokens)}` : formatNumber(usage.tokens || 0)))]
        : null,
      budget.cost_usd != null || usage.cost_usd
        ? [h('dt', null, 'cost'), h('dd', null, barEl(usage.cost_usd || 0, budget.cost_usd, 'cost budget', budget.cost_usd ? `${formatUsd(usage.cost_usd || 0)} / ${formatUsd(budget.cost_usd)}` : formatUsd(usage.cost_usd || 0)))]
        : null,
      budget.requests != null || usage.requests
        ? [h('dt', null, 'requests'), h('dd', null, barEl(usage.requests || 0, budget.requests, 'request budget', budget.requests ? `${usage.requests || 0} / ${budget.requests}` : String(usage.requests || 0)))]
        : null,
      a.success_rate !== null && a.success_rate !== undefined ? [h('dt', null, 'success'), h('dd', null, barEl(Math.round(a.success_rate * 100), 100, 'success rate', `${Math.round(a.success_rate * 100)}%`, 'plain'))] : null,
      h('dt', null, 'last seen'),
      h('dd', null, a.last_seen ? timeEl(a.last_seen) : 'never'),
    ),
    caps.length > 0 &&
      h(
        'ul',
        { class: 'caps', 'aria-label': 'capabilities' },
        caps.map((c) => h('li', null, h('code', { class: 'cap' }, `${c.id}${c.version ? `@${c.version}` : ''}`))),
      ),
  );
}

export class AgentsView {
  /** @param {import('../api.js').Api} api @param {import('../store.js').Store} store */
  constructor(api, store) {
    this.store = store;
    this.grid = h('div', { class: 'agent-grid' });
    this.note = h('p', { class: 'muted view-sub' });
    this.el = h('div', { class: 'agents-view' }, h('header', { class: 'view-head' }, h('div', null, h('h1', { class: 'view-title' }, 'Agents'), this.note)), this.grid);
    this.render = perFrame(() => this.draw());
    this.source = new AgentSource(api, store, this.render);
    this.grid.addEventListener('keydown', (e) => {
      if (e.key !== 'ArrowDown' && e.key !== 'ArrowUp' && e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') return;
      const links = /** @type {HTMLElement[]} */ ([...this.grid.querySelectorAll('a.agent-name')]);
      const at = links.indexOf(/** @type {HTMLElement} */ (document.activeElement));
      if (at < 0) return;
      e.preventDefault();
      links[Math.max(0, Math.min(links.length - 1, at + (e.key === 'ArrowDown' || e.key === 'ArrowRight' ? 1 : -1)))].focus();
    });
  }

  draw() {
    const agents = this.source.agents();
    const counts = { online: 0, stale: 0, offline: 0, removed: 0 };
    for (const a of agents) counts[a.status] += 1;
    const origin = !this.source.loaded ? 'Loading…' : this.source.error ? `Could not read the agents: ${this.source.error}` : 'As the daemon reports them.';
    this.note.textContent = `${agents.length} agents · ${counts.online} online · ${counts.stale} stale · ${counts.offline} offline. ${origin}`;
    this.grid.replaceChildren(...(agents.length ? agents.map((a) => agentCard(a, this.store)) : [h('p', { class: 'empty' }, 'No agents have been seen yet.')]));
  }

  destroy() {
    this.source.destroy();
  }
}

export class AgentView {
  /**
   * @param {import('../api.js').Api} api
   * @param {import('../store.js').Store} store
   * @param {string} agentId
   * @param {{filter?: import('../types.js').Filter, onFilter?: (f: import('../types.js').Filter) => void, taskHref: (task: string, run: string) => string}} options
   */
  constructor(api, store, agentId, options) {
    this.agentId = agentId;
    this.store = store;
    this.cardSlot = h('div', { class: 'agent-one' });
    this.timeline = new Timeline({ store, kind: 'agent', id: agentId, filter: options.filter, onFilter: options.onFilter, taskHref: options.taskHref, fold: false, empty: 'No messages from this agent yet.' });
    this.el = h(
      'div',
      { class: 'agent-view' },
      h('header', { class: 'view-head' }, h('div', null, h('h1', { class: 'view-title' }, nameOf(agentId)), h('p', { class: 'muted view-sub' }, `${agentId} · messages it sent · `, h('a', { href: href.agents() }, 'all agents')))),
      this.cardSlot,
      this.timeline.el,
    );
    this.render = perFrame(() => this.draw());
    this.source = new AgentSource(api, store, this.render);
  }

  draw() {
    const a = this.source.agents().find((x) => x.agent_id === this.agentId);
    this.cardSlot.replaceChildren(a ? agentCard(a, this.store) : h('p', { class: 'muted' }, 'Not known as an agent (yet).'));
  }

  destroy() {
    this.source.destroy();
    this.timeline.destroy();
  }
}
