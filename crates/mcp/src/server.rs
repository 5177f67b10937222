//! The MCP server of one profile: `initialize`/`server/discover` info, `tools/list` from the
//! registry and `tools/call` into the engine. rmcp does the protocol (both eras); this does the tools.

use std::sync::Arc;

use clutch_core::Engine;
use clutch_core::access::Caller;
use clutch_proto::error::quote;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock, GetTaskParams,
    GetTaskResult, Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::Profile;
use crate::registry::Registry;
use crate::tools::Context;

/// What the server tells a client about itself in `initialize` and `server/discover`.
const INSTRUCTIONS: &str = "Clutch coordinates a team of agents. Start with agent_register (name, runtime) \
and keep its id; call agent_heartbeat within next_heartbeat_ms while you work; call agent_unregister when \
you stop. Failed calls answer isError with {code, message, recoverable, suggestion}: when recoverable is \
true, follow the suggestion and call again.";

/// What a Clutch MCP server declares: tools, MCP's tasks extension when it serves `tasks/get` and
/// `tasks/cancel` (the daemon does, for long work such as a position's session; the stdio bridge
/// does not), and logging (`logging/setLevel` is accepted; no log messages are sent). It offers no
/// prompts or resources, so it does not announce them; their methods are unknown here.
pub(crate) fn capabilities(tasks: bool) -> ServerCapabilities {
    #[allow(deprecated)] // logging is deprecated at 2026-07-28, still part of 2025-11-25
    let builder = ServerCapabilities::builder().enable_logging().enable_tools();
    if tasks { builder.enable_tasks().build() } else { builder.build() }
}

/// The methods of what [`capabilities`] leaves out, answered as unknown (rmcp's defaults would answer
/// the lists as empty, which tells a client the server offers them after all). In a `ServerHandler`.
macro_rules! undeclared {
    () => {
        async fn list_prompts(
            &self,
            _request: Option<rmcp::model::PaginatedRequestParams>,
            _context: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> std::result::Result<rmcp::model::ListPromptsResult, rmcp::ErrorData> {
            Err(rmcp::ErrorData::method_not_found::<rmcp::model::ListPromptsRequestMethod>())
        }

        async fn list_resources(
            &self,
            _request: Option<rmcp::model::PaginatedRequestParams>,
            _context: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> std::result::Result<rmcp::model::ListResourcesResult, rmcp::ErrorData> {
            Err(rmcp::ErrorData::method_not_found::<rmcp::model::ListResourcesRequestMethod>())
        }

        async fn list_resource_templates(
            &self,
            _request: Option<rmcp::model::PaginatedRequestParams>,
            _context: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> std::result::Result<rmcp::model::ListResourceTemplatesResult, rmcp::ErrorData> {
            Err(rmcp::ErrorData::method_not_found::<rmcp::model::ListResourceTemplatesRequestMethod>())
        }

        async fn complete(
            &self,
            _request: rmcp::model::CompleteRequestParams,
            _context: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> std::result::Result<rmcp::model::CompleteResult, rmcp::ErrorData> {
            Err(rmcp::ErrorData::method_not_found::<rmcp::model::CompleteRequestMethod>())
        }
    };
}
pub(crate) use undeclared;

/// One profile's MCP server over the engine. Cheap to clone (the transport makes one per request).
#[derive(Clone)]
pub struct Server {
    engine: Engine,
    registry: Arc<Registry>,
    profile: Profile,
}

impl Server {
    pub fn new(engine: Engine, profile: Profile) -> Server {
        Server::with_registry(engine, Arc::new(Registry::new()), profile)
    }

    pub(crate) fn with_registry(engine: Engine, registry: Arc<Registry>, profile: Profile) -> Server {
        Server { engine, registry, profile }
    }
}

impl ServerHandler for Server {
    crate::server::undeclared!();

    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(capabilities(true));
        info.server_info = Implementation::new("clutch", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(INSTRUCTIONS.into());
        info
    }

    /// Accepted, so that 2025-11-25 clients may set it; Clutch sends no log messages over MCP.
    #[allow(deprecated)] // logging is deprecated at 2026-07-28
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.registry.list(self.profile).to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.registry.find(self.profile, name).map(|t| t.definition.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller_of(&context);
        let tasks = context.client_capabilities().is_some_and(|c| c.supports_tasks());
        self.call(request, caller, tasks).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        crate::tasks::get(&self.engine, &caller_of(&context), &request.task_id).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        crate::tasks::cancel(&self.engine, &caller_of(&context), &request.task_id).await
    }
}

/// Who calls: what the daemon's bearer-token layer put in the HTTP request's extensions.
fn caller_of(context: &RequestContext<RoleServer>) -> Caller {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .unwrap_or_default()
}

/// A tool's answer as `CallToolResult::structured` makes it (the value, and its JSON in a text
/// block), with the text written by `serde_json::to_string` rather than through `Display`, which
/// writes each token through a `fmt::Formatter`: the same bytes for a third of the instructions.
fn structured(value: serde_json::Value) -> Result<CallToolResult, ErrorData> {
    let text = serde_json::to_string(&value).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    Ok(result)
}

impl Server {
    /// `tools/call` as `caller`: the one implementation behind rmcp's handler and the fast path. An
    /// unknown tool is a protocol error; a refused call is a tool result with `isError: true`. Who
    /// may call the tool is decided on the raw arguments, before they are parsed (`Tool::admit`).
    /// With `tasks` (the client declared MCP's tasks extension), a tool that runs as a task answers
    /// an MCP task of its answer's `task_id`.
    pub(crate) async fn call(
        &self,
        request: CallToolRequestParams,
        caller: Caller,
        tasks: bool,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = self.registry.find(self.profile, &request.name) else {
            let endpoint = self.profile.path();
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`: tools/list names the tools {endpoint} offers", quote(&request.name)),
                None,
            ));
        };
        let arguments = request.arguments.unwrap_or_default();
        let answer = match tool.admit(&caller, &arguments) {
            Ok(()) => tool.call(Context { engine: self.engine.clone(), caller }, arguments).await,
            Err(refusal) => Err(refusal),
        };
        let result = match answer {
            Ok(answer) if tasks && tool.as_task => {
                if let Some(task_id) = answer.get("task_id").and_then(serde_json::Value::as_str) {
                    return Ok(CallToolResponse::Task(crate::tasks::created(task_id)));
                }
                structured(answer)?
            }
            Ok(answer) => structured(answer)?,
            Err(refusal) => {
                tracing::debug!(tool = %request.name, code = refusal.code.as_str(), "tool call refused");
                crate::error::tool_result(&refusal)
            }
        };
        Ok(result.into())
    }

    /// The tool `name` as this server's profile offers it.
    pub(crate) fn tool(&self, name: &str) -> Option<&crate::tools::Tool> {
        self.registry.find(self.profile, name)
    }
}
