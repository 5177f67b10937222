//! The daemon's configuration and how it is layered: defaults, then `clutch.toml`, then `CLUTCH_*`
//! variables, then flags; validated once, on load, with errors that name the key and where it came from.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::cli::ConfigArgs;

/// The config file read from the working directory when `--config` is not given.
pub const FILE_NAME: &str = "clutch.toml";

/// The effective configuration. Its TOML form is the config file's format. A component's section is
/// its `Options` as it is (`engine`, `log_service`, `retention`): defined once, there.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address the HTTP API listens on.
    pub listen: SocketAddr,
    /// Directory for the SQLite database and artifacts.
    pub data_dir: PathBuf,
    /// The store; see [`Database`]. Absent: SQLite in `data_dir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-secret" = true))]
    pub db: Option<String>,
    /// The directory of the policy files (`org.yaml`, `workflows.yaml`). Absent: no policy (no tokens,
    /// no required signatures, no workflows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_dir: Option<PathBuf>,
    /// The daemon's log filter (tracing's `EnvFilter` syntax).
    pub log: String,
    pub limits: Limits,
    pub log_service: clutch_core::log::Options,
    pub stream: Stream,
    pub http: Http,
    pub engine: clutch_core::engine::Options,
    pub mcp: Mcp,
    pub outbound: Outbound,
    pub workspaces: Workspaces,
    pub positions: clutch_runtime::positions::Options,
    pub retention: clutch_core::retention::Options,
    pub a2a: A2a,
    /// The MCP servers whose tools agents may call (`[[mcp_servers]]`: `name`, and `command` with
    /// `args` and `env`, or `url` with `headers`; `connect_timeout_ms`, `call_timeout_ms`). File only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<clutch_tools::ServerConfig>,
    /// Inbound webhooks (`[[hooks]]`: `name`, `secret`, `signature_header`, and the `message` each
    /// signed body becomes at `POST /v1/hooks/<name>`). File only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<clutch_tools::HookConfig>,
    /// Outbound webhooks (`[[webhooks]]`: `name`, `url`, `types`, `run_id`, `from`, `to`, `secret`):
    /// the messages each selects are POSTed there in order. File only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<clutch_tools::WebhookConfig>,
    /// LLM providers (`[[providers]]`: `name`, `kind` = "anthropic" or "openai", `base_url`,
    /// `api_key_env` (the variable holding the key, never the key), `model`, `max_tokens`, `stream`,
    /// timeouts, retries, `requests_per_minute`, `tokens_per_minute`, `prices`). File only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub providers: Vec<clutch_runtime::provider::Config>,
    /// Built-in LLM agents (`[[llm_agents]]`: `name`, `provider`, `system`, `capabilities`, `tools`,
    /// `model`, limits and budgets): Clutch agents the router gives tasks to. File only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub llm_agents: Vec<clutch_runtime::agent::Config>,
}

/// Where the daemon may send requests whose URL came from someone else's data (agents' endpoints,
/// push). Public addresses only, unless allowed here (see docs/security.md).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Outbound {
    /// Networks (`10.0.0.0/8`), addresses or host names (`agents.internal`, `*.corp.example`) allowed
    /// besides public addresses (`CLUTCH_OUTBOUND_ALLOW`: comma-separated).
    pub allow: Vec<String>,
    /// Allow loopback targets (127.0.0.0/8, ::1, `localhost`): for local development.
    pub allow_loopback: bool,
    /// Host names pinned to addresses, as curl's `--resolve` does (`"agents.example" = ["10.0.0.7"]`);
    /// the addresses are checked like resolved ones. File only.
    pub resolve: std::collections::BTreeMap<String, Vec<String>>,
}

/// Where workspaces (git worktrees) and the repositories they come from may be.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Workspaces {
    /// Directories that paths callers name must stay inside, after `..` and symlinks are resolved;
    /// empty: the data directory (`CLUTCH_WORKSPACES_ROOTS`: separated like `PATH`).
    #[schemars(extend("x-env" = "paths"))]
    pub roots: Vec<PathBuf>,
}

/// Who may reach the daemon through a browser, on every route (the API, the live stream, the web
/// UI, MCP, A2A, hooks): see docs/security.md. Requests whose `Host` is not one of the daemon's names
/// are refused (`HOST_NOT_ALLOWED`, against DNS rebinding), and so are requests from web pages other
/// than the daemon's own (`ORIGIN_NOT_ALLOWED`). Clients that are not browsers send no `Origin`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Http {
    /// Names (`hub.example.com`, `*.corp.example`) and addresses the daemon answers to besides
    /// loopback ones and `a2a.public_url`'s host, at any port (`CLUTCH_HTTP_ALLOWED_HOSTS`:
    /// comma-separated). Listening beyond loopback, every address is served; names still need listing.
    pub allowed_hosts: Vec<String>,
    /// Web pages allowed to call the daemon besides its own (same origin) and `a2a.public_url`'s,
    /// like `https://dashboard.example.com` (`CLUTCH_HTTP_ALLOWED_ORIGINS`: comma-separated).
    pub allowed_origins: Vec<String>,
}

/// The MCP endpoints (`/mcp`, `/mcp/worker`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Mcp {
    /// Deprecated: `http.allowed_origins`, which covers every route, MCP's included. Still read
    /// (`CLUTCH_MCP_ALLOWED_ORIGINS`): its entries are moved there on load, with a warning.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_origins: Vec<String>,
}

/// The A2A face: the hub as one A2A agent, and who may call it (seed 003's trust tiers).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct A2a {
    /// The hub's address as A2A clients reach it, for its card (absent: each request's `Host`); its
    /// host is one of the daemon's names and its origin one of its own (see `http`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// Callers with no key and no token: `refuse`, `screen` (their messages go to agents with
    /// `screening_skill`, whatever they ask for) or `allow`. Absent: allowed while no key and no API
    /// token is configured, else refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unauthenticated: Option<String>,
    /// The skill of the agents that screen strangers (with `unauthenticated = "screen"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screening_skill: Option<String>,
    /// Partners' API keys (`[[a2a.keys]]`: `name`, `key_env` (the variable holding the key, never
    /// the key), `skills` it may ask for; none: any). Sent as `X-API-Key` or as a bearer token.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<A2aKey>,
    /// Run the conformance agent, `agent:a2a-conformance`, which works every task given to it as the
    /// official A2A TCK expects (`scripts/test-a2a-tck`): for a hub kept for the kit only.
    pub conformance: bool,
    /// The card a request naming no A2A version gets at `/.well-known/agent-card.json`: `1.0` (absent)
    /// or `0.3`, for a hub whose clients are 0.3 SDKs (they read that path and send no version).
    /// `A2A-Version` always gets its version's card, and `/.well-known/agent.json` the 0.3 card.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unversioned_card: Option<String>,
}

/// A partner's A2A key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct A2aKey {
    /// Names the partner: its tasks are sent as `user:a2a.<name>`.
    pub name: String,
    /// The environment variable holding the key (never the key itself).
    pub key_env: String,
    /// The skills the partner may ask for; empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body the API accepts.
    pub body_bytes: u64,
    /// Largest artifact stored.
    pub artifact_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Stream {
    /// Time between keep-alive frames on idle streams.
    #[serde(with = "clutch_core::options::duration")]
    #[schemars(with = "clutch_core::options::Text")]
    pub keepalive: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 7700)),
            data_dir: PathBuf::from(".clutch"),
            db: None,
            config_dir: None,
            // rmcp logs three `info` lines for each MCP request it serves (a service started and
            // ended per stateless request): the daemon's own lines stay at info, the library's at warn.
            log: "info,rmcp=warn".into(),
            limits: Limits::default(),
            log_service: clutch_core::log::Options::default(),
            stream: Stream::default(),
            http: Http::default(),
            engine: clutch_core::engine::Options::default(),
            mcp: Mcp::default(),
            outbound: Outbound::default(),
            workspaces: Workspaces::default(),
            positions: clutch_runtime::positions::Options::default(),
            retention: clutch_core::retention::Options::default(),
            a2a: A2a::default(),
            mcp_servers: Vec::new(),
            hooks: Vec::new(),
            webhooks: Vec::new(),
            providers: Vec::new(),
            llm_agents: Vec::new(),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits { body_bytes: 8 << 20, artifact_bytes: 64 << 20 }
    }
}

