// A fake LLM provider for the browser tests and screenshots: a local HTTP server speaking Anthropic's
// Messages API (`POST /v1/messages`, streamed as server-sent events when the request asks, as the
// runtime's provider does), each answer chosen by a script from the request and the count so far.
// What it streams is the real wire format (the runtime's own fake, `clutch_runtime::fake`, is checked
// against the official SDK; this one follows the same frames), so the daemon's LLM agents work
// against it as against the real API.

import http from 'node:http';

/**
 * One answer: text, optionally followed by one tool use; `drip` pauses between streamed pieces (a
 * slow generation, so streamed text shows before the call ends).
 * @typedef {{text: string, tool?: {name: string, input: Record<string, unknown>}, drip?: number}} Reply
 */

/** @param {string} name @param {unknown} data */
const frame = (name, data) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

/** @param {string} text @param {number} size */
function pieces(text, size) {
  const out = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/**
 * Starts the fake on a free loopback port.
 * @param {(body: any, n: number) => Reply} script the answer to the n-th request (1-based)
 * @returns {Promise<{url: string, received: any[], close: () => Promise<void>}>}
 */
export async function startFakeLlm(script) {
  /** @type {any[]} */
  const received = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (raw += c));
    req.on('end', async () => {
      if (req.method !== 'POST' || !req.url?.endsWith('/v1/messages')) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: req.url } }));
        return;
      }
      const body = JSON.parse(raw);
      received.push(body);
      const n = received.length;
      const reply = script(body, n);
      const model = String(body.model);
      const input = Math.ceil(raw.length / 4);
      const output = Math.ceil((reply.text.length + JSON.stringify(reply.tool?.input ?? '').length) / 4);
      const stop = reply.tool ? 'tool_use' : 'end_turn';
      if (!body.stream) {
        const content = [...(reply.text ? [{ type: 'text', text: reply.text }] : []), ...(reply.tool ? [{ type: 'tool_use', id: `toolu_${n}`, name: reply.tool.name, input: reply.tool.input }] : [])];
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({ id: `msg_${n}`, type: 'message', role: 'assistant', model, content, stop_reason: stop, stop_sequence: null, usage: { input_tokens: input, output_tokens: output, cache_creation_input_tokens: 0, cache_read_input_tokens: 12 } }),
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      /** @param {string} s */
      const write = (s) => new Promise((r) => res.write(s, () => r(undefined)));
      await write(frame('message_start', { type: 'message_start', message: { id: `msg_${n}`, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: input, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 12 } } }));
      let index = 0;
      if (reply.text) {
        await write(frame('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }));
        for (const piece of pieces(reply.text, 12)) {
          await write(frame('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } }));
          if (reply.drip) await new Promise((r) => setTimeout(r, reply.drip));
        }
        await write(frame('content_block_stop', { type: 'content_block_stop', index }));
        index++;
      }
      if (reply.tool) {
        await write(frame('content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: `toolu_${n}`, name: reply.tool.name, input: {} } }));
        for (const part of pieces(JSON.stringify(reply.tool.input), 9)) await write(frame('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part } }));
        await write(frame('content_block_stop', { type: 'content_block_stop', index }));
      }
      await write(frame('message_delta', { type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: output } }));
      await write(frame('message_stop', { type: 'message_stop' }));
      res.end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', () => r(undefined)));
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${address.port}`,
    received,
    close: () => new Promise((r) => server.close(() => r(undefined))),
  };
}

/**
 * clutch.toml giving the daemon the fake as provider `fake` (model `fake-model-1`, priced) and one
 * LLM agent, `agent:summariser`, that does `skill:summarise`; its key comes from `CLUTCH_TEST_LLM_KEY`.
 * @param {string} url the fake's
 */
export function llmConfig(url) {
  return [
    '[[providers]]',
    'name = "fake"',
    'kind = "anthropic"',
    `base_url = "${url}"`,
    'api_key_env = "CLUTCH_TEST_LLM_KEY"',
    'model = "fake-model-1"',
    'max_tokens = 400',
    'retry_base_ms = 50',
    '[providers.prices.fake-model-1]',
    'input = 3.0',
    'output = 15.0',
    '',
    '[[llm_agents]]',
    'name = "summariser"',
    'provider = "fake"',
    'system = "You summarise text in three sentences. Say what you are doing with emit before you answer."',
    'capabilities = ["skill:summarise"]',
    '',
  ].join('\n');
}
