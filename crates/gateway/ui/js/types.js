// The shapes the UI works with, as JSDoc types checked by `tsc --checkJs`. Nothing runs here. What
// the daemon serves and writes is typed in `api-types.js`, generated from its published schemas.

/**
 * One event of the log: a Clutch Protocol v0 envelope with its global `seq`.
 * @typedef {object} ClutchEvent
 * @property {number} seq
 * @property {string} id
 * @property {string} ts
 * @property {string} type
 * @property {string} thread_id
 * @property {string} run_id
 * @property {string} task_id
 * @property {string} [parent_task_id]
 * @property {{agent_id: string, role?: string}} from
 * @property {{agent_id: string}[]} to
 * @property {string} [payload_type]
 * @property {string} [domain]
 * @property {Record<string, any>} payload
 * @property {string[]} [requires]
 * @property {string[]} [prefers]
 * @property {number} [attempt]
 * @property {Record<string, any>} [meta]
 * @property {{kind: string, ref: string, name?: string}[]} [attachments]
 */

/**
 * The final frame of a stream before the daemon closes it.
 * @typedef {{frame: 'lagged' | 'shutdown' | 'error', last_seq: number, code?: string, message?: string}} EndFrame
 */

/**
 * Where a task is in its lifecycle, as the UI derives it from the events: the engine's names
 * (`core::view::TaskState`) for a routed task's states, a planned workflow task's and a workflow root's.
 * @typedef {import('./api-types.js').TaskState} TaskStateName
 */

/**
 * A task as the events so far describe it.
 * @typedef {object} Task
 * @property {string} task_id
 * @property {string} run_id
 * @property {string} thread_id
 * @property {string | undefined} parent_task_id
 * @property {TaskStateName} state
 * @property {number | undefined} percent
 * @property {string | undefined} progressMessage
 * @property {string | undefined} requester
 * @property {string | undefined} assignee
 * @property {string[]} requires
 * @property {string} title
 * @property {number} attempt
 * @property {ClutchEvent | undefined} routing
 * @property {ClutchEvent | undefined} outcome   the result, error, timeout or cancel
 * @property {string[]} dependsOn
 * @property {ClutchEvent[]} events
 * @property {{routed: boolean, accepted: boolean, progress: boolean}} seen  steps that happened
 * @property {boolean} [titleSet]  named by its own request (not by a routed copy)
 * @property {Spent | undefined} usage  what its progress and results reported, every attempt summed
 * @property {'routed' | 'workflow' | 'workflow_task'} kind  which machine it follows (its request's payload type)
 * @property {string | undefined} holder  a planned task's holder (its claim), while it holds it
 * @property {string | undefined} claimedAt  when the holder claimed it
 * @property {string | undefined} statusReason  a planned task's last move's reason (blocked on what, released why)
 * @property {ClutchEvent[]} checkpoints  its `clutch.checkpoint.v1` progress, in order
 * @property {ClutchEvent[]} llmCalls  an LLM agent's `clutch.llm.call.v1` records, in order
 * @property {{turn: number, text: string} | undefined} streaming  text streamed for a model call not yet recorded
 * @property {string[]} planned  a workflow root's planned tasks, in the order they were stored
 */

/**
 * An LLM agent's record of one model call (`task.progress` `clutch.llm.call.v1`, runtime's `work::Call`).
 * @typedef {object} LlmCall
 * @property {number} turn  1 for the task's first call
 * @property {string} provider
 * @property {string} model  the model asked for (`response.model` names the one that answered)
 * @property {{max_tokens?: number, temperature?: number, system?: string, tools?: string[], added: unknown}} request
 *   what it sent beyond the previous call: `added` the new turns, or `{artifact, size}` when large
 * @property {{id?: string, model?: string, content?: LlmPart[], stop?: unknown, usage?: Record<string, number>}} response
 * @property {{input_tokens?: number, output_tokens?: number, cache_read_tokens?: number, cache_write_tokens?: number, cost_usd?: number, requests?: number}} usage
 * @property {number} duration_ms
 * @property {number} [retries]  provider retries, when the record counts them
 */

/**
 * A piece of a model conversation's turn (runtime's `provider::Part`).
 * @typedef {{type: 'text', text: string} | {type: 'tool_use', id: string, name: string, input: unknown} | {type: 'tool_result', tool_use_id: string, content: string, is_error?: boolean}} LlmPart
 */

/**
 * What a task or run has spent, as `usage` of `task.progress` / `task.result` reports it (summed as
 * the engine sums it: `tokens`, else `input_tokens` + `output_tokens`).
 * @typedef {{tokens: number, cost_usd: number, requests: number}} Spent
 */

/**
 * A tool call as the events so far describe it: the call, the daemon's notes about it, its answer.
 * Each part is kept by its role, so events that arrive out of order (history) land where they belong.
 * @typedef {object} ToolCallState
 * @property {string} id  the `tool.call`'s message id
 * @property {ClutchEvent | undefined} call
 * @property {ClutchEvent | undefined} requested  `clutch.approval.requested.v1`
 * @property {ClutchEvent | undefined} decided    `clutch.approval.decided.v1`
 * @property {ClutchEvent[]} started              `clutch.tool.started.v1`, one per attempt
 * @property {ClutchEvent | undefined} answer     the `tool.result` or `tool.error`
 */

/**
 * A thread or a run, as the sidebar lists it.
 * @typedef {object} Scope
 * @property {'thread' | 'run'} kind
 * @property {string} id
 * @property {ClutchEvent[]} events  in seq order
 * @property {string} title
 * @property {string} lastTs
 * @property {number} lastSeq
 * @property {boolean} [titleWeak]  named by an event that a better one may replace
 * @property {boolean} [listed]  has more than agent bookkeeping (register, heartbeat): shown in the sidebar
 */

/**
 * What one ingestion step changed, given to every store listener.
 * @typedef {object} Change
 * @property {ClutchEvent[]} events   new events, in seq order (history included)
 * @property {Set<string>} tasks      task ids whose derived state changed
 * @property {Set<string>} calls      tool call ids that gained events
 * @property {Set<string>} scopes     thread, run, task and agent ids that gained events
 * @property {boolean} history        events older than some already held were inserted
 * @property {boolean} reset          everything was cleared
 */

/**
 * An agent as `GET /v1/agents` reports it.
 * @typedef {import('./api-types.js').Agent} Agent
 */

/**
 * A filter over events, as the filter bar and the search view set it.
 * @typedef {{type?: string, agent?: string, task?: string, q?: string}} Filter
 */

export {};
