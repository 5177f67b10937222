// The live stream: one WebSocket on `/v1/stream` carrying every event of the log in `seq` order. It
// remembers the last `seq` it handed on and, when the socket closes for any reason (a final frame, a
// network blip, a daemon restart), reconnects with `after=<last seq>`, so nothing is missed and
// nothing is seen twice. Far behind (at start, after a long outage), it first catches up with large
// pages of `GET /v1/events` from the same cursor. No polling: a closed socket is retried with
// backoff, nothing else is asked.

/** @typedef {import('./types.js').ClutchEvent} ClutchEvent */
/** @typedef {import('./types.js').EndFrame} EndFrame */
/** @typedef {'connecting' | 'catching-up' | 'live' | 'reconnecting'} Status */

const MAX_BACKOFF_MS = 5000;
/** Further behind than this, catch up with pages of `GET /v1/events` (bulk JSON) before the socket. */
const BULK_BEHIND = 500;
const PAGE = 1000;

export class LiveStream {
  /**
   * @param {import('./api.js').Api} api
   * @param {{
   *   onEvent: (event: ClutchEvent) => void,
   *   onStatus?: (status: Status, detail: string) => void,
   *   onLogReplaced?: (head: number) => number,
   * }} handlers `onLogReplaced` is called when the daemon's log is behind what was seen (a
   *   different data directory): it must forget what it holds and answer the cursor to go on from.
   */
  constructor(api, handlers) {
    this.api = api;
    this.handlers = handlers;
    /** The seq of the last event handed on; the cursor to resume from. */
    this.lastSeq = 0;
    /** @type {Status} */
    this.status = 'connecting';
    /** The head of the log when the current connection opened; below it we are catching up. */
    this.headAtConnect = 0;
    /** @type {WebSocket | null} */
    this.socket = null;
    this.failures = 0;
    this.stopped = false;
    /** Counters for the curious (and the tests). */
    this.stats = { connects: 0, duplicatesDropped: 0, gaps: 0, endFrames: /** @type {EndFrame[]} */ ([]) };
    /** A gap seen twice at the same place is accepted rather than chased forever. */
    this.gapAt = -1;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.retryTimer = undefined;
  }

  /** Connects, starting after `after`. @param {number} after */
  start(after) {
    this.lastSeq = after;
    this.stopped = false;
    void this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.socket?.close(1000, 'stopped');
    this.socket = null;
  }

  /** Drops the socket and reconnects at once (used after a token change). */
  restart() {
    this.failures = 0;
    this.socket?.close(4001, 'restart');
  }

  /** @param {Status} status @param {string} [detail] */
  setStatus(status, detail = '') {
    this.status = status;
    this.handlers.onStatus?.(status, detail);
  }

  async connect() {
    if (this.stopped) return;
    this.setStatus(this.stats.connects ? 'reconnecting' : 'connecting', `after ${this.lastSeq}`);
    let head;
    try {
      head = (await this.api.health()).head_seq;
    } catch {
      this.retry();
      return;
    }
    if (head < this.lastSeq && this.handlers.onLogReplaced) {
      this.lastSeq = this.handlers.onLogReplaced(head);
    }
    if (this.failures >= 2) {
      // Sockets keep failing while the daemon answers: perhaps it wants a token. A plain request
      // tells (and asks for one on 401).
      try {
        await this.api.events({ limit: 1 });
      } catch {
        // Reported by the request itself; keep retrying.
      }
    }
    if (this.stopped) return;
    this.headAtConnect = head;
    if (head - this.lastSeq > BULK_BEHIND) {
      // Thousands of events come faster as a few large pages than as one frame each.
      this.setStatus('catching-up', this.describe());
      try {
        while (!this.stopped && head - this.lastSeq > BULK_BEHIND) {
          const page = await this.api.events({ after: this.lastSeq, limit: PAGE });
          if (!page.events.length) break;
          for (const e of page.events) this.accept(e);
          this.setStatus('catching-up', this.describe());
        }
      } catch {
        this.retry();
        return;
      }
      if (this.stopped) return;
    }
    const socket = new WebSocket(this.api.streamUrl(this.lastSeq));
    this.socket = socket;
    let opened = false;
    socket.onopen = () => {
      opened = true;
      this.stats.connects++;
      this.setStatus(this.lastSeq < this.headAtConnect ? 'catching-up' : 'live', this.describe());
    };
    socket.onmessage = (m) => this.receive(typeof m.data === 'string' ? m.data : '');
    socket.onclose = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      if (opened) this.failures = 0;
      this.retry();
    };
  }

  retry() {
    if (this.stopped) return;
    const delay = Math.min(MAX_BACKOFF_MS, 200 * 2 ** this.failures) * (0.75 + Math.random() / 2);
    this.failures++;
    this.setStatus('reconnecting', `after ${this.lastSeq}`);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void this.connect(), delay);
  }

  describe() {
    return this.status === 'catching-up' ? `${this.lastSeq} of ${this.headAtConnect}` : `seq ${this.lastSeq}`;
  }

  /** @param {string} text */
  receive(text) {
    /** @type {any} */
    let value;
    try {
      value = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof value.frame === 'string') {
      // The daemon ends the stream (lagged, shutdown, error); it closes next and we resume.
      this.stats.endFrames.push(value);
      return;
    }
    const event = /** @type {ClutchEvent} */ (value);
    if (typeof event.seq !== 'number') return;
    if (!this.accept(event)) {
      // The log's seq is gap-free, so a hole means frames were lost: resume from the cursor.
      this.socket?.close(4000, 'gap');
      return;
    }
    if (this.status === 'catching-up' && this.lastSeq >= this.headAtConnect) this.setStatus('live', this.describe());
  }

  /**
   * Hands on the event after the cursor; drops repeats. Answers false for a gap (seen twice at the
   * same place, it is accepted rather than chased forever).
   * @param {ClutchEvent} event
   */
  accept(event) {
    if (event.seq <= this.lastSeq) {
      this.stats.duplicatesDropped++;
      return true;
    }
    if (event.seq > this.lastSeq + 1 && this.gapAt !== this.lastSeq) {
      this.stats.gaps++;
      this.gapAt = this.lastSeq;
      return false;
    }
    this.lastSeq = event.seq;
    this.handlers.onEvent(event);
    return true;
  }
}
