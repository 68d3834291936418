//! Requests through `wasi:http/outgoing-handler`: send every request of a round, wait on
//! their futures together (`wasi:io/poll`), read each response's body as soon as its head
//! arrives.

use crate::__private::bindings::wasi::http::outgoing_handler;
use crate::__private::bindings::wasi::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, IncomingResponse, Method, OutgoingBody,
    OutgoingRequest, Scheme,
};
use crate::__private::bindings::wasi::io::poll;
use crate::__private::bindings::wasi::io::streams::StreamError;

use super::{Error, Request, Response, Url};

/// Sends one round of requests at once and answers each one's response (redirects are not
/// followed here).
pub(super) fn exchange(round: &[(Request, Result<Url, Error>)]) -> Vec<Result<Response, Error>> {
    let mut answers: Vec<Option<Result<Response, Error>>> = vec![None; round.len()];
    let mut waiting: Vec<(usize, FutureIncomingResponse)> = Vec::new();
    for (i, (request, url)) in round.iter().enumerate() {
        match url.clone().and_then(|url| start(request, &url)) {
            Ok(future) => waiting.push((i, future)),
            Err(e) => answers[i] = Some(Err(e)),
        }
    }
    while !waiting.is_empty() {
        let ready: Vec<u32> = {
            let pollables: Vec<_> = waiting.iter().map(|(_, f)| f.subscribe()).collect();
            let refs: Vec<_> = pollables.iter().collect();
            poll::poll(&refs)
        };
        let mut ready: Vec<usize> = ready.into_iter().map(|i| i as usize).collect();
        ready.sort_unstable_by(|a, b| b.cmp(a));
        for at in ready {
            let (i, future) = waiting.swap_remove(at);
            let (request, url) = (&round[i].0, round[i].1.as_ref().expect("started"));
            answers[i] = Some(finish(request, url, &future));
        }
    }
    answers
        .into_iter()
        .map(|a| a.expect("every request answered"))
        .collect()
}

/// Hands a request to the host (headers, then the body).
fn start(request: &Request, url: &Url) -> Result<FutureIncomingResponse, Error> {
    let other = |why: String| Error::Other {
        url: request.url.clone(),
        why,
    };
    // A body goes out with its length, not chunked (servers that read Content-Length only
    // are common); so does every POST, PUT and PATCH, empty or not.
    let mut entries = request.headers.clone();
    let has_length = entries
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-length"));
    let sends_body =
        !request.body.is_empty() || matches!(request.method.as_str(), "POST" | "PUT" | "PATCH");
    if sends_body && !has_length {
        entries.push((
            "content-length".to_owned(),
            request.body.len().to_string().into_bytes(),
        ));
    }
    let headers = Fields::from_list(&entries)
        .map_err(|e| other(format!("a header the host refuses: {e:?}")))?;
    let outgoing = OutgoingRequest::new(headers);
    let method = match request.method.as_str() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "OPTIONS" => Method::Options,
        m => Method::Other(m.to_owned()),
    };
    let scheme = if url.scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    outgoing
        .set_method(&method)
        .and_then(|()| outgoing.set_scheme(Some(&scheme)))
        .and_then(|()| outgoing.set_authority(Some(&url.authority)))
        .and_then(|()| outgoing.set_path_with_query(Some(&url.path_and_query)))
        .map_err(|()| other("the host refuses the method or URL".to_owned()))?;
    let body = outgoing
        .body()
        .map_err(|()| other("no request body".to_owned()))?;
    let future = outgoing_handler::handle(outgoing, None).map_err(|e| error(request, url, &e))?;
    write_body(&body, &request.body).map_err(other)?;
    OutgoingBody::finish(body, None).map_err(|e| error(request, url, &e))?;
    Ok(future)
}

fn write_body(body: &OutgoingBody, bytes: &[u8]) -> Result<(), String> {
    let stream = body
        .write()
        .map_err(|()| "no request body stream".to_owned())?;
    for chunk in bytes.chunks(4096) {
        stream
            .blocking_write_and_flush(chunk)
            .map_err(|e| format!("writing the request body: {e:?}"))?;
    }
    Ok(())
}

/// The whole response of a future that is ready.
fn finish(
    request: &Request,
    url: &Url,
    future: &FutureIncomingResponse,
) -> Result<Response, Error> {
    let other = |why: &str| Error::Other {
        url: request.url.clone(),
        why: why.to_owned(),
    };
    let response = match future.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(error(request, url, &code)),
        Some(Err(())) => return Err(other("the response was already taken")),
        None => return Err(other("the response is not ready")),
    };
    let body = read_body(&response).map_err(|e| match e {
        Some(code) => error(request, url, &code),
        None => other("the response body broke off"),
    })?;
    Ok(Response {
        status: response.status(),
        url: url.to_string(),
        headers: response.headers().entries(),
        body,
    })
}

/// Reads a response's body to its end (`Err(Some(code))`: the host's reason it stopped).
fn read_body(response: &IncomingResponse) -> Result<Vec<u8>, Option<ErrorCode>> {
    let body = response.consume().map_err(|()| None)?;
    let mut bytes = Vec::new();
    {
        let stream = body.stream().map_err(|()| None)?;
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(crate::__private::bindings::wasi::http::types::http_error_code(&e));
                }
            }
        }
    }
    drop(body);
    Ok(bytes)
}

/// What the host's error code means for the user.
fn error(request: &Request, url: &Url, code: &ErrorCode) -> Error {
    let at = request.url.clone();
    match code {
        ErrorCode::HttpRequestDenied => Error::Denied {
            origin: url.origin(),
        },
        ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::HttpResponseTimeout
        | ErrorCode::DnsTimeout => Error::Timeout { url: at },
        ErrorCode::HttpResponseBodySize(_) => Error::BodyTooLarge { url: at },
        ErrorCode::DnsError(_)
        | ErrorCode::DestinationNotFound
        | ErrorCode::DestinationUnavailable
        | ErrorCode::DestinationIpProhibited
        | ErrorCode::DestinationIpUnroutable
        | ErrorCode::ConnectionRefused
        | ErrorCode::ConnectionTerminated
        | ErrorCode::ConnectionLimitReached
        | ErrorCode::TlsProtocolError
        | ErrorCode::TlsCertificateError
        | ErrorCode::TlsAlertReceived(_) => Error::Connect {
            url: at,
            why: format!("{code:?}"),
        },
        other => Error::Other {
            url: at,
            why: format!("{other:?}"),
        },
    }
}
