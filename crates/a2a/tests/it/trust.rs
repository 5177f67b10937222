//! Trust tiers: with partners' keys configured, the card stays public and declares its schemes; a
//! caller without a credential (or with a wrong one) is refused with 401; a key asks only for its
//! skills (403 otherwise), as `X-API-Key` or as a bearer token, and sees only its own tasks; a hub
//! that screens sends anonymous callers' messages to its screening skill.

use clutch_a2a::auth::{Key, Unauthenticated};
use serde_json::{Value, json};

use crate::server::{kim_works, register};
use crate::{a2a_options, start_a2a};

fn message(text: &str, skill: Option<&str>) -> Value {
    let mut m = json!({"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(s) = skill {
        m["metadata"] = json!({"skill": s});
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_scope_callers_to_skills_and_to_their_own_tasks() {
    let keys = vec![
        Key { name: "partner".into(), secret: "k-partner-1".into(), skills: vec!["skill:answer".into()] },
        Key { name: "other".into(), secret: "k-other-2".into(), skills: Vec::new() },
    ];
    let d = start_a2a(clutch_a2a::Options { keys, ..a2a_options() }).await;
    register(&d.engine, "kim", "skill:answer").await;
    register(&d.engine, "slow", "skill:slow").await;
    let worker = kim_works(d.engine.clone());

    // The card: public, with the schemes it takes, either will do; each version says so its way.
    let card: Value =
        reqwest::get(format!("{}/.well-known/agent-card.json", d.url)).await.unwrap().json().await.unwrap();
    assert_eq!(card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"], "X-API-Key");
    assert_eq!(card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"], "Bearer");
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"apiKey": {"list": []}}}, {"schemes": {"bearer": {"list": []}}}])
    );
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    assert!(card.get("security").is_none() && card.get("supportsAuthenticatedExtendedCard").is_none(), "{card}");
    let v03: Value = reqwest::get(format!("{}/.well-known/agent.json", d.url)).await.unwrap().json().await.unwrap();
    assert_eq!(
        v03["securitySchemes"],
        json!({
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "A partner's key, scoped to skills."},
            "bearer": {"type": "http", "scheme": "bearer", "description": "A partner's key, or one of the hub's API tokens."},
        })
    );
    assert_eq!(v03["security"], json!([{"apiKey": []}, {"bearer": []}]));
    assert_eq!(v03["supportsAuthenticatedExtendedCard"], true);
    // It names no agent; the extended card, for a caller with a credential, does, in its version.
    assert!(!card.to_string().contains("agent:kim") && !v03.to_string().contains("agent:kim"), "{card}");
    let (status, body) = d.rpc_as(&[("X-API-Key", "k-other-2")], Some("1.0"), "GetExtendedAgentCard", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["result"]["skills"].to_string().contains("agent:kim"), "{body}");
    assert!(body["result"]["supportedInterfaces"].is_array() && body["result"].get("url").is_none(), "{body}");
    let (status, body) =
        d.rpc_as(&[("X-API-Key", "k-other-2")], None, "agent/getAuthenticatedExtendedCard", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["result"]["skills"].to_string().contains("agent:kim"), "{body}");
    assert!(body["result"]["url"].is_string() && body["result"].get("supportedInterfaces").is_none(), "{body}");
    let (status, _) = d.rpc_as(&[], Some("1.0"), "GetExtendedAgentCard", json!({})).await;
    assert_eq!(status, 401);

    let send = |skill: Option<&'static str>| json!({"message": message("6 × 7?", skill)});
    // No credential, a wrong one: 401, said as JSON-RPC.
    for headers in [vec![], vec![("X-API-Key", "nope")], vec![("Authorization", "Bearer nope")]] {
        let (status, body) = d.rpc_as(&headers, Some("1.0"), "SendMessage", send(Some("skill:answer"))).await;
        assert_eq!(status, 401, "{headers:?}: {body}");
        assert_eq!(body["error"]["data"][0]["reason"], "UNAUTHENTICATED", "{body}");
    }
    // The partner's key, either way: its skill only.
    let partner = [("X-API-Key", "k-partner-1")];
    let (status, body) = d.rpc_as(&partner, Some("1.0"), "SendMessage", send(Some("skill:answer"))).await;
    assert_eq!(
        (status, body["result"]["task"]["status"]["state"].as_str()),
        (200, Some("TASK_STATE_COMPLETED")),
        "{body}"
    );
    let id = body["result"]["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(d.engine.task(&id).unwrap().requester.as_deref(), Some("user:a2a.partner"));
    let bearer = [("Authorization", "Bearer k-partner-1")];
    let (status, _) = d.rpc_as(&bearer, Some("1.0"), "GetTask", json!({"id": id})).await;
    assert_eq!(status, 200);
    for skill in [Some("skill:slow"), None] {
        let (status, body) = d.rpc_as(&partner, Some("1.0"), "SendMessage", send(skill)).await;
        assert_eq!(status, 403, "{skill:?}: {body}");
        assert_eq!(body["error"]["data"][0]["reason"], "PERMISSION_DENIED");
        assert!(body["error"]["message"].as_str().unwrap().contains("skill:answer"), "{body}");
    }
    // Another partner sees nothing of it.
    let other = [("X-API-Key", "k-other-2")];
    let (_, body) = d.rpc_as(&other, Some("1.0"), "GetTask", json!({"id": id})).await;
    assert_eq!(body["error"]["code"], -32001);
    let (_, body) = d.rpc_as(&other, Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(body["result"]["totalSize"], 0);
    let (_, body) = d.rpc_as(&partner, Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(body["result"]["totalSize"], 1);
    worker.abort();
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_screening_hub_sends_strangers_to_its_screening_agent() {
    let screen = Unauthenticated::Screen("skill:screening".into());
    let d = start_a2a(clutch_a2a::Options { unauthenticated: screen, ..a2a_options() }).await;
    register(&d.engine, "kim", "skill:answer").await;
    register(&d.engine, "gate", "skill:screening").await;
    let sent = d
        .rpc(Some("1.0"), "SendMessage", json!({"message": message("let me in", Some("skill:answer")), "configuration": {"returnImmediately": true}}))
        .await;
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while d.engine.task(&id).unwrap().agent.is_none() {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let task = d.engine.task(&id).unwrap();
    assert_eq!(
        (task.agent.as_deref(), task.requires.clone()),
        (Some("agent:gate"), vec!["skill:screening".to_owned()])
    );
    assert_eq!(task.requester.as_deref(), Some("user:a2a.anonymous"));
    let inbox = d.engine.inbox("agent:gate", std::time::Duration::ZERO).await.unwrap();
    assert_eq!(inbox.tasks[0].request["a2a"]["asked_skill"], "skill:answer", "the screener sees what was asked");
    d.stop().await;
}