impl Default for Stream {
    fn default() -> Self {
        Stream { keepalive: Duration::from_secs(15) }
    }
}

/// Where the events and artifacts live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// SQLite in this directory.
    Sqlite(PathBuf),
    /// PostgreSQL at this URL.
    Postgres(String),
}

/// A key of the configuration that the environment can set, as [`Config`]'s schema describes it:
/// every field that is not a section or a map is one.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    /// `engine.max_deliveries`.
    path: String,
    kind: Kind,
    /// Its value may hold a secret (`x-secret` in the schema): never echoed, even in an error.
    secret: bool,
    /// A duration (`format: duration`): text such as `"30s"`. Its keys of old, in a unit
    /// (`accept_timeout_ms`), are still read, with a warning.
    duration: bool,
    /// It may be absent (`null` among its types).
    optional: bool,
}

/// How a variable's text becomes the key's value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// Text as it is; empty text unsets an optional key.
    Text,
    Number,
    /// `true`, `1`, `false` or `0`.
    Bool,
    /// Comma-separated.
    List,
    /// Separated like `PATH` (`x-env: paths` in the schema).
    Paths,
}

/// The keys the environment can set (`engine.accept_timeout_ms`), for the config reference.
pub fn env_keys() -> Vec<String> {
    keys().into_iter().map(|k| k.path).collect()
}

/// Every key the environment can set, from [`Config`]'s fields (its JSON Schema): sections are
/// walked, maps (`outbound.resolve`) are left to the file. Each is defined once, by its field.
fn keys() -> Vec<Key> {
    let schema = schemars::schema_for!(Config).to_value();
    let mut out = Vec::new();
    walk(&schema, &schema, "", &mut out);
    out
}

fn walk(root: &serde_json::Value, schema: &serde_json::Value, prefix: &str, out: &mut Vec<Key>) {
    let resolve = |s: &serde_json::Value| -> serde_json::Value {
        match s.get("$ref").and_then(|r| r.as_str()).and_then(|r| r.strip_prefix("#/$defs/")) {
            Some(name) => root["$defs"][name].clone(),
            None => s.clone(),
        }
    };
    let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) else { return };
    for (name, field) in properties {
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        let field = resolve(field);
        if field.get("properties").is_some() {
            walk(root, &field, &path, out);
            continue;
        }
        let types: Vec<&str> = match &field["type"] {
            serde_json::Value::String(t) => vec![t.as_str()],
            serde_json::Value::Array(ts) => ts.iter().filter_map(|t| t.as_str()).collect(),
            _ => Vec::new(),
        };
        let items = field.get("items").map(resolve);
        let of_tables = items.is_some_and(|i| i.get("properties").is_some() || i["type"] == "object");
        let kind = if types.contains(&"object") || of_tables {
            continue; // a map or a list of tables: file only
        } else if types.contains(&"array") && field.get("x-env").and_then(|x| x.as_str()) == Some("paths") {
            Kind::Paths
        } else if types.contains(&"array") {
            Kind::List
        } else if types.contains(&"integer") {
            Kind::Number
        } else if types.contains(&"boolean") {
            Kind::Bool
        } else {
            Kind::Text
        };
        let secret = field.get("x-secret").and_then(|x| x.as_bool()).unwrap_or(false);
        let duration = field.get("format").and_then(|f| f.as_str()) == Some("duration");
        out.push(Key { path, kind, secret, duration, optional: types.contains(&"null") });
    }
}

impl Key {
    /// The variable that sets it: `CLUTCH_ENGINE_MAX_DELIVERIES`.
    fn var(&self) -> String {
        env_var(&self.path)
    }

    /// `text` as the key's JSON value in the config's serialized form.
    fn parse(&self, text: &str) -> anyhow::Result<serde_json::Value> {
        use serde_json::Value;
        Ok(match self.kind {
            Kind::Text if text.is_empty() => Value::Null,
            Kind::Text => Value::from(text),
            Kind::Number => Value::from(
                text.trim()
                    .parse::<u64>()
                    .map_err(|_| anyhow::anyhow!("expected a whole number, got {:?}", clip(text)))?,
            ),
            Kind::Bool => Value::from(match text.trim() {
                "true" | "1" => true,
                "false" | "0" => false,
                _ => bail!("expected true or false, got {:?}", clip(text)),
            }),
            Kind::List => Value::from(list(text)),
            Kind::Paths => Value::from(
                std::env::split_paths(text)
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect::<Vec<_>>(),
            ),
        })
    }
}

/// A loaded configuration and the file it came from, if any.
#[derive(Debug)]
pub struct Loaded {
    pub config: Config,
    pub file: Option<PathBuf>,
    /// Deprecated keys it used, each with what to write instead: for a warning on stderr.
    pub deprecated: Vec<String>,
}

/// Loads the layers in order and validates the result. `env` looks up variables (the process
/// environment in the binary, a map in tests); `cwd` is where `clutch.toml` is looked for.
pub fn load(
    flags: &ConfigArgs,
    log_flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: &Path,
) -> anyhow::Result<Loaded> {
    let file = match &flags.config {
        Some(path) => Some(path.clone()),
        None => Some(cwd.join(FILE_NAME)).filter(|p| p.is_file()),
    };
    let mut deprecated = Vec::new();
    let mut config = match &file {
        Some(path) => read_file(path, &mut deprecated)?,
        None => Config::default(),
    };

    for key in keys() {
        let var = key.var();
        if let Some((old, value)) = key.old_var(env).filter(|_| env(&var).is_none()) {
            deprecated.push(format!("{old} is deprecated: set {var}={value:?} instead"));
            config = config.set(&key, &value).with_context(|| format!("invalid environment variable {old}"))?;
        }
        if let Some(value) = env(&var) {
            let shown =
                if key.secret { "(not shown: it may hold a secret)".to_owned() } else { format!("{:?}", clip(&value)) };
            config = config.set(&key, &value).with_context(|| format!("invalid environment variable {var}={shown}"))?;
        }
    }
    if env("CLUTCH_LOG").is_none()
        && let Some(value) = env("RUST_LOG").filter(|v| !v.is_empty())
    {
        config.log = value;
    }

    if let Some(listen) = flags.listen {
        config.listen = listen;
    }
    if let Some(dir) = &flags.data_dir {
        config.data_dir = dir.clone();
    }
    if let Some(db) = &flags.db {
        config.db = Some(db.clone()).filter(|s| !s.is_empty());
    }
    if let Some(dir) = &flags.config_dir {
        config.config_dir = Some(dir.clone()).filter(|d| !d.as_os_str().is_empty());
    }
    if flags.a2a_conformance {
        config.a2a.conformance = true;
    }
    if let Some(log) = log_flag {
        config.log = log.to_owned();
    }

    // A check may quote what it refuses (an origin, a filter, an allow entry) at any length.
    config.validate().map_err(|e| anyhow::anyhow!("invalid configuration: {}", clip(&format!("{e:#}"))))?;
    deprecated.extend(config.migrate());
    Ok(Loaded { config, file, deprecated })
}

/// `CLUTCH_LIMITS_BODY_BYTES` for `limits.body_bytes`.
pub fn env_var(key: &str) -> String {
    format!("CLUTCH_{}", key.replace('.', "_").to_ascii_uppercase())
}

/// The keys durations had before they were written as text, and their units: `accept_timeout_ms =
/// 30000` is `accept_timeout = "30000ms"`; a 0 of an optional one is its absence.
const OLD_UNITS: [(&str, &str); 3] = [("_ms", "ms"), ("_secs", "s"), ("_days", "d")];

