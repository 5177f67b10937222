//! Message signatures (§6): ed25519 over the RFC 8785 (JCS) canonical JSON of the envelope exactly as
//! the client sent it, without `security.auth.sig`. Keys and signatures travel as base64url without
//! padding.
//!
//! The signed bytes are [`canonical`]: the client's JSON object with `security.auth.sig` removed (its
//! `scheme` and `kid` stay, so they are signed too), written in JCS form: object members sorted by
//! their UTF-16 code units, no whitespace, numbers as ECMAScript doubles, strings with the minimal
//! escapes. Whitespace and member order in what the client sent do not matter.
//!
//! A signed message must carry `id` and `ts`: the daemon fills absent ones *after* verifying, so a
//! signature over a message without them would not cover them (and could be replayed under fresh ids).

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signer as _, ed25519};
use serde_json::{Map, Value};

use crate::ErrorCode;

/// The one signature scheme defined.
pub const SCHEME: &str = "ed25519";

/// Why a signed message does not pass [`verify`] (or cannot be [`sign`]ed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The message has no `security.auth`.
    #[error("the message is not signed: it has no `security.auth`")]
    Missing,
    /// `security.auth` (or the envelope around it) is not shaped as a signature needs.
    #[error("`{field}` {problem}")]
    Malformed { field: &'static str, problem: &'static str },
    /// `security.auth.scheme` is not `ed25519`.
    #[error("unsupported signature scheme `{0}`; the only one is `ed25519`")]
    UnsupportedScheme(String),
    /// `security.auth.sig` is not 64 bytes of base64url.
    #[error("`security.auth.sig` is {0}")]
    BadSignatureEncoding(DecodeError),
    /// The message lacks a field the signature must cover.
    #[error(
        "a signed message must carry `{0}`: the daemon fills an absent one after verification, so the \
         signature would not cover it"
    )]
    Unbound(&'static str),
    /// The signature is well-formed but does not verify with the key: the message was changed after
    /// signing, or signed with another key.
    #[error("the signature does not verify with the agent's key `{0}`")]
    Mismatch(String),
}

impl Error {
    /// Every signature failure is answered `UNAUTHORIZED`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::Unauthorized
    }

    /// The envelope field the error is about, for the error body's `field`.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Error::Missing => Some("security.auth"),
            Error::Malformed { field, .. } => Some(field),
            Error::UnsupportedScheme(_) => Some("security.auth.scheme"),
            Error::BadSignatureEncoding(_) | Error::Mismatch(_) => Some("security.auth.sig"),
            Error::Unbound(field) => Some(field),
        }
    }
}

/// Why a base64url string does not decode to the expected bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not base64url at all; says which character or what else is wrong.
    #[error("not base64url: {0}")]
    NotBase64url(String),
    /// Valid base64url of the wrong length.
    #[error("not {expected} bytes of base64url (it decodes to {got} bytes)")]
    Length { expected: usize, got: usize },
}

/// Why a key does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// 32 bytes that are no point on the curve.
    #[error("not an ed25519 public key: the 32 bytes are not a point on the curve")]
    NotOnCurve,
    /// A point of small order, which any signature could verify against.
    #[error("a weak ed25519 public key (a point of small order); generate a new key pair")]
    Weak,
}

/// An agent's ed25519 public key; its text form is 32 bytes in base64url without padding.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(ed25519_dalek::VerifyingKey);

impl PublicKey {
    /// The 32 bytes of the key.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }
}

impl FromStr for PublicKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, KeyError> {
        let bytes: [u8; 32] = decode(s)?;
        let key = ed25519_dalek::VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::NotOnCurve)?;
        if key.is_weak() {
            return Err(KeyError::Weak);
        }
        Ok(PublicKey(key))
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&URL_SAFE_NO_PAD.encode(self.0.as_bytes()))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

/// An ed25519 secret key (its 32-byte seed). Its text form is secret, so it has no `Display`: use
/// [`SigningKey::to_base64url`] where printing it is the point. `Debug` shows the public half only.
#[derive(Clone)]
pub struct SigningKey(ed25519_dalek::SigningKey);

impl SigningKey {
    /// The public half, for `org.yaml`.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// The secret seed in base64url without padding (43 characters).
    pub fn to_base64url(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.as_bytes())
    }
}

impl FromStr for SigningKey {
    type Err = KeyError;

    /// Parses the 32-byte seed in base64url without padding.
    fn from_str(s: &str) -> Result<Self, KeyError> {
        let seed: [u8; 32] = decode(s)?;
        Ok(SigningKey(ed25519_dalek::SigningKey::from_bytes(&seed)))
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey(public: {})", self.public_key())
    }
}

/// A new key pair from the operating system's random source.
///
/// # Panics
/// When the operating system cannot provide randomness, which leaves nothing safe to do.
pub fn generate() -> SigningKey {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).expect("the operating system's random source failed");
    let key = SigningKey(ed25519_dalek::SigningKey::from_bytes(&seed));
    seed.fill(0);
    key
}

