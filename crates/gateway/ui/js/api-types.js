// The shapes the daemon serves and writes, as JSDoc types for `tsc --checkJs`. Generated from the
// published JSON Schemas (docs/schemas/) by crates/gateway/tests/it/ui_types.rs: do not edit;
// `UPDATE_SCHEMAS=1 cargo test -p clutch-gateway --test it ui_types` regenerates it.
//
// The published shapes (docs/schemas/NAME.schema.json) and their types:
//   envelope → ClutchMessage
//   agent-card → AgentCard
//   agent-view → Agent
//   agents-view → Agents
//   task-view → Task
//   run-tasks-view → RunTasks
//   schema-view → Schema
//   registered-view → Registered
//   removed-view → Removed
//   heartbeat-view → Heartbeat
//   tools-view → Tools
//   approvals-view → Approvals
//   sessions-view → Sessions
//   session-history-view → SessionHistory
//   session-sent-view → SessionSent
//   invoked-view → Invoked
//   inbox-view → Inbox
//   ended-view → Ended
//   retention-view → Retention
//   runs-view → RunSummaryPage
//   threads-view → ThreadSummaryPage
//   tasks-view → TaskListingPage
//   search-view → SearchHitPage
//   clutch.agent.status.v1 → AgentStatus
//   clutch.budget.v1 → BudgetNotice
//   clutch.task.retry.v1 → TaskRetry
//   clutch.refusal.v1 → Refusal
//   clutch.schema.v1 → SchemaRegistration
//   routing.decision → RoutingDecision
//   routing.failure → RoutingFailure
//   task.error → TaskErrorPayload
//   task.timeout → Timeout
//   task.cancel → Cancel
//   tool.call → ToolCall
//   tool.result → ToolResult
//   tool.error → ToolErrorPayload
//   clutch.tool.started.v1 → ToolStarted
//   clutch.approval.requested.v1 → ApprovalRequested
//   clutch.approval.decided.v1 → ApprovalDecided
//   clutch.workflow.v1 → Workflow
//   clutch.workflow.plan.v1 → Plan
//   clutch.workflow.task.v1 → PlannedTask
//   clutch.workflow.status.v1 → StatusChange
//   workflow-task-result → Outcome
//   clutch.checkpoint.v1 → CheckpointPayload
//   recovery-detail → Recovery
//   clutch.workflow.task_plan.v1 → TaskPlan
//   clutch.workspace.v1 → Workspace
//   clutch.session.v1 → SessionRecord
//   clutch.session.message.v1 → SessionSaid
//   clutch.session.warning.v1 → SessionWarning

/**
 * An agent as the registry knows it: its card and its live state.
 * @typedef {object} Agent
 * @property {string} agent_id
 * @property {BudgetLimits | null} [budget]  Its budget (the card's, overridden measure by measure by the policy's); `null` when unlimited.
 * @property {boolean} budget_exhausted  The budget is spent: it gets no new tasks (or its runs fail, as the policy says).
 * @property {AgentCard} card
 * @property {string} last_seen  Its last sign of life (RFC 3339).
 * @property {Load} load
 * @property {Status} status
 * @property {number | null} [success_rate]  The share of its recent tasks that ended with a result, 0 to 1; `null` before any ended.
 * @property {Array<string>} tasks  The tasks routed to it and not ended.
 * @property {Usage} usage
 */

/**
 * An agent's advertisement of itself (clutch/0.1).
 * @typedef {object} AgentCard
 * @property {string} agent_id  `agent:<name>`.
 * @property {Budget | null} [budget]
 * @property {Array<Capability>} [capabilities]
 * @property {Display | null} [display]
 * @property {Record<string, Endpoint>} [endpoints]  Where the agent is reached, by protocol (`a2a`, `clutch`, ...).
 * @property {Limits | null} [limits]
 * @property {Record<string, any>} [meta]
 * @property {CardSecurity | null} [security]
 * @property {string} v
 */

/**
 * `agent.update` `clutch.agent.status.v1`: an agent's availability changed.
 * @typedef {object} AgentStatus
 * @property {string} agent_id
 * @property {Status} previous
 * @property {Status} status
 */

/**
 * The agents: every registered one, by id.
 * @typedef {object} Agents
 * @property {Array<Agent>} agents
 */

/**
 * A tool call waiting for approval.
 * @typedef {object} Approval
 * @property {Record<string, any>} args  The arguments the call would be made with.
 * @property {string} call_id  The `tool.call`'s message id: what approving or denying names.
 * @property {string} caller
 * @property {string} expires_at
 * @property {string} reason  `policy` or `destructive` (see the `clutch.approval.requested.v1` payload).
 * @property {string} requested_at  When approval was asked for, and when the call expires undecided (RFC 3339).
 * @property {string} run_id
 * @property {string} task_id
 * @property {string} thread_id
 * @property {string} tool
 */

/**
 * `chat.system` `clutch.approval.decided.v1` on the call's run, thread and task: the one decision
 * about a call that waited for approval (a second is a duplicate of the first).
 * @typedef {object} ApprovalDecided
 * @property {string} by  Who decided: `user:<token name>` (`user:local` without tokens), or the daemon when it expired.
 * @property {string} call_id
 * @property {Decision} decision
 * @property {string | null} [note]
 * @property {string} tool
 */

