// The composer: a person posts a chat message into the thread in view, or asks for work with a
// `task.request` (with `requires`) sent to the orchestrator, as `user:NAME`.

import { h, newId, settings } from '../util.js';
import { ORCHESTRATOR } from '../store.js';
import { ApiError } from '../api.js';

/** @typedef {{thread_id: string, run_id: string, task_id?: string}} Context */

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const CAPABILITY = /^(skill|tool|mcp):[A-Za-z0-9][A-Za-z0-9._@^~<>=*-]*$/;

export class Composer {
  /**
   * @param {import('../api.js').Api} api
   * @param {() => Context} context where a message goes (asked at each send)
   */
  constructor(api, context) {
    this.api = api;
    this.context = context;
    this.user = settings.get('user', '');
    this.mode = 'chat';
    this.text = h('textarea', { name: 'text', rows: 2, placeholder: 'Message the thread  (Enter sends, Shift+Enter for a new line)', 'aria-label': 'message' });
    this.requires = h('input', { name: 'requires', type: 'text', placeholder: 'requires, e.g. skill:research tool:web', 'aria-label': 'requires' });
    this.to = h('input', { name: 'to', type: 'text', value: ORCHESTRATOR, 'aria-label': 'send to', size: 18 });
    this.userInput = h('input', { name: 'user', type: 'text', value: this.user, placeholder: 'your name', 'aria-label': 'your name', size: 12, autocomplete: 'nickname' });
    this.status = h('p', { class: 'composer-status', role: 'status', 'aria-live': 'polite' });
    this.sendButton = h('button', { type: 'submit', class: 'primary' }, 'Send');
    const modeChat = h('input', { type: 'radio', name: 'mode', value: 'chat', checked: true });
    const modeTask = h('input', { type: 'radio', name: 'mode', value: 'task' });
    this.taskFields = h('div', { class: 'task-fields', hidden: true }, h('label', null, 'to ', this.to), h('label', { class: 'grow' }, this.requires));
    this.el = h(
      'form',
      { class: 'composer', 'aria-label': 'composer', onsubmit: (/** @type {Event} */ e) => { e.preventDefault(); void this.send(); } },
      h(
        'div',
        { class: 'composer-top' },
        h('fieldset', { class: 'modes' }, h('legend', { class: 'sr-only' }, 'post a'), h('label', null, modeChat, ' Message'), h('label', null, modeTask, ' Task request')),
        this.taskFields,
        h('label', { class: 'as' }, 'as user:', this.userInput),
      ),
      h('div', { class: 'composer-main' }, this.text, this.sendButton),
      this.status,
    );
    for (const radio of [modeChat, modeTask]) radio.addEventListener('change', () => this.setMode(radio.value));
    this.text.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        void this.send();
      }
    });
    this.userInput.addEventListener('change', () => {
      this.user = this.userInput.value.trim();
      settings.set('user', this.user);
    });
  }

  /** @param {string} mode */
  setMode(mode) {
    this.mode = mode;
    this.taskFields.hidden = mode !== 'task';
    this.text.placeholder = mode === 'task' ? 'What should be done?  (Enter sends)' : 'Message the thread  (Enter sends, Shift+Enter for a new line)';
  }

  focus() {
    this.text.focus();
  }

  /** @param {string} text @param {boolean} [error] */
  say(text, error = false) {
    this.status.textContent = text;
    this.status.classList.toggle('error', error);
  }

  async send() {
    const text = this.text.value.trim();
    if (!text) return;
    const user = this.userInput.value.trim();
    if (!NAME.test(user)) {
      this.say('Set your name first (letters, digits, . _ -): messages are posted as user:NAME.', true);
      this.userInput.focus();
      return;
    }
    this.user = user;
    settings.set('user', user);
    const ctx = this.context();
    /** @type {Record<string, any>} */
    let message;
    if (this.mode === 'task') {
      const requires = this.requires.value.split(/[\s,]+/).filter(Boolean);
      const bad = requires.find((r) => !CAPABILITY.test(r));
      if (bad) {
        this.say(`"${bad}" is not a capability: write skill:NAME, tool:NAME or mcp:NAME.`, true);
        this.requires.focus();
        return;
      }
      message = {
        type: 'task.request',
        thread_id: ctx.thread_id,
        run_id: ctx.run_id,
        task_id: newId('task'),
        ...(ctx.task_id ? { parent_task_id: ctx.task_id } : {}),
        from: { agent_id: `user:${user}` },
        to: [{ agent_id: this.to.value.trim() || ORCHESTRATOR }],
        payload: { goal: text },
        ...(requires.length ? { requires } : {}),
      };
    } else {
      message = {
        type: 'chat.message',
        thread_id: ctx.thread_id,
        run_id: ctx.run_id,
        task_id: ctx.task_id || newId('task'),
        from: { agent_id: `user:${user}` },
        to: [],
        payload: { text },
      };
    }
    message.id = newId('msg');
    this.sendButton.disabled = true;
    this.say('Sending…');
    try {
      const ack = await this.api.post(message);
      this.text.value = '';
      this.say(`Posted as seq ${ack.seq}.`);
    } catch (e) {
      this.say(e instanceof ApiError ? `Not posted: ${e.describe()}` : `Not posted: ${String(e)}`, true);
    } finally {
      this.sendButton.disabled = false;
    }
  }
}