impl Key {
    /// A variable of old that sets this duration (`CLUTCH_ENGINE_ACCEPT_TIMEOUT_MS`), and the text
    /// it means now.
    fn old_var(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)> {
        if !self.duration {
            return None;
        }
        OLD_UNITS.iter().find_map(|(suffix, unit)| {
            let old = env_var(&format!("{}{suffix}", self.path));
            let value = env(&old)?;
            let text = match value.trim().parse::<u64>() {
                Ok(0) if self.optional => String::new(),
                Ok(n) => format!("{n}{unit}"),
                // Not a number: said as it was, for the duration's own error.
                Err(_) => value,
            };
            Some((old, text))
        })
    }
}

/// Moves each duration key of old in `table` to its key of now (`accept_timeout_ms = 30000` to
/// `accept_timeout = "30000ms"`), noting each in `notes`.
fn migrate_durations(table: &mut toml::Table, notes: &mut Vec<String>) -> anyhow::Result<()> {
    for key in keys().into_iter().filter(|k| k.duration) {
        let (section, name) = key.path.rsplit_once('.').unwrap_or(("", key.path.as_str()));
        let mut at = Some(&mut *table);
        for part in section.split('.').filter(|p| !p.is_empty()) {
            at = at.and_then(|t| t.get_mut(part)).and_then(|v| v.as_table_mut());
        }
        let Some(at) = at else { continue };
        for (suffix, unit) in OLD_UNITS {
            let old = format!("{name}{suffix}");
            let Some(value) = at.remove(&old) else { continue };
            let whole = if section.is_empty() { old.clone() } else { format!("{section}.{old}") };
            let n = value
                .as_integer()
                .filter(|n| *n >= 0)
                .ok_or_else(|| anyhow::anyhow!("`{whole}` must be a whole number of its unit ({unit})"))?;
            if at.contains_key(name) {
                bail!("`{whole}` and `{}` set the same key: keep `{}` only", key.path, key.path);
            }
            if n == 0 && key.optional {
                notes.push(format!("`{whole}` is deprecated: leave `{}` out instead of 0", key.path));
            } else {
                notes.push(format!("`{whole}` is deprecated: write `{} = \"{n}{unit}\"` instead", key.path));
                at.insert(name.to_owned(), toml::Value::String(format!("{n}{unit}")));
            }
        }
    }
    Ok(())
}

fn read_file(path: &Path, notes: &mut Vec<String>) -> anyhow::Result<Config> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read the config file {}", path.display()))?;
    // toml's own rendering quotes the offending line, which may hold a secret (`db`): say where
    // and why only.
    let invalid = |e: toml::de::Error| {
        let at = e.span().map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}: ")
        });
        anyhow::anyhow!(
            "invalid config file {}: {}{}",
            path.display(),
            at.unwrap_or_default(),
            clip(e.message().trim())
        )
    };
    let mut table: toml::Table = toml::from_str(&text).map_err(invalid)?;
    let before = notes.len();
    migrate_durations(&mut table, notes).map_err(|e| anyhow::anyhow!("invalid config file {}: {e}", path.display()))?;
    if notes.len() == before {
        // Read from the text, so that an error says where.
        return toml::from_str(&text).map_err(invalid);
    }
    table.try_into().map_err(invalid)
}

impl Config {
    /// Moves what deprecated keys say to the keys that replaced them, and says so: `mcp.allowed_origins`
    /// joins `http.allowed_origins`. (An origin trusted to drive the MCP tools, which write, may read
    /// the API as well: the one list now covers every route.)
    fn migrate(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        let moved = std::mem::take(&mut self.mcp.allowed_origins);
        if !moved.is_empty() {
            notes.push(
                "`mcp.allowed_origins` (CLUTCH_MCP_ALLOWED_ORIGINS) is deprecated: its origins now apply to every \
                 route, as `http.allowed_origins` (CLUTCH_HTTP_ALLOWED_ORIGINS); move them there"
                    .to_owned(),
            );
            for origin in moved {
                if !self.http.allowed_origins.contains(&origin) {
                    self.http.allowed_origins.push(origin);
                }
            }
        }
        notes
    }

    /// The config with `key` set from its text form.
    fn set(&self, key: &Key, text: &str) -> anyhow::Result<Config> {
        let mut value = serde_json::to_value(self).context("the config serializes")?;
        let mut at = &mut value;
        for part in key.path.split('.') {
            at = at
                .as_object_mut()
                .map(|o| o.entry(part).or_insert(serde_json::Value::Null))
                .context("a key's sections are objects")?;
        }
        *at = key.parse(text)?;
        // Deserializing checks the rest (an address, a number's range); its message may quote the value.
        Config::deserialize(value).map_err(|e| {
            let why = e.to_string();
            let why = if key.secret { "not a valid value".to_owned() } else { clip(&why).into_owned() };
            anyhow::anyhow!("{why}")
        })
    }