/**
 * `chat.system` `clutch.approval.requested.v1` on the call's run, thread and task, to the caller: the
 * call waits for a person's decision before it is made.
 * @typedef {object} ApprovalRequested
 * @property {Record<string, any>} [args]  The arguments it would be made with.
 * @property {string} call_id
 * @property {string} caller  Who made the call.
 * @property {string} expires_at  When it expires undecided (RFC 3339): then it is not made.
 * @property {string} reason  Why it needs approval: `policy` (org.yaml's `approvals.tools`) or `destructive` (its annotations say it may destroy and is not read-only).
 * @property {string} tool
 */

/**
 * The tool calls waiting for a person's approval, oldest first.
 * @typedef {object} Approvals
 * @property {Array<Approval>} pending
 */

/**
 * A reference to content stored outside the message.
 * @typedef {object} Attachment
 * @property {AttachmentKind} kind
 * @property {string | null} [media_type]
 * @property {string | null} [name]
 * @property {string} ref  `artifact:sha256:<hex>` for `artifact_ref`, an http(s) URL for `url`.
 * @property {number | null} [size]
 */

/**
 * @typedef {'artifact_ref' | 'url'} AttachmentKind
 */

/**
 * A message signature.
 * @typedef {object} Auth
 * @property {string} kid  Key id, as registered by the agent.
 * @property {string} scheme  Signature scheme; `ed25519` is the one defined.
 * @property {string} sig  The signature, base64.
 */

/**
 * What the agent may spend; enforced by the router once usage is tracked.
 * @typedef {object} Budget
 * @property {number | null} [cost_usd]
 * @property {number | null} [tokens]
 */

/**
 * Spending limits; `null` is no limit on that measure.
 * @typedef {object} BudgetLimits
 * @property {number | null} [cost_usd]
 * @property {number | null} [requests]  Requests (LLM or tool calls).
 * @property {number | null} [tokens]  LLM tokens.
 * @property {number | null} [wall_time_sec]
 */

/**
 * `chat.system` `clutch.budget.v1`: an agent's or a run's budget is spent (sent once).
 * @typedef {object} BudgetNotice
 * @property {string} action  What follows: the agent leaves routing, or the run fails.
 * @property {string} dimension  The measure crossed: `tokens`, `cost_usd`, `requests` or `wall_time_sec`.
 * @property {string} id  The agent or run.
 * @property {number} limit
 * @property {string} message  All of the above, for people.
 * @property {BudgetScope} scope
 * @property {number} used
 */

/**
 * Whose budget a notice is about.
 * @typedef {'agent' | 'run'} BudgetScope
 */

/**
 * `task.cancel` from the daemon: a cancel forwarded to the task's agent, or a planned task
 * withdrawn with its plan.
 * @typedef {object} Cancel
 * @property {string | null} [cancel_id]  The requester's cancel this one forwards.
 * @property {string} message
 */

/**
 * One capability (§1.5).
 * @typedef {object} Capability
 * @property {CostHint | null} [cost_hint]
 * @property {string} id  `skill:<name>`, `tool:<name>` or `mcp:<name>`.
 * @property {Array<string>} [servers]  For `tool:mcp`: the MCP servers offered.
 * @property {Array<string>} [tags]
 * @property {Array<string>} [tools]  MCP servers the capability uses.
 * @property {TrustLevel | null} [trust_level]
 * @property {string | null} [version]  Semantic version of the capability.
 */

/**
 * @typedef {object} CardSecurity
 * @property {Network | null} [network]
 * @property {boolean | null} [sandbox]
 */

/**
 * `task.progress` `clutch.checkpoint.v1`: what the holder (or, on recovery, the daemon) records.
 * @typedef {object} Checkpoint
 * @property {string} agent_id
 * @property {any} [detail]
 * @property {Array<string>} [files_changed]
 * @property {string} id  The id of the event that recorded it.
 * @property {number} seq
 * @property {string} summary
 * @property {string} task_id
 * @property {string} ts
 * @property {CheckpointType} type
 */

/**
 * `task.progress` `clutch.checkpoint.v1`: what the holder (or, on recovery, the daemon) records.
 * @typedef {object} CheckpointPayload
 * @property {any} [detail]
 * @property {Array<string>} [files_changed]
 * @property {string} summary
 * @property {CheckpointType} type
 */

/**
 * The kinds of checkpoint.
 * @typedef {'plan' | 'progress' | 'decision' | 'error' | 'recovery' | 'complete'} CheckpointType
 */

