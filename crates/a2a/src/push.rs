//! A2A push notifications: a client names a webhook for one of its tasks (the four
//! `…PushNotificationConfig` operations, or `configuration.taskPushNotificationConfig` with its
//! message), and each change of the task (status, new artifact) is POSTed there as the stream would
//! have said it (1.0: a `StreamResponse`; 0.3: the task), with the client's `Authorization` and
//! `X-A2A-Notification-Token`, until the task ends.
//!
//! A config holds credentials, so it is kept as a store record beside the log (space [`SPACE`]),
//! never in it: events, replays, the UI and errors never show it, and answers withhold the
//! credentials (the scheme is shown). Delivery is core's push machinery: one worker per config,
//! following the task's events from where the config was made, its position saved, retried with
//! backoff, through the outbound guard (checked when the config is made, and at each connection).
//! Once the task has ended and its end was delivered, the config stays readable for [`KEEP`], then
//! goes.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use clutch_core::push::{Delivery, Target, Transport};
use clutch_store::{Event, Filter};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::hub::Hub;
use crate::wire::{self, RpcError, State, Version};

/// The records' space in the store.
pub(crate) const SPACE: &str = "a2a.push";
/// How long a config stays readable after its task's end was delivered.
pub(crate) const KEEP: Duration = Duration::from_secs(600);
/// Configs one task may have.
const MAX_PER_TASK: usize = 10;
/// How long one webhook POST may take (the spec recommends 10 to 30 s).
const TIMEOUT: Duration = Duration::from_secs(15);

