// Positions: the teams of agents the daemon runs (`GET /v1/positions`), each with its pattern, roles
// and workflow, and a "Start" dialog that invokes one (`POST /v1/positions/{name}/invoke`) and opens
// its session (the run view, whose session panel shows the team, the phase and the outcome live).
// The session panel itself is here too: what a run's `clutch.session.v1` records and messages say,
// and the turns given to the person using the page (`user:NAME`), each with a box to answer it
// (`POST /v1/tasks/{id}/reply`).

import { h, settings, nameOf, clear, append, SETTING_EVENT, timeEl } from '../util.js';
import { href } from '../router.js';
import { stateChip } from '../render/events.js';
import { isTerminal } from '../store.js';
import { ApiError } from '../api.js';

/** @typedef {import('../types.js').ClutchEvent} ClutchEvent */

/**
 * A position as the daemon lists it.
 * @typedef {{name: string, title: string, pattern: string, description?: string | null, overview?: string,
 *   roles: {name: string, personality: string, responsibilities: string[]}[],
 *   workflow: {phase: string, description: string}[], protocol: {type: string, description: string}[]}} Position
 */

/** The phases a session ends in. */
const FINAL_PHASES = ['COMPLETED', 'ERROR', 'TIMEOUT'];

export class PositionsView {
  /** @param {import('../api.js').Api} api */
  constructor(api) {
    this.api = api;
    this.list = h('div', { class: 'positions' });
    this.note = h('p', { class: 'muted view-sub' }, 'Loading…');
    /** The sessions of positions the daemon runs (`GET /v1/sessions`): running ones first. */
    this.sessions = h('section', { class: 'sessions-list', 'aria-label': 'sessions' });
    this.el = h(
      'div',
      { class: 'positions-view' },
      h('header', { class: 'view-head' }, h('div', null, h('h1', { class: 'view-title' }, 'Positions'), this.note)),
      this.sessions,
      this.list,
    );
    void this.load();
  }

  destroy() {}

  async load() {
    try {
      const [answer, sessions] = await Promise.all([
        /** @type {Promise<{positions: Position[]}>} */ (this.api.json('/v1/positions')),
        /** @type {Promise<import('../api-types.js').Sessions>} */ (this.api.json('/v1/sessions')),
      ]);
      this.drawSessions(sessions.sessions);
      this.draw(answer.positions);
    } catch (e) {
      this.note.textContent = `Could not load the positions: ${/** @type {Error} */ (e).message}`;
    }
  }

  /**
   * The sessions, running ones first (newest first within each), each linked to its run.
   * @param {import('../api-types.js').Session[]} sessions
   */
  drawSessions(sessions) {
    const ended = (/** @type {import('../api-types.js').Session} */ s) => FINAL_PHASES.includes(s.status);
    const running = sessions.filter((s) => !ended(s));
    const shown = [...running, ...sessions.filter(ended)].slice(0, 20);
    clear(this.sessions);
    append(this.sessions, [
      h('h2', { class: 'pane-title' }, running.length ? `${running.length} running session${running.length === 1 ? '' : 's'}` : 'No session running'),
      shown.length > 0 &&
        h(
          'table',
          null,
          h('thead', null, h('tr', null, ['session', 'phase', 'step', 'team', 'messages', 'started'].map((c) => h('th', null, c)))),
          h(
            'tbody',
            null,
            shown.map((s) =>
              h(
                'tr',
                { 'data-session': s.id, 'data-phase': s.status },
                h('td', null, h('a', { href: href.run(s.id) }, s.position)),
                h('td', null, h('span', { class: `phase phase-${s.status.toLowerCase()}` }, s.status)),
                h('td', { class: 'muted' }, s.step || ''),
                h('td', null, s.agents.map((a) => `${a.role} ${nameOf(a.id)}`).join(', ')),
                h('td', { class: 'num' }, String(s.message_count)),
                h('td', null, timeEl(s.started_at)),
              ),
            ),
          ),
        ),
    ]);
  }

  /** @param {Position[]} positions */
  draw(positions) {
    this.note.textContent = positions.length
      ? `${positions.length} teams of agents, each following a collaboration pattern. Start one on an input; its session opens live.`
      : 'No positions: the daemon has not announced any yet.';
    this.list.replaceChildren(
      ...positions.map((p) =>
        h(
          'article',
          { class: 'position-card', 'data-position': p.name },
          h('h2', null, p.title || p.name, !samePattern(`${p.title} ${p.name}`, p.pattern) && [' ', h('span', { class: 'chip' }, p.pattern)]),
          p.description && h('p', null, p.description),
          h('p', { class: 'muted small' }, 'Roles: ', p.roles.map((r) => r.name).join(', '), ' · phases: ', p.workflow.map((w) => w.phase).join(' → ')),
          h('button', { type: 'button', class: 'primary start', onclick: () => this.open(p) }, 'Start'),
        ),
      ),
    );
  }