/**
 * The Clutch Protocol v0 envelope (clutch/0.1).
 * @typedef {object} ClutchMessage
 * @property {Array<Attachment>} [attachments]
 * @property {number} [attempt]  Delivery attempt, 1-based.
 * @property {string | null} [domain]  Problem space, e.g. `research`, `code_review`, `ops`.
 * @property {Sender} from
 * @property {string} id  Unique message id (`msg_` + ULID); the deduplication key. Filled by the daemon when omitted.
 * @property {string | null} [idempotency_key]  Client-provided deduplication key for commands, scoped to the run.
 * @property {Record<string, any>} [meta]  Framework-specific metadata.
 * @property {string | null} [parent_task_id]  The parent task, making task trees.
 * @property {Record<string, any>} payload  Type-specific content (a JSON object).
 * @property {string | null} [payload_type]  Structured contract id, e.g. `research.summary.v1`.
 * @property {Array<string>} [prefers]  Preferred capabilities, tags, tools or domains (weighted).
 * @property {Array<string>} [requires]  Required capabilities (AND), e.g. `skill:research@^1.2`.
 * @property {string} run_id  Top-level execution context, `run_` + ULID.
 * @property {string | null} [schema_ref]  Canonical schema reference, e.g. `schema://clutch/research/summary@1`.
 * @property {Security | null} [security]
 * @property {string} task_id  The unit of work this message is about, `task_` + ULID.
 * @property {string} thread_id  Conversational context (UI grouping), `thr_` + ULID.
 * @property {Array<Recipient>} to  Recipients; empty means everyone observing the thread.
 * @property {Trace | null} [trace]
 * @property {string} ts  RFC 3339 timestamp. Filled by the daemon when omitted.
 * @property {MessageType} type
 * @property {string} v  Protocol version, always `clutch/0.1`. Filled by the daemon when a client omits it.
 */

/**
 * @typedef {'low' | 'medium' | 'high'} CostHint
 */

/**
 * What a person decided about a call waiting for approval (or that no one did in time).
 * @typedef {'approved' | 'denied' | 'expired'} Decision
 */

/**
 * @typedef {object} Display
 * @property {string | null} [desc]
 * @property {string} name
 */

/**
 * The message that ended a task: its `task.result`, `task.error`, `task.timeout` or `task.cancel`.
 * @typedef {object} Ended
 * @property {string} from
 * @property {string} id
 * @property {any} payload
 * @property {number} seq
 * @property {string} ts
 * @property {MessageType} type
 */

/**
 * @typedef {object} Endpoint
 * @property {string} url
 */

/**
 * A heartbeat taken: the agent is online until it has been silent too long.
 * @typedef {object} Heartbeat
 * @property {string} agent_id
 * @property {number} next_heartbeat_sec  When to beat next, at the latest.
 * @property {Status} status
 */

/**
 * The routed tasks given to an agent or a person that have not ended, oldest first (`task_inbox`).
 * @typedef {object} Inbox
 * @property {string} agent_id
 * @property {Array<InboxTask>} tasks
 */

/**
 * A task waiting in an inbox: the task, and what was asked.
 * @typedef {object} InboxTask
 * @property {any} request  The request's payload: its goal, input and whatever else the requester sent.
 * @property {string | null} [session_id]  The position session it is a turn of, if any (the session's id is its run's).
 * @property {Task} task
 */

/**
 * A position invoked: its session (the run), the task that stands for it, its thread; once the
 * session has ended (an MCP task's result), that task's state and the message that ended it.
 * @typedef {object} Invoked
 * @property {Ended | null} [outcome]
 * @property {string} position
 * @property {string} session_id
 * @property {TaskState | null} [state]
 * @property {string} task_id
 * @property {string} thread_id
 */

/**
 * @typedef {object} Limits
 * @property {number | null} [max_concurrency]
 * @property {number | null} [max_runtime_sec]
 */

/**
 * Tasks in flight against the card's limit (`null`: no limit).
 * @typedef {object} Load
 * @property {number} in_flight
 * @property {number | null} [max_concurrency]
 */

/**
 * The closed set of message types (§2). Anything else is rejected.
 * @typedef {'task.request' | 'task.accept' | 'task.progress' | 'task.result' | 'task.error' | 'task.cancel' | 'task.timeout' | 'chat.message' | 'chat.system' | 'tool.call' | 'tool.result' | 'tool.error' | 'agent.register' | 'agent.heartbeat' | 'agent.update' | 'routing.decision' | 'routing.failure'} MessageType
 */

/**
 * @typedef {'none' | 'egress-restricted' | 'open'} Network
 */

/**
 * `task.result` of a planned task.
 * @typedef {object} Outcome
 * @property {string} outcome
 * @property {any} [outcome_detail]
 */

/**
 * `task.progress` `clutch.workflow.plan.v1` on the root: a plan, followed in its batch by one
 * `clutch.workflow.task.v1` request per task.
 * @typedef {object} Plan
 * @property {string | null} [summary]
 * @property {Array<PlanEntry>} tasks
 */

/**
 * One task of a plan, with the id it is stored under.
 * @typedef {object} PlanEntry
 * @property {Array<string>} depends_on
 * @property {string} id
 * @property {string} name
 * @property {string | null} [parallel_group]
 */

/**
 * `task.request` `clutch.workflow.task.v1`: a planned task (a child of the root), as the daemon
 * writes it for a plan or an agent sends it to add one task.
 * @typedef {object} PlannedTask
 * @property {Array<string>} [depends_on]  Task ids, each stored before this one.
 * @property {string} [description]
 * @property {string} name
 * @property {number | null} [order]  Its place in the plan as given (absent: after the tasks already planned).
 * @property {string | null} [parallel_group]
 */

