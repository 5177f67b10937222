// The A2A face checked with the official JavaScript SDK (npm `@a2a-js/sdk`, a client nobody here
// wrote) against a running Clutch daemon. The SDK's `DefaultAgentCardResolver` reads the Agent Card;
// its `ClientFactory` picks, from the card's `supportedInterfaces`, its 1.0 JSON-RPC transport
// (`A2A-Version: 1.0`, `SendMessage`...) and then its 1.0 HTTP+JSON transport; a third client, built
// from the card with the v0.3 interface only and `legacyCompat` on, speaks 0.3 (`message/send`...).
// With the JSON-RPC client: a blocking send, a get, a list, a send answered at once then cancelled
// (and a second cancel, refused), an unknown task, a streamed send and a subscription to a task
// cancelled meanwhile. With the REST and 0.3 clients: a send, a get, an unknown task, a stream. With
// both 1.0 clients, a webhook for a task (push notification config: create, get, list, delete).
//
// Every answer is read by the SDK's own code (its `fromJSON` readers, its SSE parser); errors must
// come back as the SDK's own classes (`TaskNotFoundError` for -32001, `TaskNotCancelableError` for
// -32002, from `@a2a-js/sdk/errors`).
//
// Two agents work beside it over the HTTP API (fetch loops in this process): `agent:kim` (skill
// `skill:answer`) answers every task with "42: " + its goal; `agent:slow` (skill `skill:slow`) never
// answers, so its tasks stay open to be cancelled. A message names its skill in its metadata
// (`{"skill": "skill:answer"}`).
//
// Usage: node js_check.mjs --url http://127.0.0.1:PORT. Prints `NAME: ok` or `NAME: FAILED: why` per
// check (what went over the wire on stderr when one fails) and exits non-zero when any failed.

import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";

import { Role, TaskState } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { TaskNotCancelableError, TaskNotFoundError } from "@a2a-js/sdk/errors";

const KIM = "agent:kim";
const SLOW = "agent:slow";
const ANSWER = "skill:answer";
const SLOW_SKILL = "skill:slow";
const TIMEOUT_MS = 30_000;

const { values: args } = parseArgs({ options: { url: { type: "string" } } });
if (!args.url) {
  console.error("usage: js_check.mjs --url http://127.0.0.1:PORT");
  process.exit(2);
}
const base = args.url.replace(/\/+$/, "");

class CheckFailed extends Error {}

function expect(ok, why) {
  if (!ok) throw new CheckFailed(why);
}

const stateName = (state) => TaskState[state] ?? String(state);

// --- The agents, over the HTTP API ----------------------------------------------------------------

class Agents {
  constructor() {
    this.stopping = false;
    this.answered = new Set();
    this.loop = null;
  }