  /** The "Start a position" dialog. @param {Position} p */
  open(p) {
    const input = h('textarea', { name: 'input', rows: 5, required: true, 'aria-label': 'input', placeholder: 'What should the team work on?' });
    const as = h('input', { name: 'as', value: settings.get('user', '') || 'web', 'aria-label': 'as user', size: 12 });
    /** @type {[string, HTMLInputElement][]} */
    const roles = p.roles.map((r) => [r.name, /** @type {HTMLInputElement} */ (h('input', { name: `role-${r.name}`, 'aria-label': `${r.name} played by`, placeholder: 'an LLM agent (or agent:ID, user:NAME, skill:NAME)' }))]);
    const error = h('p', { class: 'error', role: 'alert', hidden: true });
    const dialog = /** @type {HTMLDialogElement} */ (
      h(
        'dialog',
        { class: 'position-dialog', 'aria-labelledby': 'position-title' },
        h(
          'form',
          { method: 'dialog' },
          h('h2', { id: 'position-title' }, `Start ${p.title || p.name}`),
          p.overview && h('p', { class: 'muted small' }, p.overview),
          h('label', { class: 'block' }, 'Input ', input),
          h('fieldset', null, h('legend', null, 'Who plays each role'), roles.map(([name, el]) => h('label', { class: 'role' }, h('span', null, name), el))),
          h('label', null, 'as user:', as),
          error,
          h(
            'div',
            { class: 'dialog-buttons' },
            h('button', { value: 'cancel', type: 'submit', formnovalidate: true }, 'Cancel'),
            h('button', { value: 'start', type: 'submit', class: 'primary' }, 'Start'),
          ),
        ),
      )
    );
    dialog.addEventListener('submit', (e) => {
      const submitter = /** @type {SubmitEvent} */ (e).submitter;
      if (submitter?.getAttribute('value') !== 'start') return;
      e.preventDefault();
      void this.start(p, dialog, input.value, as.value.trim(), roles, error);
    });
    dialog.addEventListener('close', () => dialog.remove());
    document.body.appendChild(dialog);
    dialog.showModal();
    input.focus();
  }

  /**
   * @param {Position} p
   * @param {HTMLDialogElement} dialog
   * @param {string} text
   * @param {string} user
   * @param {[string, HTMLInputElement][]} roles
   * @param {HTMLElement} error
   */
  async start(p, dialog, text, user, roles, error) {
    /** @type {Record<string, string>} */
    const agents = {};
    for (const [name, el] of roles) if (el.value.trim()) agents[name] = el.value.trim();
    if (user) settings.set('user', user);
    try {
      const body = { input: text, agents, agent_id: `user:${user || 'web'}` };
      const invoked = await (await this.api.fetch(`/v1/positions/${encodeURIComponent(p.name)}/invoke`, { method: 'POST', body })).json();
      dialog.close();
      location.hash = href.run(invoked.session_id);
    } catch (e) {
      const err = /** @type {{message: string, field?: string}} */ (e);
      error.textContent = err.field ? `${err.field}: ${err.message}` : err.message;
      error.hidden = false;
    }
  }
}

/**
 * Whether a position's names already say its pattern (then a chip of the pattern says it twice).
 * @param {string} names
 * @param {string} pattern
 */
function samePattern(names, pattern) {
  return !pattern || names.toLowerCase().split(/[^a-z0-9]+/).includes(pattern.toLowerCase());
}

/**
 * A session as its run's events tell it: the last record, the messages between members, the task
 * that stands for it.
 * @param {ClutchEvent[]} events the run's, in seq order
 */
export function sessionOf(events) {
  /** @type {ClutchEvent | undefined} */
  let last;
  let messages = 0;
  for (const e of events) {
    if (e.payload_type === 'clutch.session.v1') last = e;
    else if (e.payload_type === 'clutch.session.message.v1') messages++;
  }
  if (!last) return null;
  const p = last.payload;
  return {
    position: String(p.position || ''),
    pattern: String(p.pattern || ''),
    phase: String(p.phase || ''),
    step: p.step ? String(p.step) : '',
    note: p.note ? String(p.note) : '',
    /** @type {{agent_id: string, role: string}[]} */
    members: Array.isArray(p.members) ? p.members : [],
    /** @type {string[]} */
    failed: Array.isArray(p.failed) ? p.failed : [],
    root: last.task_id,
    messages,
  };
}

/**
 * The session panel of a run view: position, phase, team, message count, outcome, and the turns
 * waiting for the page's person; live. In a run that is no session, only those turns, when there are any.
 */