/**
 * Constraints on how the message may be handled.
 * @typedef {object} Policy
 * @property {boolean | null} [sandbox]
 * @property {Array<string> | null} [tool_allowlist]
 */

/**
 * A recipient: an agent, a human or a group (`group:<name>`).
 * @typedef {object} Recipient
 * @property {string} agent_id
 */

/**
 * `detail` of the daemon's `recovery` checkpoint, written when a holder's lease expired.
 * @typedef {object} Recovery
 * @property {string | null} [last_checkpoint]  The holder's last checkpoint, if it recorded one.
 * @property {string} previous_agent
 * @property {TaskStatus} previous_status
 */

/**
 * `chat.system` `clutch.refusal.v1` in the system run: a message was refused (not stored).
 * @typedef {object} Refusal
 * @property {string} claimed_from  The sender the message claimed (unverified: it was refused).
 * @property {string} code  The stable error code the sender got.
 * @property {string} message
 * @property {string} message_id
 * @property {string} run_id
 * @property {MessageType} type
 * @property {number | null} [unrecorded_before]  How many refusals before this one were counted but not recorded (a flood).
 */

/**
 * An agent registered (or its card replaced).
 * @typedef {object} Registered
 * @property {Agent | null} [agent]  The agent as the registry now shows it.
 * @property {string} agent_id
 * @property {number} heartbeat_interval_sec  How often the agent must show a sign of life to stay online.
 * @property {number} seq  The registration's place in the log.
 */

/**
 * An agent removed: it gets no new tasks, and its unfinished ones are routed again.
 * @typedef {object} Removed
 * @property {string} agent_id
 * @property {number} seq
 * @property {Status} status
 */

/**
 * One run a retention pass handled.
 * @typedef {object} RetainedRun
 * @property {string | null} [archive]  The compressed NDJSON file it was (or would be) archived to.
 * @property {number} events
 * @property {string} last_activity  The `ts` of its newest event.
 * @property {boolean} removed  Whether its events were (or would be) removed from the log.
 * @property {string} run_id
 * @property {string | null} [workflow]  The workflow's name, when the run is a workflow.
 */

/**
 * What a retention pass of the log did, or would do (`dry_run`): the ended runs old enough to go,
 * archived and/or removed (see [`crate::retention`]).
 * @typedef {object} Retention
 * @property {boolean} dry_run  Nothing was archived or removed: this says what would have been.
 * @property {boolean} enabled  Whether the operator set a policy (`[retention]` in `clutch.toml`, `retention:` in org.yaml); without one nothing ever goes.
 * @property {number} events_total  Their events, in all.
 * @property {Array<string>} in_flight  Runs old enough to go but with work in flight (an open workflow or session, a task not ended): left alone, and looked at again by the next pass.
 * @property {boolean} more  The pass stopped at its reading limit with more of the log old enough: the next continues.
 * @property {Array<RetainedRun>} runs  The runs handled (at most the first 1,000 are listed; `runs_total` counts them all).
 * @property {number} runs_total
 * @property {number} scanned  Events read to find the runs.
 */

/**
 * `routing.decision`: the agent the router picked for a task, and why.
 * @typedef {object} RoutingDecision
 * @property {number} attempt  Which routing of the task this is (1-based).
 * @property {Array<string>} candidates  The eligible agents, best first.
 * @property {Record<string, string>} excluded  The agents left out, each with why.
 * @property {string} reason
 * @property {Record<string, number>} scores  Each eligible agent's score, 0 to 1.
 * @property {string} selected
 */

/**
 * `routing.failure`: no agent can take the task now; it waits (`queued`) or fails.
 * @typedef {object} RoutingFailure
 * @property {Record<string, string>} excluded  Every agent, each with why it was left out.
 * @property {boolean} queued  The task waits for an agent (true) or has failed (false).
 * @property {string} reason
 */

/**
 * What a run is, from its first top-level request.
 * @typedef {'chat' | 'task' | 'workflow' | 'session'} RunKind
 */

/**
 * Where a run is.
 * @typedef {'active' | 'completed' | 'failed' | 'cancelled'} RunState
 */

/**
 * A run as its list shows it.
 * @typedef {object} RunSummary
 * @property {Array<string>} agents  Agents that sent or were given its messages (at most 32, first come first).
 * @property {number} events  Events in the run.
 * @property {number} first_seq
 * @property {string} first_ts
 * @property {RunKind} kind
 * @property {number} last_seq
 * @property {string} last_ts
 * @property {string | null} [root_task_id]  The first top-level `task.request` of the run.
 * @property {string} run_id
 * @property {RunState} state  From its root task: `active` until that ends (a workflow: until its planned tasks have).
 * @property {Record<string, number>} tasks  Its tasks, counted by state (the names of `TaskState`).
 * @property {string} title  Its first top-level request's goal or text (a workflow's name), else its first message's.
 */

/**
 * A page of a list.
 * @typedef {object} RunSummaryPage
 * @property {number} as_of  The log position the pages of this listing are read at.
 * @property {Array<RunSummary>} items
 * @property {string | null} [next]  Pass as `cursor` for the next page; absent on the last one.
 */

