//! NATS decentralized authentication for the fleet's tests, without `nsc`: the JWTs that bind an
//! operator, its accounts and their users (as nats-io/jwt v2 encodes them), and the users'
//! `.creds` files.
//!
//! A JWT is `header.claims.signature`, each part base64url without padding: the header
//! `{"typ":"JWT","alg":"ed25519-nkey"}`, the claims (`jti`, `iat`, `iss`, `sub`, `name`, maybe
//! `exp`, and `nats` with the entity's `type` and `version: 2`), and the Ed25519 signature of
//! `header.claims` by the issuer's NKey. The `jti` is the base32 (no padding) SHA-512/256 digest
//! of the claims serialized with an empty `jti`.

use std::time::{SystemTime, UNIX_EPOCH};

use data_encoding::{BASE32_NOPAD, BASE64URL_NOPAD};
use nkeys::KeyPair;
use serde_json::{json, Value};
use sha2::{Digest, Sha512_256};

/// The header of every NATS JWT of version 2.
const HEADER: &str = r#"{"typ":"JWT","alg":"ed25519-nkey"}"#;

/// No limit, in the JWTs' limits.
const NO_LIMIT: i64 = -1;

/// Seconds since the Unix epoch.
pub fn now() -> i64 {
    let elapsed = SystemTime::now().duration_since(UNIX_EPOCH).expect("a clock after 1970");
    i64::try_from(elapsed.as_secs()).expect("seconds that fit an i64")
}

/// A JWT of `subject` named `name`, signed by `issuer`, with the entity's claims `nats` and,
/// if given, an expiry (`exp`, seconds since the Unix epoch).
pub fn encode(
    issuer: &KeyPair,
    subject: &str,
    name: &str,
    nats: Value,
    expires: Option<i64>,
) -> String {
    let mut claims = json!({
        "jti": "",
        "iat": now(),
        "iss": issuer.public_key(),
        "sub": subject,
        "name": name,
        "nats": nats,
    });
    if let Some(expires) = expires {
        claims["exp"] = expires.into();
    }
    let unnamed = serde_json::to_vec(&claims).expect("the claims serialize");
    claims["jti"] = BASE32_NOPAD.encode(&Sha512_256::digest(&unnamed)).into();
    let claims = serde_json::to_vec(&claims).expect("the claims serialize");
    let signed = format!(
        "{}.{}",
        BASE64URL_NOPAD.encode(HEADER.as_bytes()),
        BASE64URL_NOPAD.encode(&claims)
    );
    let signature = issuer.sign(signed.as_bytes()).expect("the issuer signs");
    format!("{signed}.{}", BASE64URL_NOPAD.encode(&signature))
}

/// The self-signed JWT of `operator`, whose system account (the server's own, which JetStream
/// needs) is `system`.
pub fn operator_jwt(operator: &KeyPair, name: &str, system: &KeyPair) -> String {
    let nats = json!({ "type": "operator", "version": 2, "system_account": system.public_key() });
    encode(operator, &operator.public_key(), name, nats, None)
}

/// The JWT of `account`, signed by `operator`: no limits, and with `jetstream` JetStream enabled
/// without limits (the fleet creates its stream and buckets in it; the system account has none).
pub fn account_jwt(operator: &KeyPair, account: &KeyPair, name: &str, jetstream: bool) -> String {
    let storage = if jetstream { NO_LIMIT } else { 0 };
    let nats = json!({
        "type": "account",
        "version": 2,
        "limits": {
            "subs": NO_LIMIT, "data": NO_LIMIT, "payload": NO_LIMIT,
            "imports": NO_LIMIT, "exports": NO_LIMIT, "wildcards": true,
            "conn": NO_LIMIT, "leaf": NO_LIMIT,
            "mem_storage": storage, "disk_storage": storage,
            "streams": NO_LIMIT, "consumer": NO_LIMIT,
        },
    });
    encode(operator, &account.public_key(), name, nats, None)
}

/// The permissions of a user: the subjects it may publish to and those it may subscribe to.
pub struct Permissions<'a> {
    /// The subjects it may publish to.
    pub publish: &'a [&'a str],
    /// The subjects it may subscribe to.
    pub subscribe: &'a [&'a str],
}

/// The JWT of `user`, signed by `account`: no limits, the `permissions` given (else all
/// subjects), and the expiry given (else none).
pub fn user_jwt(
    account: &KeyPair,
    user: &KeyPair,
    name: &str,
    permissions: Option<&Permissions>,
    expires: Option<i64>,
) -> String {
    let mut nats = json!({
        "type": "user",
        "version": 2,
        "subs": NO_LIMIT, "data": NO_LIMIT, "payload": NO_LIMIT,
    });
    if let Some(permissions) = permissions {
        nats["pub"] = json!({ "allow": permissions.publish });
        nats["sub"] = json!({ "allow": permissions.subscribe });
    }
    encode(account, &user.public_key(), name, nats, expires)
}

/// A `.creds` file's contents, as `nsc` writes them: the user's JWT and its NKey seed.
pub fn creds(jwt: &str, user: &KeyPair) -> String {
    let seed = user.seed().expect("the user's seed");
    format!(
        "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
         ************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\
         NKEYs are sensitive and should be treated as secrets.\n\n\
         -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n\n\
         *************************************************************\n"
    )
}