/// The bytes a signature covers: the JCS (RFC 8785) form of `msg` with `security.auth.sig` removed.
pub fn canonical(msg: &Value) -> Vec<u8> {
    let mut copy = msg.clone();
    if let Some(auth) = copy.pointer_mut("/security/auth").and_then(Value::as_object_mut) {
        auth.remove("sig");
    }
    // A `Value` holds no non-finite number and only string keys, the two things JCS cannot write.
    serde_json_canonicalizer::to_vec(&copy).expect("a JSON value always canonicalizes")
}

/// Signs `msg` (a JSON object) with `key`, setting `security.auth` to `{scheme, kid, sig}` and keeping
/// any `security.policy`. `msg` must already carry `id` and `ts` (see the module documentation).
pub fn sign(msg: &mut Value, kid: &str, key: &SigningKey) -> Result<(), Error> {
    let Some(obj) = msg.as_object_mut() else {
        return Err(Error::Malformed { field: "$", problem: "must be a JSON object" });
    };
    unbound(obj)?;
    let security = obj.entry("security").or_insert_with(|| Value::Object(Map::new()));
    let Some(security) = security.as_object_mut() else {
        return Err(Error::Malformed { field: "security", problem: "must be a JSON object" });
    };
    security.insert(
        "auth".into(),
        serde_json::json!({ "scheme": SCHEME, "kid": kid }), // `sig` is added once the rest is signed
    );
    let signature = key.0.sign(&canonical(msg));
    let sig = URL_SAFE_NO_PAD.encode(signature.to_bytes());
    if let Some(auth) = msg.pointer_mut("/security/auth").and_then(Value::as_object_mut) {
        auth.insert("sig".into(), Value::String(sig));
    }
    Ok(())
}

/// The key id a signed message names (`security.auth.kid`), to look its key up before [`verify`].
pub fn kid(msg: &Value) -> Result<&str, Error> {
    auth_str(auth(msg)?, "kid", "security.auth.kid")
}

/// Checks that `msg` carries a valid ed25519 signature by `key` over its [`canonical`] form. Uses
/// strict verification (no malleable or small-order signatures).
pub fn verify(msg: &Value, key: &PublicKey) -> Result<(), Error> {
    let auth = auth(msg)?;
    let scheme = auth_str(auth, "scheme", "security.auth.scheme")?;
    if scheme != SCHEME {
        return Err(Error::UnsupportedScheme(scheme.to_owned()));
    }
    let kid = auth_str(auth, "kid", "security.auth.kid")?;
    let sig = auth_str(auth, "sig", "security.auth.sig")?;
    let bytes: [u8; 64] = decode(sig).map_err(Error::BadSignatureEncoding)?;
    unbound(msg.as_object().expect("auth() found an object"))?;
    let signature = ed25519::Signature::from_bytes(&bytes);
    key.0.verify_strict(&canonical(msg), &signature).map_err(|_| Error::Mismatch(kid.to_owned()))
}

fn auth(msg: &Value) -> Result<&Map<String, Value>, Error> {
    match msg.as_object().and_then(|m| m.get("security")).and_then(|s| s.get("auth")) {
        None | Some(Value::Null) => Err(Error::Missing),
        Some(Value::Object(auth)) => Ok(auth),
        Some(_) => Err(Error::Malformed { field: "security.auth", problem: "must be an object {scheme, kid, sig}" }),
    }
}

fn auth_str<'a>(auth: &'a Map<String, Value>, key: &str, field: &'static str) -> Result<&'a str, Error> {
    match auth.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(Error::Malformed { field, problem: "must not be empty" }),
        None | Some(Value::Null) => Err(Error::Malformed { field, problem: "is required" }),
        Some(_) => Err(Error::Malformed { field, problem: "must be a string" }),
    }
}

/// `id` and `ts` must be present for the signature to cover them.
fn unbound(obj: &Map<String, Value>) -> Result<(), Error> {
    for field in ["id", "ts"] {
        if !obj.get(field).is_some_and(Value::is_string) {
            return Err(Error::Unbound(field));
        }
    }
    Ok(())
}

/// Decodes base64url without padding into exactly `N` bytes, saying precisely what is wrong.
fn decode<const N: usize>(s: &str) -> Result<[u8; N], DecodeError> {
    let not = |why: String| Err(DecodeError::NotBase64url(why));
    if s.is_empty() {
        return not("empty".into());
    }
    let is_url = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if let Some((i, c)) = s.char_indices().find(|(_, c)| !is_url(*c)) {
        return not(match c {
            '=' => "it has `=` padding; write base64url without padding".into(),
            '+' | '/' => format!(
                "`{c}` at position {i} belongs to standard base64; base64url writes `-` for `+` and `_` for `/`"
            ),
            c => format!("`{}` at position {i} is not a base64url character", c.escape_default()),
        });
    }
    let Ok(bytes) = URL_SAFE_NO_PAD.decode(s) else {
        return not("truncated or corrupted (its length or last character cannot end base64url)".into());
    };
    let got = bytes.len();
    bytes.try_into().map_err(|_| DecodeError::Length { expected: N, got })
}
