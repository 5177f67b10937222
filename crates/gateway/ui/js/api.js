// The HTTP API client: JSON requests, NDJSON replay, the stream URL, and the bearer token, asked for
// only when the daemon answers 401 and then kept in localStorage and sent on every request.

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
