// The HTTP API client: JSON requests, NDJSON replay, the pages of the lists, the stream URL, and the
// bearer token, asked for only when the daemon answers 401 and then kept in localStorage and sent on
// every request.

import { settings } from './util.js';

/** @typedef {import('./types.js').ClutchEvent} ClutchEvent */

/** An error answer of the API: `{"error": {code, message, field?, retryable, hint?, problems?}}`. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {{code?: string, message?: string, field?: string, hint?: string, retryable?: boolean, problems?: {path: string, message: string}[]}} body
   */
  constructor(status, body) {
    super(body.message || `HTTP ${status}`);
    this.status = status;
    this.code = body.code || `HTTP_${status}`;
    this.field = body.field;
    this.hint = body.hint;
    this.problems = body.problems || [];
  }

  /** One line for a person: the message, each problem with its path, and the hint. */
  describe() {
    const problems = this.problems.map((p) => `${p.path}: ${p.message}`);
    return [this.message, ...problems, this.hint].filter(Boolean).join(' · ');
  }
}

/**
 * What a list or search selects (`ListInput`, the query string of `GET /v1/runs`, `/v1/threads`,
 * `/v1/tasks` and `/v1/search`): each filter given must match; `cursor` is the previous page's `next`.
 * @typedef {object} ListQuery
 * @property {string} [q]           search only: the words to find
 * @property {string} [state]       runs: active, completed, failed or cancelled; tasks: a task state
 * @property {string} [agent]
 * @property {string} [capability]  tasks only
 * @property {string} [run]
 * @property {string} [workflow]
 * @property {string} [parent]      tasks only
 * @property {string} [thread]
 * @property {string} [task]        search only
 * @property {string} [kind]        runs only: chat, task, workflow or session
 * @property {string} [since]       an RFC 3339 time or an age (`15m`, `2h`, `7d`)
 * @property {string} [until]
 * @property {number} [limit]       1 to 200 (50 when absent)
 * @property {string} [cursor]
 */

/**
 * A page of a list (`GET /v1/runs`, `/v1/threads`, `/v1/tasks`, `/v1/search`): `next`, absent on the
 * last page, is the cursor of the one after; `as_of` the log position every page of it is read at.
 * @template T
 * @typedef {{items: T[], next?: string | null, as_of: number}} Page
 */

