//! A handler that hoards HTTP responses: it keeps every response it gets, its body unread, in a
//! list that outlives the call (an instance lives across calls). What a host must not let hold
//! its memory (the `http` tests).
//!
//! Each record's data is a command:
//! - `{"url": U, "keep": N}`: N GETs of U, one after the other, each response kept unread.
//!   Ack when all N came; else `RetryAfter(responses kept by this record)`, the error logged.
//! - `{"read": true}`: reads the body of every response kept so far to its end. Ack when every
//!   one was read whole; else `RetryAfter(bodies read whole)`, the first error logged.

use std::cell::RefCell;

use shardhost_guest::__private::bindings::wasi::http::outgoing_handler;
use shardhost_guest::__private::bindings::wasi::http::types::{
    ErrorCode, Fields, IncomingResponse, OutgoingRequest, Scheme, http_error_code,
};
use shardhost_guest::__private::bindings::wasi::io::streams::StreamError;
use shardhost_guest::serde::Deserialize;
use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record};

thread_local! {
    /// Every response kept, across calls.
    static KEPT: RefCell<Vec<IncomingResponse>> = const { RefCell::new(Vec::new()) };
}

#[derive(Deserialize)]
#[serde(crate = "shardhost_guest::serde")]
struct Command {
    #[serde(default)]
    url: String,
    #[serde(default)]
    keep: u32,
    #[serde(default)]
    read: bool,
}

fn hoard(_info: &BatchInfo, records: &[Record]) -> BatchOutcome {
    BatchOutcome::Each(records.iter().map(one).collect())
}

fn one(record: &Record) -> Outcome {
    let Ok(command) = record.json::<Command>() else {
        return Outcome::Drop;
    };
    if command.read {
        return read_kept();
    }
    for kept in 0..command.keep {
        match get(&command.url) {
            Ok(response) => KEPT.with_borrow_mut(|k| k.push(response)),
            Err(why) => {
                shardhost_guest::warn!("request {} of {}: {why}", kept + 1, command.keep);
                return Outcome::RetryAfter(u64::from(kept));
            }
        }
    }
    Outcome::Ack
}

/// One GET of `url` (`http://host:port/path`), waited for; its body is not read.
fn get(url: &str) -> Result<IncomingResponse, String> {
    let rest = url.strip_prefix("http://").ok_or("only http:// URLs")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let request = OutgoingRequest::new(Fields::new());
    request
        .set_scheme(Some(&Scheme::Http))
        .and_then(|()| request.set_authority(Some(authority)))
        .and_then(|()| request.set_path_with_query(Some(path)))
        .map_err(|()| "the host refuses the URL".to_owned())?;
    let future = outgoing_handler::handle(request, None).map_err(|e| shown(&e))?;
    future.subscribe().block();
    match future.get() {
        Some(Ok(Ok(response))) => Ok(response),
        Some(Ok(Err(code))) => Err(shown(&code)),
        _ => Err("no response".to_owned()),
    }
}

/// Reads every kept body to its end.
fn read_kept() -> Outcome {
    let kept = KEPT.with_borrow_mut(std::mem::take);
    let mut whole = 0;
    for (i, response) in kept.iter().enumerate() {
        match read(response) {
            Ok(()) => whole += 1,
            Err(why) => {
                shardhost_guest::warn!("kept response {}: {why}", i + 1);
                return Outcome::RetryAfter(whole);
            }
        }
    }
    Outcome::Ack
}

fn read(response: &IncomingResponse) -> Result<(), String> {
    let body = response.consume().map_err(|()| "already consumed")?;
    let stream = body.stream().map_err(|()| "no body stream")?;
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(_) => {}
            Err(StreamError::Closed) => return Ok(()),
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(http_error_code(&e).map_or_else(|| e.to_debug_string(), |c| shown(&c)));
            }
        }
    }
}

/// An error code as the host sent it, with its message for an internal error.
fn shown(code: &ErrorCode) -> String {
    match code {
        ErrorCode::InternalError(Some(message)) => format!("internal error: {message}"),
        other => format!("{other:?}"),
    }
}

shardhost_guest::batch_handler!(hoard);
