//! `PUT /subscriptions/{name}/handler`: everything that can be refused from the request head
//! is refused before a byte of the body is read; then the body, bounded in size and time.

use std::sync::Arc;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::guard::UPLOAD_TIMEOUT;
use super::{Shared, error, refusal, swapped};
use crate::deploy::DeployError;

/// Why an upload is refused before it reaches the deployer.
#[derive(Debug, thiserror::Error)]
pub(super) enum UploadRefused {
    #[error(transparent)]
    Unknown(Box<DeployError>),
    #[error("the upload is larger than [admin] max_upload ({0} bytes)")]
    TooLarge(usize),
    #[error("an upload for `{0}` is already in progress; try again when it is done")]
    Busy(String),
    #[error("the upload did not arrive within {UPLOAD_TIMEOUT:?}")]
    TooSlow,
}

impl IntoResponse for UploadRefused {
    fn into_response(self) -> Response {
        let status = match self {
            UploadRefused::Unknown(e) => return refusal(*e),
            UploadRefused::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            UploadRefused::Busy(_) => StatusCode::CONFLICT,
            UploadRefused::TooSlow => StatusCode::REQUEST_TIMEOUT,
        };
        error(status, self.to_string())
    }
}

/// Refuses before reading anything of the body (the token was checked before this runs): an
/// unknown subscription (404), a declared length past `max_upload` (413), a second upload for
/// the subscription (409). Then reads the body within [`UPLOAD_TIMEOUT`] and `max_upload` (a
/// body without a declared length is cut there as it streams) and deploys it.
pub(super) async fn deploy(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Result<Response, UploadRefused> {
    check_head(&shared, &name, &body)?;
    let sign = match super::signed::sign_of(&headers) {
        Ok(sign) => sign,
        Err((status, message)) => return Ok(super::error(status, message)),
    };
    let _upload = Upload::begin(&shared, &name).ok_or_else(|| UploadRefused::Busy(name.clone()))?;
    let body = read_body(body, shared.max_upload).await?;
    let origin = format!("upload for `{name}` ({} bytes)", body.len());
    Ok(swapped(
        shared
            .state
            .deployer
            .deploy(&name, &body, &origin, &sign)
            .await,
    ))
}

/// What can be told of an upload from its head: the subscription exists, and the length the
/// request declares (`Content-Length`, as hyper parsed it) is within `max_upload`.
/// `PUT /subscriptions/{name}/shadow`: the upload, checked as a deploy's, runs in shadow.
pub(super) async fn shadow(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Result<Response, UploadRefused> {
    check_head(&shared, &name, &body)?;
    let answer = match super::http_answer::answer_of(&headers) {
        Ok(answer) => answer,
        Err((status, message)) => return Ok(super::error(status, message)),
    };
    let _upload = Upload::begin(&shared, &name).ok_or_else(|| UploadRefused::Busy(name.clone()))?;
    let body = read_body(body, shared.max_upload).await?;
    let origin = format!("shadow upload for `{name}` ({} bytes)", body.len());
    Ok(
        match shared
            .state
            .deployer
            .shadow(&name, &body, answer, &origin)
            .await
        {
            Ok(set) => axum::Json(super::reply::ShadowReply {
                shadow: set.shadow,
                current: Some(set.current),
                replaced: set.replaced,
            })
            .into_response(),
            Err(e) => super::refusal(e),
        },
    )
}

fn check_head(shared: &Shared, name: &str, body: &Body) -> Result<(), UploadRefused> {
    let known = shared.state.deployer.subscriptions();
    if !known.iter().any(|k| k == name) {
        let name = name.to_owned();
        let unknown = DeployError::UnknownSubscription { name, known };
        return Err(UploadRefused::Unknown(Box::new(unknown)));
    }
    if HttpBody::size_hint(body).lower() > shared.max_upload as u64 {
        return Err(UploadRefused::TooLarge(shared.max_upload));
    }
    Ok(())
}

/// The whole body, at most `max` bytes of it, within [`UPLOAD_TIMEOUT`].
pub(super) async fn read_body(body: Body, max: usize) -> Result<Bytes, UploadRefused> {
    match tokio::time::timeout(UPLOAD_TIMEOUT, axum::body::to_bytes(body, max)).await {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(_)) => Err(UploadRefused::TooLarge(max)),
        Err(_) => Err(UploadRefused::TooSlow),
    }
}

/// One upload in progress for a subscription; ends when dropped.
struct Upload<'a> {
    shared: &'a Shared,
    name: String,
}

impl<'a> Upload<'a> {
    fn begin(shared: &'a Shared, name: &str) -> Option<Upload<'a>> {
        let mut uploading = shared.uploading.lock().expect("upload set poisoned");
        uploading.insert(name.to_owned()).then(|| Upload {
            shared,
            name: name.to_owned(),
        })
    }
}

impl Drop for Upload<'_> {
    fn drop(&mut self) {
        if let Ok(mut uploading) = self.shared.uploading.lock() {
            uploading.remove(&self.name);
        }
    }
}