/// One webhook for one task, as stored.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Config {
    pub task_id: String,
    pub id: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// `Authorization: <scheme> <credentials>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
    /// The version the client spoke: what the notifications look like.
    pub version: String,
    /// The log's position when it was made: delivery follows the task's events after it.
    pub from: u64,
    /// The task's state (1.0 name) and number of artifacts when it was made: changes are told from there.
    pub told_state: String,
    pub told_artifacts: usize,
    /// When (Unix ms) the task's end was delivered, or found to need no delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at: Option<u64>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("task_id", &self.task_id)
            .field("id", &self.id)
            .field("scheme", &self.scheme)
            .field("credentials", &self.credentials.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

impl Config {
    fn key(&self) -> String {
        key(&self.task_id, &self.id)
    }

    fn version(&self) -> Version {
        Version::parse(Some(&self.version)).unwrap_or(Version::V10)
    }

    /// As an answer shows it: everything but the credentials.
    pub(crate) fn json(&self, v: Version) -> Value {
        let mut config = json!({"id": self.id, "url": self.url});
        if let Some(token) = &self.token {
            config["token"] = json!(token);
        }
        match v {
            Version::V10 => {
                config["taskId"] = json!(self.task_id);
                if let Some(scheme) = &self.scheme {
                    config["authentication"] = json!({"scheme": scheme});
                }
                config
            }
            Version::V03 => {
                if let Some(scheme) = &self.scheme {
                    config["authentication"] = json!({"schemes": [scheme]});
                }
                json!({"taskId": self.task_id, "pushNotificationConfig": config})
            }
        }
    }
}

fn key(task: &str, id: &str) -> String {
    format!("{task}/{id}")
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Reads a config a client sent for `task` (1.0 `TaskPushNotificationConfig`, or its older nested
/// forms and 0.3's `PushNotificationConfig`), checking every field and the URL against the
/// outbound guard; the error names the field.
pub(crate) async fn read(
    hub: &Hub,
    task: &str,
    value: &Map<String, Value>,
    version: Version,
    told: (State, usize),
) -> Result<Config, RpcError> {
    let nested = ["pushNotificationConfig", "push_notification_config", "config"]
        .iter()
        .find_map(|k| value.get(*k).and_then(Value::as_object));
    let o = nested.unwrap_or(value);
    let text = |camel: &str, max: usize| -> Result<Option<String>, RpcError> {
        match o.get(camel) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) if s.len() <= max => Ok(Some(s.clone())),
            Some(Value::String(_)) => Err(RpcError::invalid_params(format!("{camel}: at most {max} characters"))),
            Some(_) => Err(RpcError::invalid_params(format!("{camel}: must be a string"))),
        }
    };
    let url = text("url", 2048)?.ok_or_else(|| RpcError::invalid_params("url: required, the webhook's URL"))?;
    let parsed = reqwest::Url::parse(&url).map_err(|e| RpcError::invalid_params(format!("url: not a URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(RpcError::invalid_params("url: must be http or https"));
    }
    match hub.engine.options().outbound.check_target(&url).await {
        Ok(Ok(())) => {}
        Ok(Err(refused)) => {
            return Err(RpcError::invalid_params(format!(
                "url: refused by the hub's outbound guard ({refused}); its operator may allow the network"
            )));
        }
        Err(unusable) => return Err(RpcError::invalid_params(format!("url: {unusable}"))),
    }
    let id = match text("id", 128)? {
        Some(id) if id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c)) => id,
        Some(_) => return Err(RpcError::invalid_params("id: letters, digits, `-`, `_`, `.` and `:` only")),
        None => clutch_proto::id::generate(clutch_proto::id::Kind::Message).replacen("msg_", "pnc_", 1),
    };
    let token = text("token", 512)?;
    let (scheme, credentials) = match o.get("authentication") {
        None | Some(Value::Null) => (None, None),
        Some(Value::Object(auth)) => {
            // 1.0 `scheme`; 0.3 `schemes`, of which the first is used.
            let scheme = auth
                .get("scheme")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| auth.get("schemes").and_then(Value::as_array)?.first()?.as_str().map(str::to_owned));
            let scheme = scheme
                .filter(|s| !s.is_empty())
                .ok_or_else(|| RpcError::invalid_params("authentication.scheme: required, e.g. Bearer or Basic"))?;
            if scheme.len() > 64 || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || "-._~+!#$%&'*^`|".contains(c))
            {
                return Err(RpcError::invalid_params("authentication.scheme: an HTTP authentication scheme name"));
            }
            let credentials = match auth.get("credentials") {
                None | Some(Value::Null) => None,
                Some(Value::String(c)) if c.len() <= 4096 && !c.contains(['\r', '\n']) => {
                    Some(c.clone()).filter(|c| !c.is_empty())
                }
                Some(_) => {
                    return Err(RpcError::invalid_params(
                        "authentication.credentials: a string of at most 4096 characters on one line",
                    ));
                }
            };
            (Some(scheme), credentials)
        }
        Some(_) => return Err(RpcError::invalid_params("authentication: must be an object")),
    };
    if token.as_deref().is_some_and(|t| t.contains(['\r', '\n'])) {
        return Err(RpcError::invalid_params("token: one line"));
    }
    Ok(Config {
        task_id: task.to_owned(),
        id,
        url,
        token,
        scheme,
        credentials,
        version: version.as_str().to_owned(),
        from: hub.engine.seq(),
        told_state: told.0.name(Version::V10).to_owned(),
        told_artifacts: told.1,
        done_at: told.0.is_terminal().then(now_ms),
    })
}

/// Saves `config` (replacing one of the same id), unless its task has too many already.
pub(crate) async fn save(hub: &Hub, config: &Config) -> Result<(), RpcError> {
    let kept = list(hub, &config.task_id).await?;
    if kept.len() >= MAX_PER_TASK && !kept.iter().any(|c| c.id == config.id) {
        return Err(RpcError::invalid_params(format!(
            "a task has at most {MAX_PER_TASK} push notification configs: delete one first"
        )));
    }
    let body = serde_json::to_vec(config).map_err(|e| RpcError::internal(e.to_string()))?;
    hub.log.put_record(SPACE, &config.key(), body.into()).await.map_err(|e| RpcError::internal(e.to_string()))
}

/// Task `task`'s configs, by id.
pub(crate) async fn list(hub: &Hub, task: &str) -> Result<Vec<Config>, RpcError> {
    let all = hub.log.records(SPACE).await.map_err(|e| RpcError::internal(e.to_string()))?;
    let prefix = key(task, "");
    Ok(all
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .filter_map(|(_, body)| serde_json::from_slice::<Config>(body).ok())
        .collect())
}