export class SessionPanel {
  /**
   * @param {import('../store.js').Store} store
   * @param {string} runId
   * @param {import('../api.js').Api} [api] to answer turns with (none: the panel only shows)
   */
  constructor(store, runId, api) {
    this.store = store;
    this.runId = runId;
    this.api = api;
    /** @type {Map<string, HTMLFormElement>} a form per open turn, kept across refreshes so drafts stay */
    this.turns = new Map();
    this.el = h('section', { class: 'session-panel', 'aria-label': 'session', hidden: true });
    /** The person set (or changed) their name: the turns given to them show at once. @param {Event} e */
    this.onSetting = (e) => {
      if (/** @type {CustomEvent} */ (e).detail?.key === 'user') this.refresh();
    };
    window.addEventListener(SETTING_EVENT, this.onSetting);
  }

  destroy() {
    window.removeEventListener(SETTING_EVENT, this.onSetting);
  }

  /** The forms of the turns given to the page's person that have not ended, oldest first. */
  openTurns() {
    const me = settings.get('user', '');
    const mine = this.api && me ? this.store.tasksOf(this.runId).filter((t) => t.assignee === `user:${me}` && !isTerminal(t.state)) : [];
    for (const id of [...this.turns.keys()]) if (!mine.some((t) => t.task_id === id)) this.turns.delete(id);
    return mine.map((t) => {
      let form = this.turns.get(t.task_id);
      if (!form) this.turns.set(t.task_id, (form = this.turnForm(t.task_id, `user:${me}`, goalOf(t.events), schemaOf(t.events))));
      return form;
    });
  }

  /**
   * A turn's form: what is asked, a box for the answer (a field per part of the answer when the turn
   * asks for a structured one: a choice for a verdict or a vote), Answer and Decline.
   * @param {string} taskId @param {string} who @param {string} goal @param {Schema | null} schema
   */
  turnForm(taskId, who, goal, schema) {
    const fields = schema ? fieldsOf(schema) : null;
    const text = h('textarea', {
      name: 'answer',
      rows: 3,
      'aria-label': fields ? 'notes' : 'your answer',
      placeholder: fields ? 'Notes (optional)' : schema ? `Your answer, as JSON: ${JSON.stringify(schema)}` : 'Your answer',
    });
    const status = h('p', { class: 'turn-status', role: 'status', 'aria-live': 'polite' });
    /** @param {Record<string, unknown>} body */
    const reply = async (body) => {
      if (!this.api) return;
      status.textContent = 'Sending…';
      status.classList.remove('error');
      try {
        await this.api.fetch(`/v1/tasks/${encodeURIComponent(taskId)}/reply`, { method: 'POST', body: { agent_id: who, ...body } });
        status.textContent = 'Sent.';
      } catch (e) {
        status.textContent = e instanceof ApiError ? `Not sent: ${e.describe()}` : `Not sent: ${String(e)}`;
        status.classList.add('error');
      }
    };
    const answer = () => {
      const value = text.value.trim();
      if (fields) {
        const structured = /** @type {Record<string, unknown>} */ ({});
        for (const f of fields) {
          const v = f.read();
          if (v === undefined && f.required) {
            status.textContent = `Choose ${f.name} first.`;
            status.classList.add('error');
            return;
          }
          if (v !== undefined) structured[f.name] = v;
        }
        void reply({ status: 'completed', text: value || JSON.stringify(structured), result: { structured } });
        return;
      }
      if (!value) {
        status.textContent = 'Write an answer first.';
        status.classList.add('error');
        return;
      }
      void reply({ status: 'completed', text: value });
    };
    const decline = () => void reply({ status: 'failed', error: `declined by ${who}` });
    return /** @type {HTMLFormElement} */ (
      h(
        'form',
        { class: 'turn', 'data-task': taskId, 'aria-label': 'your turn', onsubmit: (/** @type {Event} */ e) => { e.preventDefault(); answer(); } },
        h('p', { class: 'turn-goal' }, h('strong', null, 'Your turn: '), goal),
        fields && fields.map((f) => h('label', { class: 'turn-field' }, h('span', null, f.name), f.el)),
        text,
        h('div', { class: 'turn-actions' }, h('button', { type: 'submit', class: 'primary' }, 'Answer'), h('button', { type: 'button', class: 'decline', onclick: decline }, 'Decline')),
        status,
      )
    );
  }

