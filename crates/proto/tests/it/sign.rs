//! Message signatures: the RFC 8785 canonical form, sign → verify, and the precise errors for tampered
//! messages, wrong keys and malformed keys or signatures.

use clutch_proto::id::Kind;
use clutch_proto::sign::{self, DecodeError, Error, KeyError, PublicKey, SigningKey};
use clutch_proto::validate;
use serde_json::{Value, json};

use crate::{defaults, minimal, new_id};

fn jcs(text: &str) -> String {
    let value: Value = serde_json::from_str(text).unwrap();
    String::from_utf8(sign::canonical(&value)).unwrap()
}

/// A key from a fixed seed, so failures reproduce.
fn key(n: u8) -> SigningKey {
    b64(&[n; 32]).parse().unwrap()
}

/// A complete envelope as a client would sign it: `id` and `ts` present.
fn envelope() -> Value {
    let mut msg = minimal();
    msg["id"] = json!(new_id(Kind::Message));
    msg["ts"] = json!("2026-02-01T13:20:11.123Z");
    msg["payload"] = json!({"findings": ["a", "b"], "score": 0.5, "note": "caf\u{e9} \u{1F600}"});
    msg
}

#[test]
fn jcs_sorts_members_by_utf16_code_units() {
    // RFC 8785 §3.2.3: the emoji (a surrogate pair, D83D DE00) sorts before U+FB33 although its code
    // point is larger; nested objects are sorted too.
    let input = r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",
        "1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",
        "z":{"b":1,"a":2}}"#;
    assert_eq!(
        jcs(input),
        "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"z\":{\"a\":2,\"b\":1},\"\u{80}\":\"Control\",\"\u{f6}\":\"Latin Small Letter O With \
         Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\"\u{1F600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter \
         Dalet With Dagesh\"}"
    );
}

#[test]
fn jcs_writes_numbers_as_ecmascript_does() {
    // RFC 8785 §3.2.2's example, whitespace and all.
    let input = r#"{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }"#;
    assert_eq!(
        jcs(input),
        r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
    );
    // Appendix B samples, integers (always doubles in JCS) and negative zero.
    for (input, want) in [
        ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ("5e-324", "5e-324"),
        ("-5e-324", "-5e-324"),
        ("9007199254740992", "9007199254740992"),
        ("295147905179352825856", "295147905179352830000"),
        ("1e23", "1e+23"),
        ("9.999999999999997e22", "9.999999999999997e+22"),
        ("0.000001", "0.000001"),
        ("1e-7", "1e-7"),
        ("100", "100"),
        ("-0.0", "0"),
        ("1.0", "1"),
        ("18446744073709551615", "18446744073709552000"),
    ] {
        assert_eq!(jcs(&format!("[{input}]")), format!("[{want}]"), "{input}");
    }
}

