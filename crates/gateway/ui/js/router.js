// Hash routes: every view has an address that can be bookmarked, shared and walked with Back.
//   #/                         everything, with filters (?type=&agent=&task=&q=)
//   #/thread/ID                a thread's conversation
//   #/run/ID  #/run/ID/task/T  a run's task tree and timeline, optionally one task's events
//   #/run/ID?at=SEQ            the same, scrolled to one event (a search result)
//   #/agents  #/agent/ID       the agents panel, one agent's messages
//   #/tools                    the tool servers and the calls waiting for approval
//   #/positions                the positions (teams of agents) and a dialog to start one
//   #/replay/ID                replay of a run

/**
 * @typedef {object} Route
 * @property {'all' | 'thread' | 'run' | 'agents' | 'agent' | 'replay' | 'tools' | 'positions'} view
 * @property {string} id
 * @property {string} task
 * @property {import('./types.js').Filter} filter
 * @property {number} at  the seq of an event to scroll to and mark (a run's), or 0
 */

/** @param {string} [hash] @returns {Route} */
export function parse(hash = location.hash) {
  const [path, query = ''] = hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const q = new URLSearchParams(query);
  /** @type {import('./types.js').Filter} */
  const filter = {};
  for (const key of /** @type {const} */ (['type', 'agent', 'task', 'q'])) {
    const v = q.get(key);
    if (v) filter[key] = v;
  }
  const [view, id = '', sub, task = ''] = parts;
  switch (view) {
    case 'thread':
    case 'agent':
      return { view, id, task: '', filter, at: 0 };
    case 'run':
      return { view, id, task: sub === 'task' ? task : '', filter, at: Math.max(0, Number(q.get('at')) || 0) };
    case 'replay':
      return { view, id, task: sub === 'task' ? task : '', filter, at: 0 };
    case 'agents':
    case 'tools':
    case 'positions':
      return { view, id: '', task: '', filter, at: 0 };
    default:
      return { view: 'all', id: '', task: '', filter, at: 0 };
  }
}

/** @param {import('./types.js').Filter} filter */
function query(filter) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filter)) if (v) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

export const href = {
  /** @param {import('./types.js').Filter} [filter] */
  all: (filter = {}) => `#/${query(filter)}`,
  /** @param {string} id */
  thread: (id) => `#/thread/${encodeURIComponent(id)}`,
  /** @param {string} id @param {string} [task] */
  run: (id, task) => `#/run/${encodeURIComponent(id)}${task ? `/task/${encodeURIComponent(task)}` : ''}`,
  /** A run scrolled to one of its events. @param {string} id @param {number} seq */
  runAt: (id, seq) => `#/run/${encodeURIComponent(id)}?at=${seq}`,
  agents: () => '#/agents',
  tools: () => '#/tools',
  positions: () => '#/positions',
  /** @param {string} id */
  agent: (id) => `#/agent/${encodeURIComponent(id)}`,
  /** @param {string} id @param {string} [task] */
  replay: (id, task) => `#/replay/${encodeURIComponent(id)}${task ? `/task/${encodeURIComponent(task)}` : ''}`,
};

/**
 * The same route with another filter (for the filter bar, which keeps the address in step).
 * @param {Route} route
 * @param {import('./types.js').Filter} filter
 */
export function withFilter(route, filter) {
  const base = {
    all: '#/',
    thread: href.thread(route.id),
    run: href.run(route.id, route.task),
    agents: href.agents(),
    tools: href.tools(),
    positions: href.positions(),
    agent: href.agent(route.id),
    replay: href.replay(route.id, route.task),
  }[route.view];
  return base + query(filter);
}