/**
 * A run's tasks as a tree by `parent_task_id`, with counts per state.
 * @typedef {object} RunTasks
 * @property {boolean | null} [budget_exhausted]  The run's budget is spent (absent for a workflow).
 * @property {Record<string, any>} counts  Tasks per state (a workflow's: every planned-task state, zero included).
 * @property {string} run_id
 * @property {Array<Task>} tasks  The tasks whose parent is not a task of the run, each with its children.
 * @property {Usage | null} [usage]  The run's usage (absent for a workflow).
 * @property {string | null} [workflow_id]  Set when the run is a workflow.
 */

/**
 * A payload schema the registry holds.
 * @typedef {object} Schema
 * @property {boolean} builtin  Shipped with the daemon (not registered at run time).
 * @property {string} payload_type
 * @property {string} schema_ref  Its `$id`: the ref a message's `schema_ref` names it by.
 */

/**
 * `chat.system` `clutch.schema.v1`: a payload schema registered at run time.
 * @typedef {object} SchemaRegistration
 * @property {string} payload_type
 * @property {any} schema  The JSON Schema (2020-12).
 * @property {string | null} [schema_ref]
 */

/**
 * One search result: the event, where it is, and the text around what matched.
 * @typedef {object} SearchHit
 * @property {string} from
 * @property {string} id
 * @property {string} run_id
 * @property {number} seq
 * @property {string} snippet  The matched text with each match between `[` and `]`, cut around the matches.
 * @property {string} task_id
 * @property {string} thread_id
 * @property {string} ts
 * @property {string} type
 */

/**
 * A page of a list.
 * @typedef {object} SearchHitPage
 * @property {number} as_of  The log position the pages of this listing are read at.
 * @property {Array<SearchHit>} items
 * @property {string | null} [next]  Pass as `cursor` for the next page; absent on the last one.
 */

/**
 * Authentication and policy carried by a message.
 * @typedef {object} Security
 * @property {Auth | null} [auth]
 * @property {Policy | null} [policy]
 */

/**
 * The sender: an agent (`agent:<name>`) or a human (`user:<name>`).
 * @typedef {object} Sender
 * @property {string} agent_id
 * @property {string | null} [role]
 */

/**
 * Where a server of tools is.
 * @typedef {'starting' | 'ready' | 'restarting' | 'stopped'} ServerState
 */

/**
 * A position's session: its team, its phase and how much has been said.
 * @typedef {object} Session
 * @property {Array<SessionAgent>} agents
 * @property {string} id  Its id: its run's id.
 * @property {number} message_count
 * @property {string} pattern
 * @property {string} position
 * @property {Array<string>} protocol  The message types its position's protocol allows.
 * @property {string} root_task_id  The task that stands for it: its outcome is the session's, cancelling it stops the session.
 * @property {string} started_at
 * @property {SessionPhase} status
 * @property {string | null} [step]  The position's workflow phase under way (`ANALYSIS`).
 * @property {string} thread_id
 */

/**
 * A member of a session.
 * @typedef {object} SessionAgent
 * @property {string} id
 * @property {string} role
 * @property {string} status  `active`, or `failed` once its runner announced it failed.
 */

/**
 * Messages of a session, oldest first (`sessions_history`).
 * @typedef {object} SessionHistory
 * @property {Array<SessionMessage>} messages
 * @property {string} session_id
 */

/**
 * The bus limits of a session.
 * @typedef {object} SessionLimits
 * @property {number} max_messages  Messages the whole session may carry (`SESSION_MAX_MESSAGES`).
 * @property {number} per_agent_per_minute  Messages one member may send in any 60 seconds.
 */

/**
 * One agent of a session's team and the role it plays.
 * @typedef {object} SessionMember
 * @property {string} agent_id
 * @property {string} role
 */

/**
 * A message between a session's members.
 * @typedef {object} SessionMessage
 * @property {any} content
 * @property {string} from
 * @property {string} id
 * @property {number} seq
 * @property {Array<string>} to
 * @property {string} ts
 * @property {string} type
 */

/**
 * A session's state machine: `INITIALIZING → SPAWNING_AGENTS → RUNNING → COMPLETING → COMPLETED`,
 * or `ERROR` / `TIMEOUT` from any phase before the end.
 * @typedef {'INITIALIZING' | 'SPAWNING_AGENTS' | 'RUNNING' | 'COMPLETING' | 'COMPLETED' | 'ERROR' | 'TIMEOUT'} SessionPhase
 */

/**
 * A `clutch.session.v1` record.
 * @typedef {object} SessionRecord
 * @property {any} [detail]  Pattern-specific detail: a comparison, the votes of a round, the partial results kept.
 * @property {Array<string>} [failed]  Members that failed (announced to the others).
 * @property {SessionLimits | null} [limits]
 * @property {Array<SessionMember>} [members]  The team, once spawned (every record after that repeats it).
 * @property {string | null} [note]  What happened, in words (why it ended, what was forced).
 * @property {string} pattern  The position's collaboration pattern (`mirror`).
 * @property {SessionPhase} phase
 * @property {string} position  The position it runs (`mirror`).
 * @property {Array<string>} [protocol]  The message types the position's protocol allows.
 * @property {number | null} [round]  The round under way, for patterns that go in rounds (a circle's votes).
 * @property {string} session_id  The session's id: its run's id.
 * @property {string | null} [step]  The position's workflow phase now under way (`ANALYSIS`).
 */