/// Task `task`'s config `id`.
pub(crate) async fn get(hub: &Hub, task: &str, id: &str) -> Result<Option<Config>, RpcError> {
    let body = hub.log.record(SPACE, &key(task, id)).await.map_err(|e| RpcError::internal(e.to_string()))?;
    Ok(body.and_then(|b| serde_json::from_slice(&b).ok()))
}

/// Removes task `task`'s config `id`; removing a missing one is no error.
pub(crate) async fn delete(hub: &Hub, task: &str, id: &str) -> Result<(), RpcError> {
    hub.log.delete_record(SPACE, &key(task, id)).await.map(|_| ()).map_err(|e| RpcError::internal(e.to_string()))
}

/// POSTs a task's changes to its config's webhook.
struct Webhooks {
    hub: Hub,
    client: clutch_outbound::Client,
    /// What each config's worker has told: the state and the number of artifacts.
    told: Mutex<HashMap<String, (State, usize)>>,
}

impl Webhooks {
    async fn post(&self, target: &Target, event: &Event) -> Delivery {
        let Some((task, id)) = target.name.strip_prefix("a2a-push:").and_then(|k| k.split_once('/')) else {
            return Delivery::Refused("not an A2A push target".into());
        };
        // Deleted since: nothing more goes there.
        let config = match get(&self.hub, task, id).await {
            Ok(Some(config)) => config,
            Ok(None) => return Delivery::Done,
            Err(e) => return Delivery::Failed(e.message),
        };
        let v = config.version();
        let history = if v == Version::V03 { None } else { Some(0) };
        let shown = match self.hub.task(task, history).await {
            Ok(shown) => shown,
            Err(e) => return Delivery::Refused(e.message),
        };
        let last = self.told.lock().unwrap_or_else(|e| e.into_inner()).get(&target.name).copied().unwrap_or((
            wire::read_state(&json!(config.told_state)).unwrap_or(State::Submitted),
            config.told_artifacts,
        ));
        let said = event.message().ok();
        let changes = crate::task::changes(&shown, said.as_ref(), last, v);
        // 1.0 tells each change; 0.3 sends the task as it is now.
        let bodies = match v {
            Version::V10 => changes,
            Version::V03 if changes.is_empty() => Vec::new(),
            Version::V03 => vec![wire::task_json(&shown, v)],
        };
        for body in &bodies {
            let delivery = self.send(&config, body, v).await;
            if delivery != Delivery::Taken {
                return delivery;
            }
        }
        self.told
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(target.name.clone(), (shown.state, shown.artifacts.len()));
        if shown.state.is_terminal() { Delivery::Done } else { Delivery::Taken }
    }

    async fn send(&self, config: &Config, body: &Value, v: Version) -> Delivery {
        let request = match self.client.post(&config.url) {
            Ok(request) => request,
            Err(e) => return clutch_outbound::push::unsent(e),
        };
        let content_type = match v {
            Version::V10 => "application/a2a+json",
            Version::V03 => "application/json",
        };
        let mut request = request.header("content-type", content_type).header("A2A-Version", v.as_str());
        if let Some(token) = &config.token {
            request = request.header("X-A2A-Notification-Token", token);
        }
        if let (Some(scheme), Some(credentials)) = (&config.scheme, &config.credentials) {
            request = request.header("authorization", format!("{scheme} {credentials}"));
        }
        clutch_outbound::push::answered(request.body(body.to_string()).send().await)
    }
}

impl Transport for Webhooks {
    fn protocol(&self) -> &'static str {
        "a2a-push"
    }

    fn deliver<'a>(
        &'a self,
        target: &'a Target,
        event: &'a Event,
    ) -> Pin<Box<dyn Future<Output = Delivery> + Send + 'a>> {
        Box::pin(self.post(target, event))
    }
}