/** The query string of a list: the fields set. @param {ListQuery} query */
function listQuery(query) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export class Api {
  /** @param {string} [origin] */
  constructor(origin = location.origin) {
    this.origin = origin;
    /** @type {string | null} */
    this.token = settings.get('token', null);
    /**
     * Asks the person for a token; resolves to it, or to null if they decline. Set by the UI.
     * @type {(reason: string) => Promise<string | null>}
     */
    this.askToken = async () => null;
    /** @type {Promise<string | null> | null} */
    this.asking = null;
  }

  /** @param {string | null} token */
  setToken(token) {
    this.token = token || null;
    settings.set('token', this.token);
  }

  /**
   * A request; retried once with a new token after a 401. Throws `ApiError` for an error answer.
   * @param {string} path
   * @param {{method?: string, body?: unknown, signal?: AbortSignal}} [options]
   * @returns {Promise<Response>}
   */
  async fetch(path, options = {}) {
    for (let attempt = 0; ; attempt++) {
      /** @type {Record<string, string>} */
      const headers = { accept: 'application/json' };
      if (this.token) headers.authorization = `Bearer ${this.token}`;
      /** @type {RequestInit} */
      const init = { method: options.method || 'GET', headers, signal: options.signal };
      if (options.body !== undefined) {
        headers['content-type'] = 'application/json';
        init.body = JSON.stringify(options.body);
      }
      const response = await fetch(this.origin + path, init);
      if (response.ok) return response;
      const body = await response.json().catch(() => ({}));
      const error = new ApiError(response.status, body?.error || {});
      if (response.status === 401 && attempt === 0 && (await this.unauthorized(error.message))) continue;
      throw error;
    }
  }

  /**
   * Asks once for a token, however many requests were refused meanwhile.
   * @param {string} reason
   * @returns {Promise<boolean>} whether a token was given
   */
  async unauthorized(reason) {
    if (!this.asking) {
      this.asking = this.askToken(reason).finally(() => {
        this.asking = null;
      });
    }
    const token = await this.asking;
    if (token) this.setToken(token);
    return Boolean(token);
  }

  /** @param {string} path @param {{signal?: AbortSignal}} [options] */
  async json(path, options) {
    return (await this.fetch(path, options)).json();
  }

  /**
   * Appends a message (or an array of them); answers `{id, seq, duplicate}` (or `{results}`).
   * @param {unknown} message
   */
  async post(message) {
    return (await this.fetch('/v1/messages', { method: 'POST', body: message })).json();
  }

  /** @returns {Promise<{head_seq: number, version: string}>} */
  health() {
    return this.json('/healthz');
  }

  /**
   * One page of `GET /v1/events`.
   * @param {Record<string, string | number | undefined>} query
   * @param {AbortSignal} [signal]
   * @returns {Promise<{events: ClutchEvent[], next_after: number}>}
   */
  events(query, signal) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q.set(k, String(v));
    return this.json(`/v1/events?${q}`, { signal });
  }

  /**
   * A whole run as NDJSON, yielded in batches of parsed events as the chunks arrive.
   * @param {string} runId
   * @param {AbortSignal} [signal]
   * @returns {AsyncGenerator<ClutchEvent[]>}
   */
  async *replay(runId, signal) {
    const response = await this.fetch(`/v1/runs/${encodeURIComponent(runId)}/events`, { signal });
    if (!response.body) return;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let rest = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const lines = (rest + value).split('\n');
        rest = lines.pop() || '';
        yield lines.filter((l) => l).map((l) => JSON.parse(l));
      }
      if (rest.trim()) yield [JSON.parse(rest)];
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  /**
   * `GET /v1/runs`: a page of runs, newest activity first.
   * @param {ListQuery} [query]
   * @param {AbortSignal} [signal]
   * @returns {Promise<import('./api-types.js').RunSummaryPage>}
   */
  runs(query = {}, signal) {
    return this.json(`/v1/runs${listQuery(query)}`, { signal });
  }

  /**
   * `GET /v1/threads`: a page of threads, newest activity first.
   * @param {ListQuery} [query]
   * @param {AbortSignal} [signal]
   * @returns {Promise<import('./api-types.js').ThreadSummaryPage>}
   */
  threads(query = {}, signal) {
    return this.json(`/v1/threads${listQuery(query)}`, { signal });
  }

  /**
   * `GET /v1/tasks`: a page of tasks, newest activity first.
   * @param {ListQuery} [query]
   * @param {AbortSignal} [signal]
   * @returns {Promise<import('./api-types.js').TaskListingPage>}
   */
  tasks(query = {}, signal) {
    return this.json(`/v1/tasks${listQuery(query)}`, { signal });
  }

  /**
   * `GET /v1/search`: a page of the events whose text has every word of `query.q`, best first.
   * @param {ListQuery & {q: string}} query
   * @param {AbortSignal} [signal]
   * @returns {Promise<import('./api-types.js').SearchHitPage>}
   */
  search(query, signal) {
    return this.json(`/v1/search${listQuery(query)}`, { signal });
  }

  /** `GET /v1/agents`. @returns {Promise<import('./api-types.js').Agent[]>} */
  async agents() {
    /** @type {import('./api-types.js').Agents} */
    const answer = await this.json('/v1/agents');
    return answer.agents;
  }

  /**
   * The WebSocket URL of the live stream from `after`; browsers cannot set headers on a WebSocket, so
   * the token (if any) goes in the query.
   * @param {number} after
   */
  streamUrl(after) {
    const url = new URL('/v1/stream', this.origin);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('after', String(after));
    if (this.token) url.searchParams.set('access_token', this.token);
    return url.href;
  }
}

/**
 * Pages of a list fetched one after another as the reader asks for more: each from the previous
 * page's cursor, one request at a time, the items kept in the order the daemon gave them.
 * @template T
 */
export class Pager {
  /**
   * @param {(cursor: string | undefined, signal: AbortSignal) => Promise<Page<T>>} fetchPage
   * @param {() => void} onChange  called when a request starts, and when it ends (items or error)
   */
  constructor(fetchPage, onChange) {
    this.fetchPage = fetchPage;
    this.onChange = onChange;
    /** @type {T[]} */
    this.items = [];
    /** @type {string | undefined} the cursor of the next page */
    this.next = undefined;
    /** The first page has come. */
    this.started = false;
    /** The last page has come. */
    this.done = false;
    this.loading = false;
    /** @type {Error | null} why the last request failed */
    this.error = null;
    /** The log position the pages are read at (the first page's). */
    this.asOf = 0;
    /** @type {AbortController | null} */
    this.request = null;
  }

  /** Fetches the next page (the first, when none has come); nothing while one is on its way or after the last. */
  async more() {
    if (this.loading || this.done) return;
    const request = new AbortController();
    this.request = request;
    this.loading = true;
    this.error = null;
    this.onChange();
    try {
      const page = await this.fetchPage(this.started ? this.next : undefined, request.signal);
      if (this.request !== request) return;
      if (!this.started) this.asOf = page.as_of;
      this.started = true;
      this.items.push(...page.items);
      this.next = page.next || undefined;
      this.done = !this.next;
    } catch (e) {
      if (this.request !== request) return;
      this.error = e instanceof Error ? e : new Error(String(e));
    } finally {
      if (this.request === request) {
        this.request = null;
        this.loading = false;
        this.onChange();
      }
    }
  }

  /** Forgets every page and drops the request on its way; `more()` starts again from the first page. */
  reset() {
    this.request?.abort();
    this.request = null;
    this.items = [];
    this.next = undefined;
    this.started = false;
    this.done = false;
    this.loading = false;
    this.error = null;
    this.asOf = 0;
  }
}