/**
 * A `clutch.session.message.v1` payload.
 * @typedef {object} SessionSaid
 * @property {any} [content]
 * @property {string} type  A message type of the position's protocol (`RESULTS`).
 */

/**
 * A session message stored (`sessions_send`).
 * @typedef {object} SessionSent
 * @property {string} id
 * @property {number} seq
 * @property {Array<string>} to  Its recipients (`all` spelled out).
 */

/**
 * A `clutch.session.warning.v1` payload.
 * @typedef {object} SessionWarning
 * @property {string} agent_id  The member it is about.
 * @property {string} code
 * @property {string} message
 */

/**
 * Positions' sessions, newest first (`sessions_list`).
 * @typedef {object} Sessions
 * @property {Array<Session>} sessions
 */

/**
 * Availability of an agent.
 * @typedef {'online' | 'stale' | 'offline' | 'removed'} Status
 */

/**
 * `task.progress` `clutch.workflow.status.v1`: a planned task moved (in_progress, blocked, or
 * back to pending when released or its holder's lease expired).
 * @typedef {object} StatusChange
 * @property {string | null} [note]  The holder's note on a release.
 * @property {string | null} [previous_agent]  The agent whose lease expired.
 * @property {string | null} [reason]  Why: the holder's words, `released` or `lease_expired`.
 * @property {TaskStatus} status
 */

/**
 * One event of a task's history, with the task's state after it.
 * @typedef {object} Step
 * @property {string} from
 * @property {string} id
 * @property {number} seq
 * @property {TaskState} state
 * @property {string} ts
 * @property {MessageType} type
 */

/**
 * A task: on its own with its history, or as a node of a run's tree with its children.
 * @typedef {object} Task
 * @property {string | null} [agent]  The agent it is routed to or held by (or was, once ended).
 * @property {number} [attempt]  Delivery attempt of the current assignment (1-based; 0 for workflow tasks).
 * @property {Array<Task> | null} [children]  Its child tasks by `parent_task_id` (in a run's tree only).
 * @property {TaskError | null} [error]  The last error reported about it.
 * @property {Array<Step> | null} [history]  Every event about the task, oldest first (in a task's own view only).
 * @property {TaskKind} [kind]  Absent for a routed task.
 * @property {string | null} [name]  What the task is called: a workflow's or a planned task's name; absent for a routed task, which is named by its request.
 * @property {string | null} [parent_task_id]
 * @property {number | null} [progress]  The last reported progress, 0 to 100.
 * @property {string | null} [requester]  Who asked (the first request's sender) or, for a workflow, who created it.
 * @property {Array<string>} [requires]  The capabilities the request requires.
 * @property {number} [routings]  How many times the router has given it to an agent.
 * @property {string} run_id
 * @property {TaskState} state
 * @property {string} task_id
 * @property {string} thread_id
 * @property {Usage | null} [usage]  What it has used: tokens, cost and requests its progress and results reported, and seconds from acceptance to end of each assignment (absent until something is reported or it ends).
 * @property {WorkflowDetail | null} [workflow]  The workflow a root task stands for.
 * @property {TaskDetail | null} [workflow_task]  Everything recorded about a planned task.
 */

/**
 * A planned task with everything recorded about it.
 * @typedef {object} TaskDetail
 * @property {string | null} [agent_id]  The holder (claimed, in progress, blocked) or, once ended, who ended it.
 * @property {Array<Checkpoint>} checkpoints
 * @property {string | null} [claimed_at]
 * @property {Array<string>} depends_on
 * @property {string} description
 * @property {string | null} [error]
 * @property {string} id
 * @property {string} name
 * @property {number} order
 * @property {string | null} [outcome]
 * @property {any} [outcome_detail]
 * @property {string | null} [parallel_group]
 * @property {string} parent_task_id
 * @property {any} [plan]
 * @property {string | null} [reason]
 * @property {TaskStatus} status
 * @property {string} updated_at
 * @property {string} workflow_id
 */

/**
 * An error as a task records it.
 * @typedef {object} TaskError
 * @property {string} code
 * @property {string} message
 */

/**
 * `task.error` and `tool.error` as the daemon sends them (and as agents should).
 * @typedef {object} TaskErrorPayload
 * @property {string} code
 * @property {any} [details]  More about it (a refused tool call: the tool and the call's id).
 * @property {string | null} [error]  A workflow task's failure as its holder worded it (the same as `message`).
 * @property {string} message
 * @property {boolean} retryable  Whether the same request may succeed later.
 */

/**
 * A task's error, as its `task.error` said it.
 * @typedef {object} TaskFailure
 * @property {string} code
 * @property {string} message
 */

/**
 * Which machine a task follows.
 * @typedef {'routed' | 'workflow' | 'workflow_task'} TaskKind
 */

