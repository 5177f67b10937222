//! The error body built from validation problems: its code, message, field and JSON shape.

use clutch_proto::ErrorCode;
use clutch_proto::error::ErrorBody;
use clutch_proto::validate;
use serde_json::{Value, json};

use crate::{defaults, minimal, with, without};

fn body_for(input: &Value) -> ErrorBody {
    ErrorBody::from_problems(validate::message(input, &defaults()).unwrap_err())
}

#[test]
fn one_problem_json_shape() {
    let body = body_for(&without(minimal(), &["payload"]));
    assert_eq!(
        serde_json::to_value(&body).unwrap(),
        json!({
            "code": "VALIDATION_FAILED",
            "message": "payload: required (an object; use {} when there is nothing to say)",
            "field": "payload",
            "retryable": false,
            "problems": [
                { "path": "payload", "message": "required (an object; use {} when there is nothing to say)" }
            ]
        })
    );
}

#[test]
fn many_problems_json_shape() {
    let body = body_for(&json!({ "thread_id": "thr_x", "run_id": 1 }));
    assert_eq!(body.code, ErrorCode::ValidationFailed);
    let value = serde_json::to_value(&body).unwrap();
    let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
    let mut expected = vec!["code", "message", "field", "retryable", "problems"];
    expected.sort_unstable();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(keys, expected, "{value:#}");

    let problems = value["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 7, "{value:#}");
    for p in problems {
        let keys: Vec<&String> = p.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 2, "{p}");
        assert!(p["path"].is_string() && p["message"].is_string(), "{p}");
    }
    let first = &problems[0];
    assert_eq!(value["field"], first["path"]);
    assert_eq!(
        value["message"],
        format!("7 problems, first: {}: {}", first["path"].as_str().unwrap(), first["message"].as_str().unwrap())
    );
    assert_eq!(value["retryable"], false);
    let back: ErrorBody = serde_json::from_value(value).unwrap();
    assert_eq!(back, body);
}

#[test]
fn unknown_type_alone_is_unknown_type() {
    let body = body_for(&with(minimal(), json!({ "type": "task.frobnicate" })));
    assert_eq!(body.code, ErrorCode::UnknownType);
    assert_eq!(body.field.as_deref(), Some("type"));
    assert!(!body.retryable);
    assert_eq!(serde_json::to_value(&body).unwrap()["code"], "UNKNOWN_TYPE");
    assert_eq!(ErrorCode::UnknownType.http_status(), 400);

    // With anything else wrong, or a type that is not even a string, it is a plain validation failure.
    let body = body_for(&with(minimal(), json!({ "type": "task.frobnicate", "attempt": 0 })));
    assert_eq!(body.code, ErrorCode::ValidationFailed);
    let body = body_for(&with(minimal(), json!({ "type": 5 })));
    assert_eq!(body.code, ErrorCode::ValidationFailed);
    let body = body_for(&without(minimal(), &["type"]));
    assert_eq!(body.code, ErrorCode::ValidationFailed);
}

#[test]
fn builder_fields_and_retryability_follow_the_code() {
    let body = ErrorBody::new(ErrorCode::RateLimited, "slow down").field("run_id").hint("retry in 1s");
    assert_eq!(
        serde_json::to_value(&body).unwrap(),
        json!({ "code": "RATE_LIMITED", "message": "slow down", "field": "run_id", "retryable": true, "hint": "retry in 1s" })
    );
    let bare = serde_json::to_value(ErrorBody::new(ErrorCode::TaskNotFound, "no such task")).unwrap();
    assert_eq!(bare, json!({ "code": "TASK_NOT_FOUND", "message": "no such task", "retryable": false }));
    for code in ErrorCode::ALL {
        assert_eq!(ErrorBody::new(*code, "x").retryable, code.retryable());
    }
}

/// The serialized body of `input`'s problems, as a face sends it.
fn wire(problems: clutch_proto::Problems) -> String {
    serde_json::to_string(&ErrorBody::from_problems(problems)).unwrap()
}

#[test]
fn a_five_megabyte_field_name_yields_an_error_under_4_kb() {
    let name = "n".repeat(5 << 20);
    let mut input = minimal();
    input[name.as_str()] = json!(1);
    let text = wire(validate::message(&input, &defaults()).unwrap_err());
    assert!(text.len() < 4096, "{} bytes", text.len());
    let body: Value = serde_json::from_str(&text).unwrap();
    let quoted = format!("{}…", "n".repeat(clutch_proto::error::QUOTE_MAX - 1));
    assert_eq!(body["field"], quoted);
    assert_eq!(body["problems"][0]["path"], quoted);
    assert!(body["message"].as_str().unwrap().starts_with(&format!("{quoted}: unknown field")), "{body}");

    // Nested, in a card, with characters JSON escapes or that take four bytes.
    for name in ["\u{1}".repeat(5 << 20), "😀".repeat(1 << 20)] {
        let mut input = crate::seed_card();
        input["display"][name.as_str()] = json!(1);
        let text = wire(validate::agent_card(&input).unwrap_err());
        assert!(text.len() < 4096, "{} bytes", text.len());
    }
}

#[test]
fn values_are_quoted_short() {
    let long = "x".repeat(1 << 20);
    for (field, value) in [("type", long.clone()), ("v", long.clone())] {
        let input = with(minimal(), json!({ field: value }));
        let text = wire(validate::message(&input, &defaults()).unwrap_err());
        assert!(text.len() < 4096, "{field}: {} bytes", text.len());
    }
    let mut input = minimal();
    input["attachments"] = json!([{ "kind": long, "ref": "x" }]);
    let text = wire(validate::message(&input, &defaults()).unwrap_err());
    assert!(text.len() < 4096, "{} bytes", text.len());
    let mut card = crate::seed_card();
    card["endpoints"][long.as_str()] = json!(5);
    let text = wire(validate::agent_card(&card).unwrap_err());
    assert!(text.len() < 4096, "{} bytes", text.len());
}

#[test]
fn many_problems_are_counted_and_listed_up_to_the_bound() {
    use clutch_proto::error::PROBLEMS_MAX;
    let mut input = minimal();
    for i in 0..10_000 {
        input[format!("extra{i}")] = json!(i);
    }
    let problems = validate::message(&input, &defaults()).unwrap_err();
    assert_eq!(problems.total(), 10_000);
    assert_eq!(problems.as_slice().len(), PROBLEMS_MAX);
    assert!(problems.to_string().ends_with(&format!("; and {} more", 10_000 - PROBLEMS_MAX)), "{problems}");
    let body = ErrorBody::from_problems(problems);
    assert_eq!(body.problems.len(), PROBLEMS_MAX);
    assert!(body.message.starts_with("10000 problems, first: "), "{}", body.message);
    let text = serde_json::to_string(&body).unwrap();
    assert!(text.len() < 4096, "{} bytes", text.len());

    // Many recipients, each wrong: the same bound.
    let to: Vec<Value> = (0..5000).map(|_| json!({ "agent_id": "nobody", "x": 1 })).collect();
    let text = wire(validate::message(&with(minimal(), json!({ "to": to })), &defaults()).unwrap_err());
    assert!(text.len() < 8192, "{} bytes", text.len());
}