  async call(method, path, body) {
    const r = await fetch(base + path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: HTTP ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  async register() {
    for (const [agent, skill] of [[KIM, ANSWER], [SLOW, SLOW_SKILL]]) {
      await this.call("POST", "/v1/agents", {
        v: "clutch/0.1",
        agent_id: agent,
        capabilities: [{ id: skill, version: "1.0.0" }],
      });
    }
  }

  async heartbeat() {
    for (const agent of [KIM, SLOW]) await this.call("POST", `/v1/agents/${agent}/heartbeat`, {});
  }

  start() {
    this.loop = this.run();
  }

  async run() {
    let lastBeat = Date.now();
    while (!this.stopping) {
      try {
        if (Date.now() - lastBeat > 3000) {
          await this.heartbeat();
          lastBeat = Date.now();
        }
        const inbox = await this.call("GET", `/v1/inbox/${encodeURIComponent(KIM)}?wait_seconds=1`);
        for (const item of inbox?.tasks ?? []) {
          const taskId = item.task.task_id;
          if (this.answered.has(taskId)) continue;
          const reply = { agent_id: KIM, status: "completed", text: "42: " + item.request.goal };
          try {
            await this.call("POST", `/v1/tasks/${encodeURIComponent(taskId)}/reply`, reply);
            this.answered.add(taskId);
          } catch (e) {
            console.error(`worker: reply to ${taskId}: ${e.message}`);
          }
        }
      } catch (e) {
        if (!this.stopping) {
          console.error(`worker: ${e.message}`);
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    }
  }

  async stop() {
    this.stopping = true;
    await Promise.race([this.loop, new Promise((r) => setTimeout(r, 3000))]);
  }
}

// --- What went over the wire ------------------------------------------------------------------------

// The SDK's fetch, keeping each exchange (a clone of the answer, read only to show a failure).
const exchanges = [];
async function wireFetch(input, init = {}) {
  const request = new Request(input, init);
  const sent = init.body ?? null;
  const response = await fetch(input, init);
  exchanges.push({
    method: request.method,
    url: request.url,
    version: request.headers.get("a2a-version"),
    sent: typeof sent === "string" ? sent : sent === null ? null : "(body)",
    status: response.status,
    contentType: response.headers.get("content-type"),
    clone: response.clone(),
  });
  return response;
}

async function showWire(since) {
  for (const x of exchanges.slice(since)) {
    let got;
    try {
      got = await Promise.race([
        x.clone.text(),
        new Promise((r) => setTimeout(() => r("(still streaming)"), 1000)),
      ]);
    } catch (e) {
      got = `(unreadable: ${e.message})`;
    }
    console.error(
      `  ${x.method} ${x.url} A2A-Version=${x.version}\n    sent: ${x.sent}\n    got: HTTP ${x.status} ${x.contentType}\n      ${got}`,
    );
  }
}

// --- Checks ---------------------------------------------------------------------------------------

const results = [];
async function check(name, body) {
  const since = exchanges.length;
  try {
    await body();
    console.log(`${name}: ok`);
    results.push(true);
  } catch (e) {
    const why = e instanceof CheckFailed ? e.message : `${e?.constructor?.name}: ${e?.message}`;
    console.log(`${name}: FAILED: ${why}`);
    if (!(e instanceof CheckFailed) && e?.stack) console.error(e.stack);
    await showWire(since);
    results.push(false);
  }
}

function message(text, skill, taskId = "") {
  return {
    messageId: randomUUID(),
    contextId: "",
    taskId,
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
    metadata: { skill },
    extensions: [],
    referenceTaskIds: [],
  };
}

function sendRequest(text, skill, { returnImmediately = false } = {}) {
  return {
    tenant: "",
    message: message(text, skill),
    configuration: {
      acceptedOutputModes: ["text/plain"],
      taskPushNotificationConfig: undefined,
      returnImmediately,
    },
    metadata: undefined,
  };
}

const opts = () => ({ signal: AbortSignal.timeout(TIMEOUT_MS) });

function isTask(result) {
  return result && typeof result === "object" && "status" in result && "artifacts" in result;
}

function artifactText(task) {
  return (task.artifacts ?? [])
    .flatMap((a) => a.parts ?? [])
    .filter((p) => p.content?.$case === "text")
    .map((p) => p.content.value)
    .join("");
}

function expectCompleted(task, text, what) {
  expect(isTask(task), `${what}: not a Task: ${JSON.stringify(task)}`);
  const state = task.status?.state;
  expect(state === TaskState.TASK_STATE_COMPLETED, `${what}: state ${stateName(state)}, not completed`);
  const got = artifactText(task);
  expect(got === `42: ${text}`, `${what}: artifact text ${JSON.stringify(got)}, not ${JSON.stringify("42: " + text)}`);
}

async function expectError(cls, promise, what) {
  try {
    const r = await promise;
    throw new CheckFailed(`${what}: answered ${JSON.stringify(r)}, not ${cls.name}`);
  } catch (e) {
    if (e instanceof CheckFailed) throw e;
    expect(e instanceof cls, `${what}: ${e?.constructor?.name} (${e?.message}), not ${cls.name}`);
  }
}

// A stream's events as the SDK reads them: [{case, value}], with the last state seen.
async function drain(stream) {
  const events = [];
  for await (const event of stream) {
    expect(event?.payload, `an event without a payload: ${JSON.stringify(event)}`);
    events.push({ case: event.payload.$case, value: event.payload.value });
  }
  return events;
}

function lastState(events) {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    if (e.case === "statusUpdate" || e.case === "task") return e.value.status?.state;
  }
  return undefined;
}

function streamText(events) {
  let text = "";
  for (const e of events) {
    if (e.case === "artifactUpdate") {
      for (const p of e.value.artifact?.parts ?? []) if (p.content?.$case === "text") text += p.content.value;
    } else if (e.case === "task") {
      text = artifactText(e.value) || text;
    }
  }
  return text;
}

function expectStreamCompleted(events, text, what) {
  expect(events.length > 0, `${what}: no events`);
  const cases = events.map((e) => e.case).join(",");
  const last = events[events.length - 1];
  expect(
    last.case === "statusUpdate" || last.case === "task",
    `${what}: the last event is ${last.case}, not a status (events ${cases})`,
  );
  const state = lastState(events);
  expect(state === TaskState.TASK_STATE_COMPLETED, `${what}: ends ${stateName(state)}, not completed (events ${cases})`);
  const got = streamText(events);
  expect(got === `42: ${text}`, `${what}: artifact text ${JSON.stringify(got)} (events ${cases})`);
}

async function untilState(client, id, wanted, what) {
  const deadline = Date.now() + TIMEOUT_MS;
  let task;
  while (Date.now() < deadline) {
    task = await client.getTask({ tenant: "", id }, opts());
    if (task.status?.state === wanted) return task;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new CheckFailed(`${what}: still ${stateName(task?.status?.state)}, not ${stateName(wanted)}`);
}

// The common checks of one client (1.0 JSON-RPC, 1.0 REST, 0.3 JSON-RPC).
async function basics(prefix, client) {
  const text = `What is six times seven (${prefix})?`;
  let taskId;
  await check(`${prefix} send`, async () => {
    const result = await client.sendMessage(sendRequest(text, ANSWER), opts());
    expectCompleted(result, text, "the blocking send");
    taskId = result.id;
  });
  await check(`${prefix} get`, async () => {
    expect(taskId, "no task from the send");
    const task = await client.getTask({ tenant: "", id: taskId }, opts());
    expect(task.id === taskId, `got task ${task.id}, not ${taskId}`);
    expectCompleted(task, text, "the task got");
  });
  await check(`${prefix} unknown task`, async () => {
    await expectError(TaskNotFoundError, client.getTask({ tenant: "", id: `no-such-task-${randomUUID()}` }, opts()), "getTask");
  });
  await check(`${prefix} stream`, async () => {
    const streamed = `${text} (streamed)`;
    const events = await drain(client.sendMessageStream(sendRequest(streamed, ANSWER), opts()));
    expectStreamCompleted(events, streamed, "the stream");
  });
}

// A webhook for an open task through `client`: created, read, listed and deleted; the credentials
// never come back. Its URL is a public address (this daemon's guard refuses loopback), never reached.
async function pushConfig(prefix, client) {
  await check(`${prefix} push notification config`, async () => {
    const open = await client.sendMessage(sendRequest("Call me back.", SLOW_SKILL, { returnImmediately: true }), opts());
    expect(isTask(open), `not a Task: ${JSON.stringify(open)}`);
    const config = {
      tenant: "",
      id: `hook-${randomUUID()}`,
      taskId: open.id,
      url: "https://93.184.215.14/a2a-hook",
      token: "tok-js",
      authentication: { scheme: "Bearer", credentials: "js-secret" },
    };
    const made = await client.createTaskPushNotificationConfig(config, opts());
    expect(made.id === config.id && made.taskId === open.id && made.url === config.url, `created ${JSON.stringify(made)}`);
    expect(made.authentication?.scheme === "Bearer", `authentication ${JSON.stringify(made.authentication)}`);
    expect(!made.authentication?.credentials, "the credentials came back");
    const got = await client.getTaskPushNotificationConfig({ tenant: "", taskId: open.id, id: config.id }, opts());
    expect(got.url === config.url && got.token === config.token, `got ${JSON.stringify(got)}`);
    const listed = await client.listTaskPushNotificationConfig({ tenant: "", taskId: open.id, pageSize: 0, pageToken: "" }, opts());
    expect(listed.configs.map((c) => c.id).join() === config.id, `listed ${JSON.stringify(listed)}`);
    await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: open.id, id: config.id }, opts());
    const left = await client.listTaskPushNotificationConfig({ tenant: "", taskId: open.id, pageSize: 0, pageToken: "" }, opts());
    expect(left.configs.length === 0, `still listed after delete: ${JSON.stringify(left)}`);
    await client.cancelTask({ tenant: "", id: open.id, metadata: undefined }, opts());
  });
}

async function main() {
  const agents = new Agents();
  await agents.register();
  agents.start();
  try {
    // The card, as the SDK's resolver reads it.
    const resolver = new DefaultAgentCardResolver({ fetchImpl: wireFetch });
    let card;
    await check("card", async () => {
      card = await resolver.resolve(base);
      const skills = (card.skills ?? []).map((s) => s.id);
      expect(skills.includes(ANSWER), `skills ${JSON.stringify(skills)} lack ${ANSWER}`);
      expect(card.capabilities?.streaming === true, `capabilities.streaming is ${card.capabilities?.streaming}`);
      const ifaces = (card.supportedInterfaces ?? []).map((i) => `${i.protocolBinding} ${i.protocolVersion} ${i.url}`);
      for (const [binding, version, path] of [["JSONRPC", "1.0", "/a2a"], ["JSONRPC", "0.3", "/a2a"], ["HTTP+JSON", "1.0", "/a2a/rest"]]) {
        expect(ifaces.includes(`${binding} ${version} ${base}${path}`), `supportedInterfaces ${JSON.stringify(ifaces)} lack ${binding} ${version} at ${base}${path}`);
      }
    });
    if (!card) return;

    const factory = (preferred, legacy = false) =>
      new ClientFactory(
        ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
          transports: [
            new JsonRpcTransportFactory({ fetchImpl: wireFetch, legacyCompat: { enabled: legacy } }),
            new RestTransportFactory({ fetchImpl: wireFetch, legacyCompat: { enabled: legacy } }),
          ],
          preferredTransports: [preferred],
          cardResolver: resolver,
        }),
      );

    // 1.0 over JSON-RPC, the client the factory makes from the card at the URL.
    let client;
    await check("jsonrpc 1.0 client", async () => {
      client = await factory("JSONRPC").createFromUrl(base);
    });
    if (client) {
      await basics("jsonrpc 1.0", client);
      await pushConfig("jsonrpc 1.0", client);

      await check("jsonrpc 1.0 list", async () => {
        const request = {
          tenant: "",
          contextId: "",
          status: TaskState.TASK_STATE_UNSPECIFIED,
          pageSize: 50,
          pageToken: "",
          statusTimestampAfter: undefined,
        };
        const list = await client.listTasks(request, opts());
        expect(Array.isArray(list.tasks) && list.tasks.length > 0, `no tasks listed: ${JSON.stringify(list)}`);
        const states = list.tasks.map((t) => stateName(t.status?.state));
        expect(states.includes("TASK_STATE_COMPLETED"), `no completed task listed (states ${states})`);
      });

      let slowId;
      await check("jsonrpc 1.0 send, answered at once", async () => {
        const result = await client.sendMessage(sendRequest("Take your time.", SLOW_SKILL, { returnImmediately: true }), opts());
        expect(isTask(result), `not a Task: ${JSON.stringify(result)}`);
        const state = result.status?.state;
        expect(
          state === TaskState.TASK_STATE_SUBMITTED || state === TaskState.TASK_STATE_WORKING,
          `state ${stateName(state)}, not submitted or working`,
        );
        slowId = result.id;
      });
      await check("jsonrpc 1.0 cancel", async () => {
        expect(slowId, "no task to cancel");
        const task = await client.cancelTask({ tenant: "", id: slowId, metadata: undefined }, opts());
        expect(task.status?.state === TaskState.TASK_STATE_CANCELED, `state ${stateName(task.status?.state)}, not canceled`);
        await untilState(client, slowId, TaskState.TASK_STATE_CANCELED, "the task got after the cancel");
      });
      await check("jsonrpc 1.0 cancel again", async () => {
        expect(slowId, "no task to cancel");
        await expectError(TaskNotCancelableError, client.cancelTask({ tenant: "", id: slowId, metadata: undefined }, opts()), "the second cancel");
      });
      await check("jsonrpc 1.0 cancel unknown task", async () => {
        await expectError(TaskNotFoundError, client.cancelTask({ tenant: "", id: `no-such-task-${randomUUID()}`, metadata: undefined }, opts()), "cancelTask");
      });

      await check("jsonrpc 1.0 subscribe", async () => {
        const open = await client.sendMessage(sendRequest("Wait for me.", SLOW_SKILL, { returnImmediately: true }), opts());
        expect(isTask(open), `not a Task: ${JSON.stringify(open)}`);
        const stream = drain(client.resubscribeTask({ tenant: "", id: open.id }, opts()));
        await new Promise((r) => setTimeout(r, 500));
        await client.cancelTask({ tenant: "", id: open.id, metadata: undefined }, opts());
        const events = await stream;
        const cases = events.map((e) => e.case).join(",");
        expect(events.length > 0, "no events");
        expect(events.every((e) => e.case !== "task" || e.value.id === open.id), `an event of another task (${cases})`);
        expect(lastState(events) === TaskState.TASK_STATE_CANCELED, `ends ${stateName(lastState(events))}, not canceled (events ${cases})`);
      });
    }

    // 1.0 over HTTP+JSON, the interface the card names at BASE/a2a/rest.
    let rest;
    await check("rest 1.0 client", async () => {
      rest = await factory("HTTP+JSON").createFromUrl(base);
    });
    if (rest) {
      await basics("rest 1.0", rest);
      await pushConfig("rest 1.0", rest);
    }

    // 0.3 over JSON-RPC: the card with its 0.3 interface only, the SDK's compat transport.
    let legacy;
    await check("jsonrpc 0.3 client", async () => {
      const only03 = {
        ...card,
        supportedInterfaces: card.supportedInterfaces.filter((i) => i.protocolBinding === "JSONRPC" && i.protocolVersion === "0.3"),
      };
      expect(only03.supportedInterfaces.length === 1, "no JSONRPC 0.3 interface on the card");
      legacy = await factory("JSONRPC", true).createFromAgentCard(only03);
    });
    if (legacy) await basics("jsonrpc 0.3", legacy);
  } finally {
    await agents.stop();
  }
}

try {
  await main();
} catch (e) {
  console.log(`setup: FAILED: ${e?.message}`);
  if (e?.stack) console.error(e.stack);
  results.push(false);
}
const failed = results.filter((ok) => !ok).length;
console.error(`js_check: ${results.length - failed} ok, ${failed} failed`);
process.exit(failed ? 1 : 0);