    /// Checks what types alone do not.
    fn validate(&self) -> anyhow::Result<()> {
        for (key, value) in
            [("limits.body_bytes", self.limits.body_bytes), ("limits.artifact_bytes", self.limits.artifact_bytes)]
        {
            if value == 0 {
                bail!("`{key}` must be at least 1");
            }
        }
        let sections = [
            ("engine", self.engine.check()),
            ("log_service", self.log_service.check()),
            ("retention", self.retention.check()),
            ("positions", self.positions.check()),
            ("stream", clutch_core::options::nonzero("keepalive", self.stream.keepalive)),
        ];
        for (section, checked) in sections {
            checked.map_err(|e| anyhow::anyhow!("`{section}.{}`: {}", e.key, e.why))?;
        }
        if self.data_dir.as_os_str().is_empty() {
            bail!("`data_dir` must not be empty");
        }
        tracing_subscriber::EnvFilter::try_new(&self.log)
            .map_err(|e| anyhow::anyhow!("`log` = {:?} is not a valid log filter: {e}", self.log))?;
        self.database()?;
        let keys = [
            ("http.allowed_hosts", &self.http.allowed_hosts, clutch_gateway::browser::check_host as fn(&str) -> _),
            ("http.allowed_origins", &self.http.allowed_origins, clutch_gateway::browser::check_origin),
            ("mcp.allowed_origins", &self.mcp.allowed_origins, clutch_gateway::browser::check_origin),
        ];
        for (key, entries, check) in keys {
            for entry in entries {
                check(entry).map_err(|why| anyhow::anyhow!("`{key}`: {why}"))?;
            }
        }
        if let Some(url) = &self.a2a.public_url {
            clutch_gateway::browser::check_public_url(url).map_err(|why| anyhow::anyhow!("`a2a.public_url`: {why}"))?;
        }
        self.outbound_policy()?;
        let mut names = std::collections::BTreeSet::new();
        for server in &self.mcp_servers {
            server.check().map_err(|why| anyhow::anyhow!("`mcp_servers`: {}", clip(&why.to_string())))?;
            if !names.insert(&server.name) {
                bail!("`mcp_servers`: two servers are named {:?}", clip(&server.name));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for hook in &self.hooks {
            hook.check().map_err(|why| anyhow::anyhow!("`hooks`: {}", clip(&why.to_string())))?;
            if !names.insert(&hook.name) {
                bail!("`hooks`: two hooks are named {:?}", clip(&hook.name));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for provider in &self.providers {
            provider.check().map_err(|why| anyhow::anyhow!("`providers`: {}", clip(&why.to_string())))?;
            if !names.insert(&provider.name) {
                bail!("`providers`: two providers are named {:?}", clip(&provider.name));
            }
        }
        let mut agents = std::collections::BTreeSet::new();
        for agent in &self.llm_agents {
            agent.check().map_err(|why| anyhow::anyhow!("`llm_agents`: {}", clip(&why.to_string())))?;
            if !agents.insert(&agent.name) {
                bail!("`llm_agents`: two agents are named {:?}", clip(&agent.name));
            }
            if !names.contains(&agent.provider) {
                bail!(
                    "`llm_agents`: {} calls provider {:?}, which is not declared: add a [[providers]] entry with that name",
                    clip(&agent.name),
                    clip(&agent.provider)
                );
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for webhook in &self.webhooks {
            webhook.check().map_err(|why| anyhow::anyhow!("`webhooks`: {}", clip(&why.to_string())))?;
            if !names.insert(&webhook.name) {
                bail!("`webhooks`: two webhooks are named {:?}", clip(&webhook.name));
            }
        }
        Ok(())
    }

    /// Which `Host`s and browser `Origin`s the daemon serves (see `clutch_gateway::browser`): its
    /// loopback names, `http.*`, the public URL's host and origin, and every address when it listens
    /// beyond loopback.
    pub fn browser_policy(&self) -> anyhow::Result<clutch_gateway::browser::Policy> {
        let options = clutch_gateway::browser::Options {
            allowed_hosts: self.http.allowed_hosts.clone(),
            allowed_origins: self.http.allowed_origins.clone(),
            public_url: self.a2a.public_url.clone(),
            any_address: !self.listen.ip().is_loopback(),
        };
        clutch_gateway::browser::Policy::new(&options).map_err(|why| anyhow::anyhow!("{why}"))
    }

    /// The outbound guard's policy (see `clutch_core::guard`).
    pub fn outbound_policy(&self) -> anyhow::Result<clutch_core::guard::Policy> {
        let o = &self.outbound;
        clutch_core::guard::Policy::new(&o.allow, o.allow_loopback, &o.resolve)
            .map_err(|why| anyhow::anyhow!("`outbound`: {why}"))
    }

    /// The directories workspaces may be in, resolved: `workspaces.roots`, or the data directory
    /// (made if missing) when none is declared.
    pub fn workspace_roots(&self) -> anyhow::Result<clutch_core::roots::Roots> {
        let dirs = if self.workspaces.roots.is_empty() {
            std::fs::create_dir_all(&self.data_dir)
                .with_context(|| format!("cannot create the data directory {}", self.data_dir.display()))?;
            vec![self.data_dir.clone()]
        } else {
            self.workspaces.roots.clone()
        };
        clutch_core::roots::Roots::new(&dirs).map_err(|e| anyhow::anyhow!("`workspaces.roots`: {e}"))
    }

    /// The store `db` selects.
    pub fn database(&self) -> anyhow::Result<Database> {
        let Some(db) = &self.db else { return Ok(Database::Sqlite(self.data_dir.clone())) };
        if db.starts_with("postgres://") || db.starts_with("postgresql://") {
            return Ok(Database::Postgres(db.clone()));
        }
        if let Some(path) = db.strip_prefix("sqlite://") {
            if path.is_empty() {
                bail!("`db` = \"sqlite://\" needs a directory after it, like sqlite://./data");
            }
            return Ok(Database::Sqlite(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = db.split_once("://") {
            bail!(
                "`db` uses the unsupported scheme `{scheme}`; use postgres://…, postgresql://…, sqlite://DIR \
                 or a directory path"
            );
        }
        Ok(Database::Sqlite(PathBuf::from(db)))
    }

    /// The event log's options: `[log_service]`, and the largest artifact (`limits.artifact_bytes`).
    pub fn core_options(&self) -> clutch_core::log::Options {
        clutch_core::log::Options { artifact_max_bytes: self.limits.artifact_bytes, ..self.log_service.clone() }
    }

    /// The engine's options: `[engine]`, with what the daemon wires in beside it (the operator's
    /// policy, the workspace roots, the outbound guard, retention with its archive directory).
    pub fn engine_options(
        &self,
        policy: std::sync::Arc<clutch_core::config::Policy>,
        workspace_roots: clutch_core::roots::Roots,
    ) -> anyhow::Result<clutch_core::engine::Options> {
        let mut retention = self.retention.clone();
        retention.archive_dir.get_or_insert_with(|| self.data_dir.join("archive"));
        Ok(clutch_core::engine::Options {
            policy,
            workspace_roots,
            outbound: std::sync::Arc::new(self.outbound_policy()?),
            retention,
            ..self.engine.clone()
        })
    }

    /// The A2A face's options: the card's address and who may call (keys read from their variables
    /// now: one that is not set stops the start, named).
    pub fn a2a_options(&self) -> anyhow::Result<clutch_a2a::Options> {
        use clutch_a2a::auth::{Key, Unauthenticated};
        let a = &self.a2a;
        let unauthenticated = match a.unauthenticated.as_deref() {
            None => Unauthenticated::Auto,
            Some("refuse") => Unauthenticated::Refuse,
            Some("allow") => Unauthenticated::Allow,
            Some("screen") => {
                let skill = a.screening_skill.clone().unwrap_or_else(|| "skill:screening".into());
                Unauthenticated::Screen(skill)
            }
            Some(other) => anyhow::bail!("a2a.unauthenticated: `{other}` is not refuse, screen or allow"),
        };
        let mut keys = Vec::new();
        for (i, k) in a.keys.iter().enumerate() {
            clutch_proto::id::check_name(&k.name).map_err(|e| anyhow::anyhow!("a2a.keys[{i}].name: {e}"))?;
            let secret = std::env::var(&k.key_env).unwrap_or_default();
            if secret.trim().is_empty() {
                anyhow::bail!(
                    "a2a.keys[{i}] ({}): the variable {} is not set; set it to the partner's key",
                    k.name,
                    k.key_env
                );
            }
            keys.push(Key { name: k.name.clone(), secret, skills: k.skills.clone() });
        }
        let unversioned_card = match a.unversioned_card.as_deref().map(str::trim) {
            None | Some("1.0") => clutch_a2a::wire::Version::V10,
            Some("0.3") => clutch_a2a::wire::Version::V03,
            Some(other) => anyhow::bail!("a2a.unversioned_card: `{}` is not 1.0 or 0.3", clip(other)),
        };
        // Not configurable: the face's own timings and delivery policy.
        let fixed = clutch_a2a::Options::default();
        Ok(clutch_a2a::Options {
            public_url: a.public_url.clone(),
            blocking_wait: fixed.blocking_wait,
            remote_poll: fixed.remote_poll,
            push: fixed.push,
            keys,
            unauthenticated,
            conformance: a.conformance,
            unversioned_card,
        })
    }

    /// The positions runner's options: the catalog (shipped, and `<config_dir>/positions/`), the
    /// provider of spawned agents, the bus limits. A bad position file stops the start, named.
    pub fn positions_options(&self) -> anyhow::Result<clutch_runtime::positions::Options> {
        let dir = self.config_dir.as_ref().map(|d| d.join("positions"));
        let catalog = clutch_runtime::skill::Catalog::load(dir.as_deref()).map_err(|errors| {
            let lines: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
            anyhow::anyhow!("bad position files (check them with `clutch positions check DIR`):\n{}", lines.join("\n"))
        })?;
        let provider = self.positions.provider.clone().or_else(|| self.providers.first().map(|x| x.name.clone()));
        if let Some(name) = &provider
            && !self.providers.iter().any(|x| x.name == *name)
        {
            anyhow::bail!("positions.provider names `{name}`, which no [[providers]] entry declares");
        }
        Ok(clutch_runtime::positions::Options {
            catalog: std::sync::Arc::new(catalog),
            provider,
            ..self.positions.clone()
        })
    }

    pub fn gateway_options(&self) -> clutch_gateway::Options {
        clutch_gateway::Options {
            body_limit_bytes: saturating(self.limits.body_bytes),
            stream_keepalive: self.stream.keepalive,
            tokens: None,
            // Checked on load: a policy that does not build here serves loopback and its own origin only.
            browser: self.browser_policy().unwrap_or_default(),
        }
    }

    pub fn mcp_options(&self) -> clutch_mcp::Options {
        clutch_mcp::Options { body_limit_bytes: saturating(self.limits.body_bytes), fast_path: true }
    }

    /// The TOML form for `clutch config dump`, every secret masked: the password parts of `db`, the
    /// MCP servers' `env` and `headers` values, and the hooks' and webhooks' secrets.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        let mut shown = self.clone();
        shown.db = shown.db.as_deref().map(mask_db);
        // A server's environment and headers, and the hooks' secrets, are credentials.
        for server in &mut shown.mcp_servers {
            for value in server.env.values_mut().chain(server.headers.values_mut()) {
                *value = "***".into();
            }
        }
        for hook in &mut shown.hooks {
            hook.secret = "***".into();
        }
        for webhook in &mut shown.webhooks {
            if webhook.secret.is_some() {
                webhook.secret = Some("***".into());
            }
        }
        let body = toml::to_string_pretty(&shown).context("cannot render the config as TOML")?;
        let mut notes = String::new();
        if self.db.is_none() {
            notes.push_str("# db is unset: SQLite in data_dir\n");
        }
        if self.config_dir.is_none() {
            notes.push_str("# config_dir is unset: no policy files (org.yaml, workflows.yaml)\n");
        }
        Ok(format!("# The effective Clutch daemon config: defaults < clutch.toml < CLUTCH_* < flags.\n{notes}{body}"))
    }
}

fn saturating(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// `db` as it may be shown: `postgres://user:***@host/db?sslmode=require&password=***`. The URL is
/// read as a URL (the password is whatever lies between the first `:` of the user part and its last
/// `@`), every query parameter whose name speaks of a password, secret or token is masked, and, as
/// a last guard, any text the PostgreSQL driver itself would take for the password is masked
/// wherever it still shows. A value that is no URL shows only its scheme.
pub fn mask_db(db: &str) -> String {
    const MASK: &str = "***";
    let Ok(mut url) = url::Url::parse(db) else {
        return match db.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://{MASK}"),
            None if db.contains(['@', '?', '=']) => MASK.to_owned(),
            None => db.to_owned(),
        };
    };
    if url.password().is_some() {
        let _ = url.set_password(Some(MASK));
    }
    let secret = |name: &str| {
        let name = name.to_ascii_lowercase();
        ["password", "secret", "token"].iter().any(|s| name.contains(s))
    };
    if url.query_pairs().any(|(name, _)| secret(&name)) {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(name, value)| {
                let value = if secret(&name) { MASK.to_owned() } else { value.into_owned() };
                (name.into_owned(), value)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    let mut shown = url.to_string();
    if let Ok(config) = db.parse::<tokio_postgres::Config>()
        && let Some(password) = config.get_password().map(String::from_utf8_lossy)
        && !password.is_empty()
    {
        let encoded: String = url::form_urlencoded::byte_serialize(password.as_bytes()).collect();
        for form in [password.as_ref(), encoded.as_str()] {
            shown = shown.replace(form, MASK);
        }
    }
    shown
}

/// At most a short prefix of `text` (an error may quote a key or value of any length).
fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    clutch_proto::error::clip(text, 500)
}

/// A comma-separated list, blanks dropped.
fn list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A config as `config dump` shows it: what tells two apart.
    fn dumped(c: &Config) -> String {
        c.to_toml().unwrap()
    }

    fn load_with(file: Option<&str>, env: &[(&str, &str)], flags: ConfigArgs) -> anyhow::Result<Config> {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = file {
            std::fs::write(dir.path().join(FILE_NAME), text).unwrap();
        }
        let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        load(&flags, None, &|k| env.get(k).cloned(), dir.path()).map(|l| l.config)
    }

    #[test]
    fn defaults_without_anything() {
        assert_eq!(dumped(&load_with(None, &[], ConfigArgs::default()).unwrap()), dumped(&Config::default()));
    }

    #[test]
    fn layers_in_order() {
        let file = "listen = \"127.0.0.1:1\"\ndata_dir = \"f\"\n[limits]\nbody_bytes = 10\n[log_service]\nqueue = 7\n";
        let env = [
            ("CLUTCH_LISTEN", "127.0.0.1:2"),
            ("CLUTCH_LIMITS_BODY_BYTES", "20"),
            ("CLUTCH_DATA_DIR", "e"),
            ("CLUTCH_CONFIG_DIR", "policy-env"),
        ];
        let flags = ConfigArgs { listen: Some("127.0.0.1:3".parse().unwrap()), ..ConfigArgs::default() };
        let c = load_with(Some(file), &env, flags).unwrap();
        assert_eq!(c.listen, "127.0.0.1:3".parse().unwrap());
        assert_eq!(c.data_dir, PathBuf::from("e"));
        assert_eq!(c.limits.body_bytes, 20);
        assert_eq!(c.log_service.queue, 7);
        assert_eq!(c.log_service.batch_max, clutch_core::log::Options::default().batch_max);
        assert_eq!(c.config_dir, Some(PathBuf::from("policy-env")));
        let flags = ConfigArgs { config_dir: Some("policy-flag".into()), ..ConfigArgs::default() };
        let c =
            load_with(Some("config_dir = \"policy-file\"\n"), &[("CLUTCH_CONFIG_DIR", "policy-env")], flags).unwrap();
        assert_eq!(c.config_dir, Some(PathBuf::from("policy-flag")));
        let c = load_with(Some("config_dir = \"policy-file\"\n"), &[], ConfigArgs::default()).unwrap();
        assert_eq!(c.config_dir, Some(PathBuf::from("policy-file")));
    }

    #[test]
    fn every_key_can_be_set_from_the_environment() {
        let keys = keys();
        let paths: Vec<&str> = keys.iter().map(|k| k.path.as_str()).collect();
        for expected in ["listen", "db", "limits.body_bytes", "engine.max_deliveries", "outbound.allow_loopback"] {
            assert!(paths.contains(&expected), "{expected} in {paths:?}");
        }
        assert!(!paths.iter().any(|p| p.starts_with("outbound.resolve")), "maps are file only: {paths:?}");
        assert_eq!(keys.iter().filter(|k| k.secret).map(|k| k.path.as_str()).collect::<Vec<_>>(), ["db"]);
        for key in &keys {
            let value = match key.path.as_str() {
                "listen" => "127.0.0.1:9",
                "data_dir" => "d",
                "db" => "postgres://x",
                "log" => "debug",
                "mcp.allowed_origins" | "http.allowed_origins" => "https://a.example, http://b.example:8080",
                "http.allowed_hosts" => "hub.example, *.corp.example, 10.0.0.5",
                "a2a.public_url" => "https://hub.example",
                "outbound.allow" => "10.0.0.0/8, agents.internal",
                "outbound.allow_loopback" | "a2a.conformance" => "true",
                "a2a.unversioned_card" => "0.3",
                "retention.archive" | "retention.remove" => "false",
                "workspaces.roots" => "/srv/a:/srv/b",
                // Past the keys they must stay above.
                "engine.offline_after" | "engine.retry_backoff_max" => "7m",
                _ if key.duration => "7s",
                _ => "7",
            };
            let var = key.var();
            let c = load_with(None, &[(&var, value)], ConfigArgs::default())
                .unwrap_or_else(|e| panic!("{var}={value}: {e:#}"));
            assert_ne!(dumped(&c), dumped(&Config::default()), "{var}={value} changed nothing");
        }
        let env = [("CLUTCH_ENGINE_ACCEPT_TIMEOUT", "250ms"), ("CLUTCH_ENGINE_MAX_DELIVERIES", "2")];
        let c = load_with(None, &env, ConfigArgs::default()).unwrap();
        assert_eq!((c.engine.accept_timeout, c.engine.max_deliveries), (Duration::from_millis(250), 2));
        let env = [("CLUTCH_WORKSPACES_ROOTS", "/srv/a:/srv/b"), ("CLUTCH_OUTBOUND_ALLOW", "10.0.0.0/8, x.internal")];
        let c = load_with(None, &env, ConfigArgs::default()).unwrap();
        assert_eq!(c.workspaces.roots, vec![PathBuf::from("/srv/a"), PathBuf::from("/srv/b")]);
        assert_eq!(c.outbound.allow, vec!["10.0.0.0/8".to_owned(), "x.internal".to_owned()]);
    }

    /// One variable names one key: no two keys are spelled alike once `.` is written `_`, and no
    /// key's variable is the start of another section's (`CLUTCH_LOG` is `log`, never a part of
    /// `log_service`).
    #[test]
    fn every_variable_names_one_key() {
        let vars: Vec<String> = keys().iter().map(Key::var).collect();
        let mut unique = vars.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), vars.len(), "two keys share a variable: {vars:?}");
        let c = load_with(None, &[("CLUTCH_LOG", "debug"), ("CLUTCH_LOG_SERVICE_QUEUE", "9")], ConfigArgs::default())
            .unwrap();
        assert_eq!((c.log.as_str(), c.log_service.queue), ("debug", 9));
        let e = format!(
            "{:#}",
            load_with(None, &[("CLUTCH_ENGINE_MAX_DELIVERIES", "99999999999")], ConfigArgs::default()).unwrap_err()
        );
        assert!(e.contains("CLUTCH_ENGINE_MAX_DELIVERIES") && e.contains("u32"), "{e}");
        let e = format!("{:#}", load_with(None, &[("CLUTCH_LISTEN", "nowhere")], ConfigArgs::default()).unwrap_err());
        assert!(e.contains("CLUTCH_LISTEN") && e.contains("nowhere"), "{e}");
    }

    #[test]
    fn errors_name_the_culprit() {
        let e = format!("{:#}", load_with(Some("[limits]\nbody_byte = 1\n"), &[], ConfigArgs::default()).unwrap_err());
        assert!(e.contains("body_byte") && e.contains(FILE_NAME), "{e}");
        let e = format!(
            "{:#}",
            load_with(None, &[("CLUTCH_LOG_SERVICE_QUEUE", "lots")], ConfigArgs::default()).unwrap_err()
        );
        assert!(e.contains("CLUTCH_LOG_SERVICE_QUEUE"), "{e}");
        let e =
            format!("{:#}", load_with(Some("[stream]\nkeepalive = \"0s\"\n"), &[], ConfigArgs::default()).unwrap_err());
        assert!(e.contains("stream.keepalive"), "{e}");
        let e = format!(
            "{:#}",
            load_with(Some("[engine]\nstale_after = \"30\"\n"), &[], ConfigArgs::default()).unwrap_err()
        );
        assert!(e.contains("line 2") && e.contains("is not a duration") && e.contains("\"30s\""), "{e}");
        let file = "[engine]\nstale_after = \"1m\"\noffline_after = \"30s\"\n";
        let e = format!("{:#}", load_with(Some(file), &[], ConfigArgs::default()).unwrap_err());
        assert!(e.contains("`engine.offline_after`: must be at least `stale_after`"), "{e}");
        let e = format!(
            "{:#}",
            load_with(None, &[("CLUTCH_ENGINE_MAX_ROUTINGS", "0")], ConfigArgs::default()).unwrap_err()
        );
        assert!(e.contains("`engine.max_routings`: must be at least 1"), "{e}");
        let e = format!("{:#}", load_with(None, &[("CLUTCH_DB", "mysql://x")], ConfigArgs::default()).unwrap_err());
        assert!(e.contains("mysql"), "{e}");
        let e = format!(
            "{:#}",
            load_with(Some("[mcp]\nallowed_origins = [\"example.com\"]\n"), &[], ConfigArgs::default()).unwrap_err()
        );
        assert!(e.contains("mcp.allowed_origins") && e.contains("example.com"), "{e}");
    }

    #[test]
    fn browser_keys_are_checked_and_the_mcp_alias_moves_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let file = "[http]\nallowed_hosts = [\"hub.example.com\", \"*.corp.example\"]\n\
                    allowed_origins = [\"https://dash.example.com\"]\n\
                    [mcp]\nallowed_origins = [\"https://old.example\", \"https://dash.example.com\"]\n";
        std::fs::write(dir.path().join(FILE_NAME), file).unwrap();
        let loaded = load(&ConfigArgs::default(), None, &|_| None, dir.path()).unwrap();
        let c = &loaded.config;
        assert_eq!(c.http.allowed_origins, ["https://dash.example.com", "https://old.example"]);
        assert!(c.mcp.allowed_origins.is_empty());
        assert_eq!(loaded.deprecated.len(), 1, "{:?}", loaded.deprecated);
        assert!(
            loaded.deprecated[0].contains("`mcp.allowed_origins`")
                && loaded.deprecated[0].contains("http.allowed_origins")
        );
        assert!(c.browser_policy().is_ok());
        let dump = c.to_toml().unwrap();
        assert!(
            dump.contains("[http]") && !dump.contains("old.example\"]\n[") && dump.contains("old.example"),
            "{dump}"
        );
        let back: Config = toml::from_str(&dump).unwrap();
        assert_eq!(dumped(&back), dumped(c), "the dump reads back as the effective config");
        let env = |k: &str| (k == "CLUTCH_MCP_ALLOWED_ORIGINS").then(|| "https://env.example".to_owned());
        let loaded = load(&ConfigArgs::default(), None, &env, tempfile::tempdir().unwrap().path()).unwrap();
        assert_eq!(loaded.config.http.allowed_origins, ["https://env.example"]);
        assert_eq!(loaded.deprecated.len(), 1);
        let clean = load(&ConfigArgs::default(), None, &|_| None, tempfile::tempdir().unwrap().path()).unwrap();
        assert!(clean.deprecated.is_empty());
        for (text, key) in [
            ("[http]\nallowed_hosts = [\"hub.example.com:7700\"]\n", "http.allowed_hosts"),
            ("[http]\nallowed_hosts = [\"*\"]\n", "http.allowed_hosts"),
            ("[http]\nallowed_origins = [\"dash.example.com\"]\n", "http.allowed_origins"),
            ("[a2a]\npublic_url = \"hub.example.com\"\n", "a2a.public_url"),
        ] {
            let e = format!("{:#}", load_with(Some(text), &[], ConfigArgs::default()).unwrap_err());
            assert!(e.contains(key), "{text}: {e}");
        }
        let e = format!(
            "{:#}",
            load_with(None, &[("CLUTCH_HTTP_ALLOWED_HOSTS", "ok.example, https://bad.example")], ConfigArgs::default())
                .unwrap_err()
        );
        assert!(e.contains("http.allowed_hosts") && e.contains("https://bad.example"), "{e}");
    }

    #[test]
    fn outbound_and_roots_are_checked_on_load() {
        let e = format!(
            "{:#}",
            load_with(Some("[outbound]\nallow = [\"10.0.0.0/33\"]\n"), &[], ConfigArgs::default()).unwrap_err()
        );
        assert!(e.contains("outbound") && e.contains("10.0.0.0/33"), "{e}");
        let e = format!(
            "{:#}",
            load_with(Some("[outbound.resolve]\n\"a.example\" = [\"nope\"]\n"), &[], ConfigArgs::default())
                .unwrap_err()
        );
        assert!(e.contains("a.example") && e.contains("nope"), "{e}");
        let e = format!(
            "{:#}",
            load_with(None, &[("CLUTCH_OUTBOUND_ALLOW_LOOPBACK", "yes")], ConfigArgs::default()).unwrap_err()
        );
        assert!(e.contains("CLUTCH_OUTBOUND_ALLOW_LOOPBACK"), "{e}");
        let file = "[outbound]\nallow_loopback = true\nallow = [\"*.corp.example\"]\n\
                    [outbound.resolve]\n\"a.example\" = [\"10.1.1.1\"]\n";
        let c = load_with(Some(file), &[], ConfigArgs::default()).unwrap();
        assert!(c.outbound.allow_loopback && c.outbound_policy().is_ok());
        let dir = tempfile::tempdir().unwrap();
        let c = Config { data_dir: dir.path().join("data"), ..Config::default() };
        assert_eq!(c.workspace_roots().unwrap().dirs(), [dir.path().join("data").canonicalize().unwrap()]);
        let c = Config { workspaces: Workspaces { roots: vec![dir.path().join("missing")] }, ..c };
        assert!(format!("{:#}", c.workspace_roots().unwrap_err()).contains("workspaces.roots"));
    }

    #[test]
    fn errors_never_quote_a_secret() {
        let file = "db = \"postgres://u:hunter2@h/d\ndata_dir = 3\n";
        let e = format!("{:#}", load_with(Some(file), &[], ConfigArgs::default()).unwrap_err());
        assert!(!e.contains("hunter2") && e.contains("line 1"), "{e}");
        let file = "db = \"postgres://u:hunter2@h/d\"\ndata_dir = 3\n";
        let e = format!("{:#}", load_with(Some(file), &[], ConfigArgs::default()).unwrap_err());
        assert!(!e.contains("hunter2") && e.contains("line 2"), "{e}");
    }

    /// TOML values of every kind, some of them huge.
    fn toml_value() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<bool>().prop_map(|b| b.to_string()),
            "[ -~]{0,40}".prop_map(|s| format!("{s:?}")),
            (1usize..200_000).prop_map(|n| format!("\"{}\"", "x".repeat(n))),
            proptest::collection::vec("[a-z0-9./:*-]{0,20}", 0..4).prop_map(|v| format!("{v:?}")),
            "[a-z]{1,8}".prop_map(|k| format!("{{ {k} = 1 }}")),
            Just("1979-05-27T07:32:00Z".to_owned()),
            Just("nan".to_owned()),
        ]
    }

    /// A config file: lines of known and unknown keys (dotted, so sections are reached), or noise.
    fn toml_file() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let known: Vec<String> =
            keys().into_iter().map(|k| k.path).chain(["outbound.resolve.a".into(), "engine".into()]).collect();
        let key = prop_oneof![
            proptest::sample::select(known),
            "[a-z_]{1,12}(\\.[a-z_]{1,12}){0,2}",
            (1usize..100_000).prop_map(|n| "k".repeat(n)),
        ];
        prop_oneof![
            proptest::collection::vec((key, toml_value()), 0..8)
                .prop_map(|lines| lines.iter().map(|(k, v)| format!("{k} = {v}\n")).collect::<String>()),
            "[ -~\n\\[\\]=\"]{0,300}",
        ]
    }

    proptest::proptest! {
        #![proptest_config(clutch_proto::fuzz::config(256))]

        /// The file loader answers any text with a config or an error of bounded size; never a panic.
        #[test]
        fn fuzz_the_config_file(text in toml_file()) {
            match load_with(Some(&text), &[], ConfigArgs::default()) {
                Ok(config) => { config.to_toml().unwrap(); }
                Err(e) => {
                    let e = format!("{e:#}");
                    proptest::prop_assert!(e.len() < 2048, "{} bytes: {}", e.len(), &e[..200]);
                }
            }
        }

        /// Every environment variable takes any text without a panic, and its error stays small.
        #[test]
        fn fuzz_the_environment(key in proptest::sample::select(keys()), value in "[ -~]{0,40}|x{1000,5000}") {
            let var = key.var();
            if let Err(e) = load_with(None, &[(&var, &value)], ConfigArgs::default()) {
                let e = format!("{e:#}");
                proptest::prop_assert!(e.len() < 2048, "{} bytes", e.len());
            }
        }
    }

    #[test]
    fn providers_and_llm_agents_are_checked_and_name_keys_by_variable_only() {
        let file = "[[providers]]\nname = \"claude\"\nkind = \"anthropic\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n\
                    model = \"claude-sonnet-4-5\"\nrequests_per_minute = 50\n\
                    [providers.prices.claude-sonnet-4-5]\ninput = 3.0\noutput = 15.0\n\
                    [[providers]]\nname = \"local\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"llama3\"\n\
                    [[llm_agents]]\nname = \"summariser\"\nprovider = \"claude\"\nsystem = \"You summarise.\"\n\
                    capabilities = [\"skill:summarise\"]\ntools = [\"mcp:files\"]\n";
        let c = load_with(Some(file), &[], ConfigArgs::default()).unwrap();
        assert_eq!((c.providers.len(), c.llm_agents.len()), (2, 1));
        assert_eq!((c.providers[0].max_tokens, c.providers[0].stream, c.providers[0].max_retries), (4096, true, 4));
        assert_eq!((c.llm_agents[0].max_turns, c.llm_agents[0].max_concurrency), (20, 4));
        let dump = c.to_toml().unwrap();
        assert!(dump.contains("api_key_env = \"ANTHROPIC_API_KEY\"") && dump.contains("[[llm_agents]]"), "{dump}");
        assert!(!keys().iter().any(|k| k.path.starts_with("providers") || k.path.starts_with("llm_agents")));
        for (bad, why) in [
            ("[[providers]]\nname = \"a\"\nkind = \"gemini\"\nmodel = \"m\"\n", "unknown variant"),
            ("[[providers]]\nname = \"a\"\nkind = \"openai\"\nmodel = \"m\"\napi_key = \"sk-x\"\n", "unknown field"),
            ("[[providers]]\nname = \"a\"\nkind = \"openai\"\nmodel = \"\"\n", "`model` is empty"),
            (
                "[[llm_agents]]\nname = \"x\"\nprovider = \"nobody\"\nsystem = \"s\"\ncapabilities = [\"skill:a\"]\n",
                "provider \"nobody\", which is not declared",
            ),
            (
                "[[providers]]\nname = \"p\"\nkind = \"openai\"\nmodel = \"m\"\n\
                 [[llm_agents]]\nname = \"x\"\nprovider = \"p\"\nsystem = \"s\"\ncapabilities = []\n",
                "`capabilities` is empty",
            ),
            (
                "[[providers]]\nname = \"p\"\nkind = \"openai\"\nmodel = \"m\"\n\
                 [[llm_agents]]\nname = \"x y\"\nprovider = \"p\"\nsystem = \"s\"\ncapabilities = [\"skill:a\"]\n",
                "card would be refused",
            ),
        ] {
            let e = format!("{:#}", load_with(Some(bad), &[], ConfigArgs::default()).unwrap_err());
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn mcp_servers_are_checked_and_their_secrets_never_shown() {
        let file = "[[mcp_servers]]\nname = \"files\"\ncommand = \"npx\"\nargs = [\"-y\", \"x\"]\n\
                    env = { TOKEN = \"hunter2\" }\n\
                    [[mcp_servers]]\nname = \"web\"\nurl = \"http://10.0.0.5/mcp\"\n\
                    headers = { Authorization = \"Bearer hunter3\" }\n";
        let c = load_with(Some(file), &[], ConfigArgs::default()).unwrap();
        assert_eq!(c.mcp_servers.len(), 2);
        assert_eq!((c.mcp_servers[0].connect_timeout_ms, c.mcp_servers[0].call_timeout_ms), (10_000, 60_000));
        let dump = c.to_toml().unwrap();
        assert!(!dump.contains("hunter2") && !dump.contains("hunter3") && dump.contains("npx"), "{dump}");
        assert!(!keys().iter().any(|k| k.path.starts_with("mcp_servers")), "a list of tables is file only");
        for (bad, why) in [
            ("name = \"a\"\n", "either a command"),
            ("name = \"a\"\ncommand = \"x\"\nurl = \"http://h/\"\n", "either a command"),
            ("name = \"a b\"\ncommand = \"x\"\n", "name"),
            ("name = \"a\"\nurl = \"https://h/\"\n", "http://"),
            ("name = \"a\"\ncommand = \"x\"\nheaders = { A = \"b\" }\n", "headers go with a url"),
        ] {
            let e = format!(
                "{:#}",
                load_with(Some(&format!("[[mcp_servers]]\n{bad}")), &[], ConfigArgs::default()).unwrap_err()
            );
            assert!(e.contains("mcp_servers") && e.contains(why), "{bad}: {e}");
        }
        let twice = "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"a\"\ncommand = \"y\"\n";
        let e = format!("{:#}", load_with(Some(twice), &[], ConfigArgs::default()).unwrap_err());
        assert!(e.contains("two servers"), "{e}");
    }

    #[test]
    fn a2a_keys_come_from_their_variables_and_tiers_are_checked() {
        use clutch_a2a::auth::Unauthenticated;
        // PATH is set wherever tests run; its value stands for a partner's key, never shown.
        let file = "[a2a]\nunauthenticated = \"screen\"\n[[a2a.keys]]\nname = \"partner\"\nkey_env = \"PATH\"\nskills = [\"skill:review\"]\n";
        let c = load_with(Some(file), &[], ConfigArgs::default()).unwrap();
        let o = c.a2a_options().unwrap();
        assert_eq!(o.unauthenticated, Unauthenticated::Screen("skill:screening".into()));
        assert_eq!((o.keys[0].name.as_str(), o.keys[0].skills.clone()), ("partner", vec!["skill:review".to_owned()]));
        let dump = c.to_toml().unwrap();
        assert!(dump.contains("key_env = \"PATH\"") && !dump.contains(&std::env::var("PATH").unwrap()), "{dump}");
        let unset = "[[a2a.keys]]\nname = \"p\"\nkey_env = \"CLUTCH_TEST_SURELY_UNSET_KEY\"\n";
        let e = format!("{:#}", load_with(Some(unset), &[], ConfigArgs::default()).unwrap().a2a_options().unwrap_err());
        assert!(e.contains("CLUTCH_TEST_SURELY_UNSET_KEY is not set"), "{e}");
        let e = format!(
            "{:#}",
            load_with(Some("[a2a]\nunauthenticated = \"maybe\"\n"), &[], ConfigArgs::default())
                .unwrap()
                .a2a_options()
                .unwrap_err()
        );
        assert!(e.contains("a2a.unauthenticated") && e.contains("maybe"), "{e}");
        // The conformance agent: off unless the file, the environment or the flag turns it on.
        assert!(!c.a2a_options().unwrap().conformance);
        let flags = ConfigArgs { a2a_conformance: true, ..ConfigArgs::default() };
        assert!(load_with(None, &[], flags).unwrap().a2a_options().unwrap().conformance);
        // The card for requests naming no version: 1.0 unless the operator says 0.3.
        assert_eq!(c.a2a_options().unwrap().unversioned_card, clutch_a2a::wire::Version::V10, "1.0 by default");
        let c03 = load_with(Some("[a2a]\nunversioned_card = \"0.3\"\n"), &[], ConfigArgs::default()).unwrap();
        assert_eq!(c03.a2a_options().unwrap().unversioned_card, clutch_a2a::wire::Version::V03);
        let bad = load_with(Some("[a2a]\nunversioned_card = \"2.0\"\n"), &[], ConfigArgs::default()).unwrap();
        let e = format!("{:#}", bad.a2a_options().unwrap_err());
        assert!(e.contains("a2a.unversioned_card") && e.contains("2.0"), "{e}");
    }

    #[test]
    fn database_choices() {
        let with = |db: Option<&str>| Config { db: db.map(str::to_owned), ..Config::default() }.database().unwrap();
        assert_eq!(with(None), Database::Sqlite(PathBuf::from(".clutch")));
        assert_eq!(with(Some("sqlite://x/y")), Database::Sqlite(PathBuf::from("x/y")));
        assert_eq!(with(Some("/var/lib/c")), Database::Sqlite(PathBuf::from("/var/lib/c")));
        assert_eq!(with(Some("postgresql://h/d")), Database::Postgres("postgresql://h/d".into()));
    }

    #[test]
    fn dump_masks_passwords_and_round_trips() {
        let c = Config { db: Some("postgres://u:secret@h/d".into()), ..Config::default() };
        let text = c.to_toml().unwrap();
        assert!(!text.contains("secret") && text.contains("u:***@h"), "{text}");
        for (db, secret) in [
            ("postgres://u:p@ss@h:5432/d", "ss"),
            ("postgres://u:p%40ss%2Fword@h/d", "ss%2Fword"),
            ("postgres://u@h/d?password=hunter2&sslmode=disable", "hunter2"),
            ("postgresql://u@h/d?sslmode=require&sslpassword=hunter3", "hunter3"),
            ("postgres://u@h/d?PassWord=hunter4", "hunter4"),
            ("postgres://u:hunter5/x@h/d", "hunter5"),
            ("postgres://u:1234/hunter6@h/d", "hunter6"),
            ("postgres://u@h/d?options=-c%20x%3Dy&password=hunter%407", "hunter"),
        ] {
            let shown = mask_db(db);
            assert!(!shown.contains(secret), "{db} shown as {shown}");
        }
        assert_eq!(mask_db("postgres://u@h/d?sslmode=disable"), "postgres://u@h/d?sslmode=disable");
        assert_eq!(mask_db("./data"), "./data");
        let plain = Config::default();
        let back: Config = toml::from_str(&plain.to_toml().unwrap()).unwrap();
        assert_eq!(dumped(&back), dumped(&plain));
        assert!(dumped(&plain).contains("accept_timeout = \"30s\""), "{}", dumped(&plain));
    }

    #[test]
    fn duration_keys_of_old_are_read_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let file = "[engine]\naccept_timeout_ms = 250\ndefault_max_runtime_ms = 0\n\
                    [stream]\nkeepalive_secs = 3\n[retention]\nafter_days = 30\n";
        std::fs::write(dir.path().join(FILE_NAME), file).unwrap();
        let env = |k: &str| (k == "CLUTCH_ENGINE_STALE_AFTER_MS").then(|| "1500".to_owned());
        let loaded = load(&ConfigArgs::default(), None, &env, dir.path()).unwrap();
        let c = &loaded.config;
        assert_eq!(c.engine.accept_timeout, Duration::from_millis(250));
        assert_eq!(c.engine.default_max_runtime, None);
        assert_eq!(c.engine.stale_after, Duration::from_millis(1500));
        assert_eq!(c.stream.keepalive, Duration::from_secs(3));
        assert_eq!(c.retention.after, Some(Duration::from_secs(30 * 86_400)));
        let notes = loaded.deprecated.join("\n");
        for said in [
            "`engine.accept_timeout_ms` is deprecated: write `engine.accept_timeout = \"250ms\"` instead",
            "`engine.default_max_runtime_ms` is deprecated: leave `engine.default_max_runtime` out instead of 0",
            "`stream.keepalive_secs` is deprecated: write `stream.keepalive = \"3s\"` instead",
            "`retention.after_days` is deprecated: write `retention.after = \"30d\"` instead",
            "CLUTCH_ENGINE_STALE_AFTER_MS is deprecated: set CLUTCH_ENGINE_STALE_AFTER=\"1500ms\" instead",
        ] {
            assert!(notes.contains(said), "{said} in:\n{notes}");
        }
        // Both spellings of one key: refused, named.
        std::fs::write(dir.path().join(FILE_NAME), "[engine]\naccept_timeout_ms = 250\naccept_timeout = \"1s\"\n")
            .unwrap();
        let e = format!("{:#}", load(&ConfigArgs::default(), None, &|_| None, dir.path()).unwrap_err());
        assert!(e.contains("`engine.accept_timeout_ms` and `engine.accept_timeout` set the same key"), "{e}");
    }
}
