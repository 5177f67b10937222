//! Who may do what: each role against each access level, and an agent token acting as another agent
//! refused from the raw body, whatever else the body holds, before anything validates it.

use clutch_core::access::{Access, Caller, Grant, Role};
use serde_json::{Value, json};

fn caller(role: Option<Role>) -> Caller {
    Caller(role.map(|role| Grant {
        name: role.as_str().into(),
        role,
        agent_id: (role == Role::Agent).then(|| "agent:ken".into()),
    }))
}

/// `Ok` or the refusal's `code field`.
fn outcome(result: Result<(), clutch_core::Refusal>) -> String {
    match result {
        Ok(()) => "ok".into(),
        Err(r) => format!("{} {}", r.code.as_str(), r.field.as_deref().unwrap_or("-")),
    }
}

#[test]
fn each_role_may_what_its_access_allows() {
    let mut table = String::new();
    for role in [None, Some(Role::Admin), Some(Role::Agent), Some(Role::Observer)] {
        let who = role.map_or("open", Role::as_str);
        let answers: Vec<String> =
            [Access::Open, Access::Read, Access::Write].iter().map(|a| outcome(caller(role).may(*a))).collect();
        table.push_str(&format!("{who}: {}\n", answers.join(", ")));
    }
    assert_eq!(
        table,
        "open: ok, ok, ok\n\
         admin: ok, ok, ok\n\
         agent: ok, ok, ok\n\
         observer: ok, ok, FORBIDDEN -\n"
    );
}

#[test]
fn an_agent_token_naming_another_agent_is_refused_before_validation() {
    let check = |role: Option<Role>, body: Value, field: &str| outcome(caller(role).may_act_as_in(&body, field));
    // Malformed bodies: only the acting field is read.
    let other = json!({"from": {"agent_id": "agent:eve"}, "type": 7, "bogus": true});
    assert_eq!(check(Some(Role::Agent), other.clone(), "from.agent_id"), "FORBIDDEN from.agent_id");
    assert_eq!(check(Some(Role::Admin), other.clone(), "from.agent_id"), "ok");
    assert_eq!(check(None, other.clone(), "from.agent_id"), "ok");
    assert_eq!(check(Some(Role::Observer), other, "from.agent_id"), "FORBIDDEN -");
    let own = json!({"agent_id": "agent:ken", "capabilities": "not a list"});
    assert_eq!(check(Some(Role::Agent), own, "agent_id"), "ok");
    assert_eq!(check(Some(Role::Agent), json!({"agent_id": "agent:eve"}), "agent_id"), "FORBIDDEN agent_id");
    // Absent, not a string, or no object at all: left to validation.
    for body in [json!({}), json!({"agent_id": 7}), json!({"from": "agent:eve"}), json!([1, 2]), json!("x")] {
        assert_eq!(check(Some(Role::Agent), body.clone(), "from.agent_id"), "ok", "{body}");
        assert_eq!(check(Some(Role::Agent), body.clone(), "agent_id"), "ok", "{body}");
    }
}