#[test]
fn jcs_keeps_unicode_literal_and_escapes_only_what_it_must() {
    assert_eq!(
        jcs(r#"["\u00e9\u4e2d\ud83d\ude00", "\u001f\b\t\f\u007f", "<&>"]"#),
        "[\"é中😀\",\"\\u001f\\b\\t\\f\u{7f}\",\"<&>\"]"
    );
}

#[test]
fn canonical_form_drops_the_signature_and_nothing_else() {
    let mut msg = envelope();
    msg["security"] = json!({"auth": {"scheme": "ed25519", "kid": "k1", "sig": "AAAA"}, "policy": {"sandbox": true}});
    let canonical: Value = serde_json::from_slice(&sign::canonical(&msg)).unwrap();
    let mut want = msg.clone();
    want["security"]["auth"].as_object_mut().unwrap().remove("sig");
    assert_eq!(canonical, want);
    assert_eq!(canonical["security"]["auth"], json!({"scheme": "ed25519", "kid": "k1"}));

    // Any signature value gives the same bytes, so the signature can sit in the message it signs.
    let mut other = msg.clone();
    other["security"]["auth"]["sig"] = json!("something else");
    assert_eq!(sign::canonical(&msg), sign::canonical(&other));
}

#[test]
fn sign_then_verify() {
    let key = key(1);
    let mut msg = envelope();
    msg["security"] = json!({"policy": {"tool_allowlist": ["mcp:browser"]}});
    sign::sign(&mut msg, "ken-2026", &key).unwrap();

    let auth = &msg["security"]["auth"];
    assert_eq!(auth["scheme"], "ed25519");
    assert_eq!(auth["kid"], "ken-2026");
    let sig = auth["sig"].as_str().unwrap();
    assert_eq!(sig.len(), 86, "64 bytes in unpadded base64url: {sig}");
    assert!(sig.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{sig}");
    assert_eq!(msg["security"]["policy"], json!({"tool_allowlist": ["mcp:browser"]}), "policy kept");

    assert_eq!(sign::kid(&msg), Ok("ken-2026"));
    sign::verify(&msg, &key.public_key()).unwrap();
    // A signed envelope is a valid envelope.
    validate::message(&msg, &defaults()).unwrap();

    // ed25519 is deterministic: the same message and key give the same signature.
    let mut again = msg.clone();
    sign::sign(&mut again, "ken-2026", &key).unwrap();
    assert_eq!(again, msg);
}

#[test]
fn member_order_and_whitespace_of_the_sent_json_do_not_matter() {
    let key = key(2);
    let mut msg = envelope();
    sign::sign(&mut msg, "k", &key).unwrap();
    // The same message as another client would write it: members reversed, indented, escaped.
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                out.push_str("{\n  ");
                for (i, (k, v)) in m.iter().rev().enumerate() {
                    if i > 0 {
                        out.push_str(" ,\n  ");
                    }
                    let key: String = k.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
                    out.push_str(&format!("\"{key}\" : "));
                    write(v, out);
                }
                out.push_str("\n}");
            }
            Value::Array(items) => {
                out.push_str("[ ");
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write(v, out);
                }
                out.push_str(" ]");
            }
            Value::Number(n) if n.as_f64() == Some(0.5) => out.push_str("5.0E-1"),
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    write(&msg, &mut text);
    assert_ne!(text, msg.to_string());
    let received: Value = serde_json::from_str(&text).unwrap();
    sign::verify(&received, &key.public_key()).unwrap();
}

#[test]
fn a_tampered_message_does_not_verify() {
    let key = key(3);
    let mut msg = envelope();
    sign::sign(&mut msg, "k", &key).unwrap();
    let public = key.public_key();
    let tampered: [(&str, Value); 6] = [
        ("/payload/score", json!(0.51)),
        ("/payload/note", json!("cafe \u{1F600}")),
        ("/to", json!([{"agent_id": "agent:mallory"}])),
        ("/id", json!(new_id(Kind::Message))),
        ("/ts", json!("2026-02-01T13:20:11.124Z")),
        ("/security/auth/kid", json!("other")),
    ];
    for (pointer, value) in tampered {
        let mut changed = msg.clone();
        *changed.pointer_mut(pointer).unwrap() = value;
        let kid = changed["security"]["auth"]["kid"].as_str().unwrap().to_owned();
        assert_eq!(sign::verify(&changed, &public), Err(Error::Mismatch(kid)), "{pointer}");
    }
    let mut added = msg.clone();
    added["meta"] = json!({"x": 1});
    assert_eq!(sign::verify(&added, &public), Err(Error::Mismatch("k".into())));
    let mut flipped = msg.clone();
    let sig = flipped["security"]["auth"]["sig"].as_str().unwrap().to_owned();
    let first = if sig.starts_with('A') { "B" } else { "A" };
    flipped["security"]["auth"]["sig"] = json!(format!("{first}{}", &sig[1..]));
    assert_eq!(sign::verify(&flipped, &public), Err(Error::Mismatch("k".into())));
}

#[test]
fn another_key_does_not_verify() {
    let mut msg = envelope();
    sign::sign(&mut msg, "k", &key(4)).unwrap();
    let err = sign::verify(&msg, &key(5).public_key()).unwrap_err();
    assert_eq!(err, Error::Mismatch("k".into()));
    assert_eq!(err.to_string(), "the signature does not verify with the agent's key `k`");
    assert_eq!(err.code(), clutch_proto::ErrorCode::Unauthorized);
    assert_eq!(err.field(), Some("security.auth.sig"));
}