/// Runs delivery to the clients' webhooks until `stop` resolves: every `options.rescan`, the
/// configs in the store are read again (another daemon on the same store may have made some); each
/// config whose task has not ended, or whose end is not yet delivered, has a worker; a config whose
/// end was delivered more than [`KEEP`] ago is removed.
pub(crate) async fn run(hub: Hub, stop: impl Future<Output = ()>) {
    let options = clutch_outbound::Options { timeout: TIMEOUT, ..Default::default() };
    let client = match clutch_outbound::Client::new(hub.engine.options().outbound.clone(), &options) {
        Ok(c) => c,
        Err(e) => return tracing::error!(error = %e, "A2A push notifications cannot start their HTTP client"),
    };
    let push = hub.options.push.clone();
    let webhooks = Arc::new(Webhooks { hub: hub.clone(), client, told: Mutex::new(HashMap::new()) });
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    let mut workers: HashMap<String, tokio::task::JoinHandle<bool>> = HashMap::new();
    let mut failing = false;
    tokio::pin!(stop);
    loop {
        match hub.log.records(SPACE).await {
            Ok(records) => {
                failing = false;
                let configs: HashMap<String, Config> = records
                    .iter()
                    .filter_map(|(k, body)| Some((k.clone(), serde_json::from_slice(body).ok()?)))
                    .collect();
                workers.retain(|key, worker| {
                    let keep = configs.get(key).is_some_and(|c| c.done_at.is_none());
                    if !keep {
                        worker.abort();
                    }
                    keep
                });
                for (key, mut config) in configs {
                    if let Some(done_at) = config.done_at {
                        if now_ms().saturating_sub(done_at) >= KEEP.as_millis() as u64 {
                            let _ = hub.log.delete_record(SPACE, &key).await;
                        }
                        continue;
                    }
                    if let Some(worker) = workers.get(&key) {
                        if !worker.is_finished() {
                            continue;
                        }
                        let done = workers.remove(&key).map(futures_util::FutureExt::now_or_never);
                        if !matches!(done, Some(Some(Ok(true)))) {
                            continue; // stopped for another reason: started again next time
                        }
                    } else if !finished(&hub, &config).await {
                        let target = Target {
                            name: format!("a2a-push:{key}"),
                            url: config.url.clone(),
                            filter: Filter { task_id: Some(config.task_id.clone()), ..Filter::default() },
                            types: Vec::new(),
                            secret: None,
                        };
                        let worker = clutch_core::push::spawn(
                            hub.log.clone(),
                            webhooks.clone(),
                            target,
                            config.from,
                            push.clone(),
                            stopped.clone(),
                        );
                        workers.insert(key, worker);
                        continue;
                    }
                    // Its end is delivered: kept readable a while.
                    config.done_at = Some(now_ms());
                    webhooks.told.lock().unwrap_or_else(|e| e.into_inner()).remove(&format!("a2a-push:{key}"));
                    if let Ok(body) = serde_json::to_vec(&config) {
                        let _ = hub.log.put_record(SPACE, &key, body.into()).await;
                    }
                }
            }
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(error = %e, "cannot read the A2A push notification configs; retrying");
            }
            Err(_) => {}
        }
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep(push.rescan) => {}
        }
    }
    let _ = stopping.send(true);
    for (_, worker) in workers {
        let _ = worker.await;
    }
}

/// Whether `config` has nothing left to deliver: its task is gone, or has ended with no event after
/// the worker's saved position (its end was delivered before a restart).
async fn finished(hub: &Hub, config: &Config) -> bool {
    // Read from the log once the task has left the engine's memory: its end may still be undelivered.
    let Ok(Some(view)) = hub.engine.find_task(&config.task_id).await else { return true };
    if !view.state.is_final() {
        return false;
    }
    let name = clutch_core::push::cursor_name(&format!("a2a-push:{}", config.key()));
    let Ok(saved) = hub.log.cursor(&name).await else { return false };
    let after = saved.unwrap_or(config.from);
    let filter = Filter { task_id: Some(config.task_id.clone()), ..Filter::default() };
    hub.log.read(&filter, after, 1).await.is_ok_and(|left| left.is_empty())
}
