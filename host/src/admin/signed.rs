//! A signed deploy through the admin API: the command line signs for the generation and lineage
//! the desired row will get (read from `GET /status`) and sends the signature in headers; the
//! instance checks it against its trusted keys and writes exactly that generation, or answers
//! 409 when the row moved meanwhile (the command line signs again).

use axum::http::{HeaderMap, StatusCode};

use crate::fleet::{Intent, Sign};
use crate::signing::Signed;

pub const GENERATION_HEADER: &str = "x-shardhost-generation";
pub const DEPLOY_ID_HEADER: &str = "x-shardhost-deploy-id";
pub const SIGNATURE_HEADER: &str = "x-shardhost-signature";
pub const SIGNED_BY_HEADER: &str = "x-shardhost-signed-by";

/// How a request is signed: not at all (no signature header), or as its headers say; 400 with
/// why when they are incomplete or malformed.
pub(super) fn sign_of(headers: &HeaderMap) -> Result<Sign<'static>, (StatusCode, String)> {
    let get = |name: &str| headers.get(name).map(|v| v.to_str().map(str::to_owned));
    let all = [
        GENERATION_HEADER,
        DEPLOY_ID_HEADER,
        SIGNATURE_HEADER,
        SIGNED_BY_HEADER,
    ];
    if all.iter().all(|h| get(h).is_none()) {
        return Ok(Sign::No);
    }
    let bad = |what: &str| {
        (
            StatusCode::BAD_REQUEST,
            format!(
                "a signed deploy needs the headers {}: {what}",
                all.join(", ")
            ),
        )
    };
    let mut values = Vec::new();
    for h in all {
        match get(h) {
            Some(Ok(v)) if !v.is_empty() => values.push(v),
            _ => return Err(bad(&format!("`{h}` is missing or not text"))),
        }
    }
    let generation = values[0]
        .parse::<u64>()
        .map_err(|_| bad(&format!("`{GENERATION_HEADER}` is not a number")))?;
    let [_, deploy_id, signature, key] = <[String; 4]>::try_from(values).expect("four headers");
    if !crate::fleet_table::is_id(&deploy_id) {
        return Err(bad(&format!("`{DEPLOY_ID_HEADER}` is not an id")));
    }
    Ok(Sign::Made(Intent {
        generation,
        deploy_id,
        signed: Signed { key, signature },
    }))
}