  refresh() {
    const events = this.store.runs.get(this.runId)?.events || [];
    const s = sessionOf(events);
    if (!s) {
      // Not a positions' session, but an agent may still have asked the page's person something (a
      // LangGraph interrupt, a question through the client's `Task.ask`): the same forms answer it.
      const turns = this.openTurns();
      this.el.hidden = turns.length === 0;
      clear(this.el);
      if (turns.length) append(this.el, [h('div', { class: 'session-head' }, h('strong', null, 'Asked of you')), turns]);
      return;
    }
    this.el.hidden = false;
    const root = this.store.tasks.get(s.root);
    const outcome = root?.outcome;
    const finalPhase = FINAL_PHASES.includes(s.phase);
    this.el.dataset.phase = s.phase;
    clear(this.el);
    append(this.el, [
      h(
        'div',
        { class: 'session-head' },
        h('strong', null, s.position),
        // The pattern, unless the position is named for it (a `relay` position of the relay pattern).
        !samePattern(s.position, s.pattern) && h('span', { class: 'chip' }, s.pattern),
        h('span', { class: `phase phase-${s.phase.toLowerCase()}` }, s.phase),
        s.step && !finalPhase && h('span', { class: 'step muted' }, s.step),
        h('span', { class: 'muted count' }, `${s.messages} message${s.messages === 1 ? '' : 's'}`),
        root && stateChip(root.state),
      ),
      h(
        'ul',
        { class: 'team' },
        s.members.map((m) =>
          h(
            'li',
            { 'data-agent': m.agent_id, class: s.failed.includes(m.agent_id) ? 'failed' : '' },
            h('span', { class: 'role' }, m.role),
            ' ',
            h('a', { href: href.agent(m.agent_id) }, nameOf(m.agent_id)),
            s.failed.includes(m.agent_id) && h('span', { class: 'muted' }, ' (failed)'),
          ),
        ),
      ),
      s.note && h('p', { class: 'muted note' }, s.note),
      this.openTurns(),
      outcome?.type === 'task.result' && h('div', { class: 'session-outcome' }, outcome.payload.verdict && h('strong', null, `${outcome.payload.verdict} `), String(outcome.payload.text ?? '')),
      outcome?.type === 'task.error' && h('p', { class: 'error session-outcome' }, `${outcome.payload.code}: ${outcome.payload.message}`),
    ]);
  }
}

/**
 * A turn's `output_schema` (JSON Schema), as far as the form reads it.
 * @typedef {{type?: string, enum?: unknown[], minimum?: number, maximum?: number, items?: Schema,
 *   properties?: Record<string, Schema>, required?: string[], description?: string}} Schema
 */

/** The answer a task asks for, when structured: its request's `output_schema`. @param {ClutchEvent[]} events */
function schemaOf(events) {
  const schema = events.find((e) => e.type === 'task.request')?.payload.output_schema;
  return schema && typeof schema === 'object' && !Array.isArray(schema) ? /** @type {Schema} */ (schema) : null;
}

/**
 * A field per property of an object schema (a choice for an enum or a bounded integer, a box of
 * lines for a list of strings, a line for a string); `null` when some property is of another kind
 * (then the answer is typed as JSON).
 * @param {Schema} schema
 * @returns {{name: string, required: boolean, el: HTMLElement, read: () => unknown}[] | null}
 */
function fieldsOf(schema) {
  if (schema.type !== 'object' || !schema.properties) return null;
  const fields = [];
  for (const [name, p] of Object.entries(schema.properties)) {
    const required = (schema.required || []).includes(name);
    const [min, max] = [p.minimum ?? NaN, p.maximum ?? NaN];
    const choices = Array.isArray(p.enum)
      ? p.enum.map((v) => ({ label: String(v), value: v }))
      : p.type === 'integer' && max - min >= 0 && max - min <= 100
        ? Array.from({ length: max - min + 1 }, (_, i) => ({ label: String(min + i), value: min + i }))
        : null;
    if (choices) {
      const select = /** @type {HTMLSelectElement} */ (
        h('select', { name: `field-${name}`, title: p.description || name }, h('option', { value: '' }, '—'), choices.map((c, i) => h('option', { value: String(i) }, c.label)))
      );
      fields.push({ name, required, el: select, read: () => (select.value === '' ? undefined : choices[Number(select.value)].value) });
    } else if (p.type === 'array' && p.items?.type === 'string') {
      const box = /** @type {HTMLTextAreaElement} */ (h('textarea', { name: `field-${name}`, rows: 3, placeholder: `${p.description || name}: one per line` }));
      fields.push({ name, required, el: box, read: () => box.value.split('\n').map((l) => l.trim()).filter(Boolean) });
    } else if (p.type === 'string') {
      const line = /** @type {HTMLInputElement} */ (h('input', { name: `field-${name}`, placeholder: p.description || name }));
      fields.push({ name, required, el: line, read: () => line.value.trim() || undefined });
    } else {
      return null;
    }
  }
  // The choices (a verdict, a vote) first: they are the answer; the rest explains it.
  return [...fields.filter((f) => f.el.tagName === 'SELECT'), ...fields.filter((f) => f.el.tagName !== 'SELECT')];
}

/** What a task asks: its first request's goal. @param {ClutchEvent[]} events the task's */
function goalOf(events) {
  const request = events.find((e) => e.type === 'task.request');
  return String(request?.payload.goal ?? '');
}
