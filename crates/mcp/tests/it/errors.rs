//! Failures are tool results with `isError: true` and `{code, message, recoverable, suggestion}`
//! (plus `field`), with the protocol's codes; unknown arguments are refused, not ignored.

use clutch_proto::ErrorCode;
use serde_json::{Value, json};

use crate::{ERAS, connect, ok, refused, start};

fn assert_shape(body: &Value, code: &str, recoverable: bool) {
    assert_eq!(body["code"], code, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert_eq!(body["recoverable"], recoverable, "{body}");
    assert!(body["suggestion"].as_str().is_some_and(|s| !s.is_empty()), "{body}");
}

#[tokio::test]
async fn unknown_and_missing_arguments_are_refused_with_the_argument_named() {
    let daemon = start().await;
    for era in ERAS {
        let client = connect(&format!("{}/mcp", daemon.url), era).await;
        ok(&client, "agent_register", json!({"name": "ada", "runtime": "claude_code"})).await;

        let body = refused(&client, "agent_heartbeat", json!({"agent_id": "agent:ada", "mood": "happy"})).await;
        assert_shape(&body, "VALIDATION_FAILED", true);
        assert_eq!(body["field"], "mood");
        assert!(body["message"].as_str().unwrap().contains("unknown field `mood`"), "{body}");

        let body = refused(&client, "agent_register", json!({"name": "ada"})).await;
        assert_shape(&body, "VALIDATION_FAILED", true);
        assert_eq!(body["field"], "runtime");

        let body = refused(&client, "agent_list", json!({"status": "online"})).await;
        assert_shape(&body, "VALIDATION_FAILED", true);
        assert_eq!(body["field"], "status");

        let body = refused(&client, "agent_heartbeat", json!({"agent_id": "agent:ada", "status": "sleepy"})).await;
        assert_shape(&body, "VALIDATION_FAILED", true);
        assert_eq!(body["field"], "status");

        let body =
            refused(&client, "agent_register", json!({"name": "ada", "runtime": "x", "capabilities": "ts"})).await;
        assert_eq!((body["code"].as_str(), body["field"].as_str()), (Some("VALIDATION_FAILED"), Some("capabilities")));
        client.cancel().await.unwrap();
    }
    daemon.stop().await;
}

#[tokio::test]
async fn engine_refusals_use_the_protocol_codes() {
    let daemon = start().await;
    let client = connect(&format!("{}/mcp", daemon.url), crate::Era::Modern).await;

    let body = refused(&client, "agent_heartbeat", json!({"agent_id": "agent:nobody"})).await;
    assert_shape(&body, "AGENT_NOT_FOUND", true);
    assert!(body["suggestion"].as_str().unwrap().contains("agent_register"), "{body}");

    let body = refused(&client, "agent_unregister", json!({"id": "agent:nobody"})).await;
    assert_shape(&body, "AGENT_NOT_FOUND", true);
    assert_eq!(body["field"], "id");

    let body = refused(&client, "agent_register", json!({"name": "bad name!", "runtime": "claude_code"})).await;
    assert_shape(&body, "VALIDATION_FAILED", true);
    assert_eq!(body["field"], "name");

    let body =
        refused(&client, "agent_register", json!({"name": "ok", "runtime": "x", "capabilities": ["fine", "bad id!"]}))
            .await;
    assert_shape(&body, "VALIDATION_FAILED", true);
    assert_eq!(body["field"], "capabilities[1]", "{body}");

    let body = refused(&client, "agent_register", json!({"name": "ok", "runtime": " "})).await;
    assert_eq!(body["field"], "runtime");

    let body = refused(&client, "agent_heartbeat", json!({"agent_id": "agent:"})).await;
    assert_shape(&body, "VALIDATION_FAILED", true);
    assert_eq!(body["field"], "agent_id");
    client.cancel().await.unwrap();
    daemon.stop().await;
}

#[test]
fn recoverable_follows_the_stated_rule() {
    use clutch_mcp::recoverable;
    for code in ErrorCode::ALL {
        let needs_someone_else = matches!(
            code,
            ErrorCode::Unauthorized
                | ErrorCode::Forbidden
                | ErrorCode::HostNotAllowed
                | ErrorCode::OriginNotAllowed
                | ErrorCode::BudgetExceeded
        );
        let expected = code.retryable() || ((400..500).contains(&code.http_status()) && !needs_someone_else);
        assert_eq!(recoverable(*code), expected, "{code}");
    }
    assert!(recoverable(ErrorCode::TaskNotFound) && recoverable(ErrorCode::InvalidTransition));
    assert!(recoverable(ErrorCode::Unavailable) && recoverable(ErrorCode::Internal));
    assert!(!recoverable(ErrorCode::Forbidden) && !recoverable(ErrorCode::DeliveryFailed));
}