/**
 * A task as its list shows it.
 * @typedef {object} TaskListing
 * @property {string | null} [agent]  The agent it is given to (or was, once ended).
 * @property {TaskFailure | null} [error]
 * @property {number} events  Events about the task.
 * @property {number} first_seq
 * @property {string} first_ts
 * @property {number} last_seq
 * @property {string} last_ts
 * @property {string | null} [parent_task_id]
 * @property {string} requester  Who asked.
 * @property {Array<string>} requires  The capabilities its request requires.
 * @property {string} run_id
 * @property {string} state  A `TaskState` name.
 * @property {string} task_id
 * @property {string} thread_id
 * @property {string} title  Its request's goal or text (a planned task's name).
 * @property {string | null} [workflow_id]  The workflow it belongs to (a workflow's id is its run's).
 */

/**
 * A page of a list.
 * @typedef {object} TaskListingPage
 * @property {number} as_of  The log position the pages of this listing are read at.
 * @property {Array<TaskListing>} items
 * @property {string | null} [next]  Pass as `cursor` for the next page; absent on the last one.
 */

/**
 * `task.progress` `clutch.workflow.task_plan.v1`: how the holder means to do the task.
 * @typedef {object} TaskPlan
 * @property {any} plan
 */

/**
 * `chat.system` `clutch.task.retry.v1` on a task: it failed with a retryable error and will be
 * routed again after a backoff (sent once per retry; the task's state is `retrying` until then).
 * @typedef {object} TaskRetry
 * @property {number} after_ms  Milliseconds until it is routed again.
 * @property {string} code  The error that failed the last routing.
 * @property {string} message  All of the above, for people.
 * @property {number} routing  The routing to come: 2 for the first retry.
 * @property {number} routings  Routings the retry policy gives a task in all.
 */

/**
 * Every name a task's state may have. A routed task (one the router gives to an agent) moves
 * requested → queued | routed → accepted → running → completed | failed | cancelled | timed_out,
 * with retrying between routings; a planned workflow task moves pending → claimed → in_progress →
 * completed | failed (blocked on the way, cancelled when its plan is replaced); a workflow's root
 * task has its workflow's status (planning, in_progress, blocked, completed, failed).
 * @typedef {'requested' | 'queued' | 'routed' | 'accepted' | 'running' | 'retrying' | 'planning' | 'pending' | 'claimed' | 'in_progress' | 'blocked' | 'completed' | 'failed' | 'cancelled' | 'timed_out'} TaskState
 */

/**
 * Where a planned task is. Moves: pending → claimed (claim); claimed → in_progress | completed |
 * failed | blocked | pending (release, lease lost); in_progress → completed | failed | blocked |
 * pending; blocked → in_progress | pending | failed; completed and failed are final.
 * @typedef {'pending' | 'claimed' | 'in_progress' | 'completed' | 'failed' | 'blocked'} TaskStatus
 */

/**
 * A planned task.
 * @typedef {object} TaskSummary
 * @property {string | null} [agent_id]  The holder (claimed, in progress, blocked) or, once ended, who ended it.
 * @property {Array<string>} depends_on
 * @property {string} description
 * @property {string | null} [error]
 * @property {string} id
 * @property {string} name
 * @property {number} order
 * @property {string | null} [outcome]
 * @property {string | null} [parallel_group]
 * @property {string | null} [reason]
 * @property {TaskStatus} status
 * @property {string} workflow_id
 */

/**
 * A thread as its list shows it.
 * @typedef {object} ThreadSummary
 * @property {number} first_seq
 * @property {string} first_ts
 * @property {number} last_seq
 * @property {string} last_ts
 * @property {number} messages  Events in the thread.
 * @property {Array<string>} participants  Who wrote in it (at most 32, first come first).
 * @property {string} run_id  The run of its first event (the daemon's notices: the system run).
 * @property {string} thread_id
 * @property {string} title  Its first chat message's or request's text.
 */

/**
 * A page of a list.
 * @typedef {object} ThreadSummaryPage
 * @property {number} as_of  The log position the pages of this listing are read at.
 * @property {Array<ThreadSummary>} items
 * @property {string | null} [next]  Pass as `cursor` for the next page; absent on the last one.
 */

/**
 * `task.timeout`: the task ran past its agent's `max_runtime_sec`.
 * @typedef {object} Timeout
 * @property {string} message
 */

/**
 * A tool a server offers.
 * @typedef {object} Tool
 * @property {ToolAnnotations} annotations  What the server says the tool does (MCP's hints; absent hints take MCP's defaults).
 * @property {string | null} [description]
 * @property {any} input_schema  The JSON Schema of its arguments.
 * @property {string} name  `mcp:files/read_file`: what a `tool.call` names.
 * @property {string | null} [title]
 */

/**
 * What a tool does, as its server describes it.
 * @typedef {object} ToolAnnotations
 * @property {boolean} destructive  It may destroy or overwrite (meaningful when not read-only).
 * @property {boolean} idempotent  Calling it again with the same arguments has no further effect.
 * @property {boolean} open_world  It reaches beyond the server (the web, other systems).
 * @property {boolean} read_only  It changes nothing.
 */