#[test]
fn unsigned_and_malformed_signatures_say_what_is_wrong() {
    let key = key(6);
    let public = key.public_key();
    let mut signed = envelope();
    sign::sign(&mut signed, "k", &key).unwrap();
    let with_auth = |auth: Value| {
        let mut m = signed.clone();
        m["security"]["auth"] = auth;
        m
    };
    let sig = signed["security"]["auth"]["sig"].clone();

    assert_eq!(sign::verify(&envelope(), &public), Err(Error::Missing));
    assert_eq!(sign::kid(&envelope()), Err(Error::Missing));
    assert_eq!(sign::verify(&with_auth(Value::Null), &public), Err(Error::Missing));
    assert_eq!(
        sign::verify(&with_auth(json!("sig")), &public),
        Err(Error::Malformed { field: "security.auth", problem: "must be an object {scheme, kid, sig}" })
    );
    assert_eq!(
        sign::verify(&with_auth(json!({"scheme": "rsa", "kid": "k", "sig": sig})), &public),
        Err(Error::UnsupportedScheme("rsa".into()))
    );
    assert_eq!(
        sign::verify(&with_auth(json!({"scheme": "ed25519", "sig": sig})), &public),
        Err(Error::Malformed { field: "security.auth.kid", problem: "is required" })
    );
    assert_eq!(
        sign::verify(&with_auth(json!({"scheme": "ed25519", "kid": "k", "sig": 7})), &public),
        Err(Error::Malformed { field: "security.auth.sig", problem: "must be a string" })
    );
    assert_eq!(
        sign::verify(&with_auth(json!({"scheme": "ed25519", "kid": "k", "sig": "AAAA"})), &public),
        Err(Error::BadSignatureEncoding(DecodeError::Length { expected: 64, got: 3 }))
    );
    let padded = format!("{}==", sig.as_str().unwrap());
    let err = sign::verify(&with_auth(json!({"scheme": "ed25519", "kid": "k", "sig": padded})), &public).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`security.auth.sig` is not base64url: it has `=` padding; write base64url without padding"
    );

    for field in ["id", "ts"] {
        let mut m = signed.clone();
        m.as_object_mut().unwrap().remove(field);
        let err = sign::verify(&m, &public).unwrap_err();
        assert_eq!(err, Error::Unbound(field));
        assert_eq!(err.field(), Some(field));
        let mut unsigned = envelope();
        unsigned.as_object_mut().unwrap().remove(field);
        assert_eq!(sign::sign(&mut unsigned, "k", &key), Err(Error::Unbound(field)));
    }
    assert!(matches!(sign::sign(&mut json!([1]), "k", &key), Err(Error::Malformed { field: "$", .. })));
}

#[test]
fn keys_print_and_parse_as_unpadded_base64url() {
    let secret = sign::generate();
    let public = secret.public_key();
    let text = public.to_string();
    assert_eq!(text.len(), 43);
    assert_eq!(text.parse::<PublicKey>().unwrap(), public);
    let seed = secret.to_base64url();
    assert_eq!(seed.len(), 43);
    assert_eq!(seed.parse::<SigningKey>().unwrap().public_key(), public);
    assert_ne!(sign::generate().public_key(), public, "fresh randomness each time");

    // RFC 8032 §7.1, test 1: the public key of a known seed.
    let seed = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A";
    let public = seed.parse::<SigningKey>().unwrap().public_key();
    assert_eq!(public.to_string(), "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo");
    assert_eq!(hex(&public.to_bytes()), "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");

    // The Debug form of a secret key shows only its public half.
    let debug = format!("{:?}", seed.parse::<SigningKey>().unwrap());
    assert_eq!(debug, "SigningKey(public: 11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo)");
}

#[test]
fn malformed_keys_give_precise_errors() {
    let err = |s: &str| s.parse::<PublicKey>().unwrap_err();
    let full = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
    assert_eq!(
        err(&full[..42]).to_string(),
        "not base64url: truncated or corrupted (its length or last character cannot end base64url)"
    );
    assert_eq!(err(&full[..40]), KeyError::Decode(DecodeError::Length { expected: 32, got: 30 }));
    assert_eq!(err(&full[..40]).to_string(), "not 32 bytes of base64url (it decodes to 30 bytes)");
    assert_eq!(err(&format!("{full}AAAA")), KeyError::Decode(DecodeError::Length { expected: 32, got: 35 }));
    assert_eq!(
        err(&format!("{full}=")).to_string(),
        "not base64url: it has `=` padding; write base64url without padding"
    );
    assert_eq!(
        err(&full.replace('_', "/")).to_string(),
        "not base64url: `/` at position 13 belongs to standard base64; base64url writes `-` for `+` and `_` for `/`"
    );
    assert_eq!(err("ab cd").to_string(), "not base64url: ` ` at position 2 is not a base64url character");
    assert_eq!(err("é").to_string(), "not base64url: `\\u{e9}` at position 0 is not a base64url character");
    assert_eq!(err(""), KeyError::Decode(DecodeError::NotBase64url("empty".into())));
    // The identity point has small order; y = 2 is no point on the curve.
    let mut weak = [0u8; 32];
    weak[0] = 1;
    assert_eq!(err(&b64(&weak)), KeyError::Weak);
    let mut off = [0u8; 32];
    off[0] = 2;
    assert_eq!(err(&b64(&off)), KeyError::NotOnCurve);
    assert_eq!(
        "AAAA".parse::<SigningKey>().unwrap_err(),
        KeyError::Decode(DecodeError::Length { expected: 32, got: 3 })
    );
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A message signed by a Python client (`cryptography` and the `rfc8785` package, as in README.md),
/// with the RFC 8032 test-1 seed: the daemon accepts it, and signing it here gives the same bytes.
#[test]
fn a_message_signed_in_python_verifies() {
    let sent = r#"{"v": "clutch/0.1", "id": "msg_01HX0000000000000000000001", "ts": "2026-02-01T13:20:11.123Z", "thread_id": "thr_01HX0000000000000000000002", "run_id": "run_01HX0000000000000000000003", "task_id": "task_01HX0000000000000000000004", "from": {"agent_id": "agent:ken"}, "to": [{"agent_id": "agent:orchestrator"}], "type": "task.result", "payload_type": "research.summary.v1", "payload": {"findings": ["Prices fell 3%"], "citations": [{"url": "https://example.com/r", "title": "Caf\u00e9 report"}], "score": 0.1}, "security": {"auth": {"scheme": "ed25519", "kid": "ken-2026", "sig": "p5bF5Jxw5GwFaZOANRbVf2spS8bAoR_805kpSRCjcH1hMB-gZ69OCSm6sC0zO1JCjmExNmClAB7N546fk5-8AQ"}}}"#;
    let canonical = r#"{"from":{"agent_id":"agent:ken"},"id":"msg_01HX0000000000000000000001","payload":{"citations":[{"title":"Café report","url":"https://example.com/r"}],"findings":["Prices fell 3%"],"score":0.1},"payload_type":"research.summary.v1","run_id":"run_01HX0000000000000000000003","security":{"auth":{"kid":"ken-2026","scheme":"ed25519"}},"task_id":"task_01HX0000000000000000000004","thread_id":"thr_01HX0000000000000000000002","to":[{"agent_id":"agent:orchestrator"}],"ts":"2026-02-01T13:20:11.123Z","type":"task.result","v":"clutch/0.1"}"#;
    let msg: Value = serde_json::from_str(sent).unwrap();
    assert_eq!(String::from_utf8(sign::canonical(&msg)).unwrap(), canonical);
    let secret: SigningKey = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A".parse().unwrap();
    sign::verify(&msg, &secret.public_key()).unwrap();
    let mut resigned = msg.clone();
    sign::sign(&mut resigned, "ken-2026", &secret).unwrap();
    assert_eq!(resigned, msg);
}