/**
 * `tool.call`: a call of a tool, named as its adapter serves it (`mcp:<server>/<tool>`).
 * @typedef {object} ToolCall
 * @property {Record<string, any>} [args]  The tool's arguments, an object (`arguments` is read too).
 * @property {string} tool
 */

/**
 * `task.error` and `tool.error` as the daemon sends them (and as agents should).
 * @typedef {object} ToolErrorPayload
 * @property {string} code
 * @property {any} [details]  More about it (a refused tool call: the tool and the call's id).
 * @property {string | null} [error]  A workflow task's failure as its holder worded it (the same as `message`).
 * @property {string} message
 * @property {boolean} retryable  Whether the same request may succeed later.
 */

/**
 * `tool.result` from the daemon: what the tool answered, to the caller.
 * @typedef {object} ToolResult
 * @property {string} call_id  The `tool.call`'s message id.
 * @property {Array<any>} content  The tool's content blocks as it gave them (MCP: text, image, audio, resource links and resources); a block over 32 KiB is stored as an artifact (attached to the message too) and shown as `{"type": "artifact", "ref": "artifact:sha256:…", "media_type", "size", "replaces"}`.
 * @property {number} duration_ms  From the start of the call to its answer.
 * @property {any} [structured_content]  The tool's structured answer, when it gives one.
 * @property {string} tool
 */

/**
 * One server of tools (an MCP server the operator declared), its state and its tools.
 * @typedef {object} ToolServer
 * @property {string} adapter  The adapter that serves it (`mcp`).
 * @property {string | null} [error]  Why it is not ready, when it is not.
 * @property {string} name  `mcp:files`: what an allowlist names to allow all its tools.
 * @property {number} restarts  Times it was started again after it stopped or failed.
 * @property {ServerState} state
 * @property {Array<Tool>} tools
 * @property {string} transport  How it is reached: `stdio` (a command the operator declared) or `http`.
 */

/**
 * `chat.system` `clutch.tool.started.v1`, on the call's run, thread and task: the daemon is making
 * the call. It is stored (durably) before the call is made, so after a crash a call with this and
 * no answer is known to be in doubt, and one without it is known not to have been made.
 * @typedef {object} ToolStarted
 * @property {string} adapter  The adapter making it.
 * @property {number} attempt  1 for the first try; more when a read-only or idempotent call in doubt is made again.
 * @property {string} call_id
 * @property {string} tool
 */

/**
 * The tools the daemon's adapters serve, server by server.
 * @typedef {object} Tools
 * @property {Array<ToolServer>} servers
 */

/**
 * Distributed tracing ids.
 * @typedef {object} Trace
 * @property {string | null} [parent_span_id]
 * @property {string | null} [span_id]
 * @property {string} trace_id
 */

/**
 * @typedef {'sandbox' | 'prod'} TrustLevel
 */

/**
 * What an agent, a run or a task has used so far.
 * @typedef {object} Usage
 * @property {number} cost_usd
 * @property {number} requests  Requests (LLM or tool calls).
 * @property {number} tokens  LLM tokens (input and output).
 * @property {number} wall_time_sec  Seconds of work: an agent's (or a task's) tasks from acceptance to end; a run's first to last event.
 */

/**
 * `task.request` `clutch.workflow.v1`: a workflow's root task (a new run).
 * @typedef {object} Workflow
 * @property {string | null} [description]
 * @property {string} name
 * @property {string | null} [source]
 */

/**
 * `workflow_get`: the workflow, its plan, tasks and workspaces.
 * @typedef {object} WorkflowDetail
 * @property {number} completed_tasks
 * @property {string} created_at
 * @property {string} created_by
 * @property {string | null} [description]
 * @property {string} id  The workflow id: its run id.
 * @property {string} name
 * @property {string | null} [plan_summary]
 * @property {string} root_task_id  The task that stands for the whole workflow (its planned tasks are its children).
 * @property {string | null} [source]
 * @property {WorkflowStatus} status
 * @property {Array<TaskSummary>} tasks
 * @property {string} thread_id
 * @property {number} total_tasks
 * @property {string} updated_at
 * @property {Array<Workspace>} workspaces
 */

/**
 * A workflow's status, derived from its tasks: `planning` (no plan yet), `in_progress`,
 * `blocked` (nothing is held or can be claimed, and some task is blocked), `completed` (every task
 * completed) or `failed` (a task failed and no other task can still run).
 * @typedef {'planning' | 'in_progress' | 'blocked' | 'completed' | 'failed'} WorkflowStatus
 */

/**
 * A git workspace of a workflow.
 * @typedef {object} Workspace
 * @property {string} base_branch
 * @property {string} branch
 * @property {string} created_at
 * @property {string} id
 * @property {string | null} [merge_commit]
 * @property {string | null} [path]  The worktree's directory (absent when no worktree was made).
 * @property {string} repo_path
 * @property {WorkspaceStatus} status
 * @property {Array<string>} task_ids
 * @property {string} updated_at
 * @property {string} workflow_id
 * @property {boolean} worktree  Whether the worktree directory exists (false once cleaned up).
 */

/**
 * A workspace's status.
 * @typedef {'active' | 'merged' | 'abandoned'} WorkspaceStatus
 */

export {};
