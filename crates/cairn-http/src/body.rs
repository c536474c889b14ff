//! A request's body is read whole, within its time and size, before any handler sees it: a
//! client that sends a head and then its body slowly (or never) is answered `408` instead of
//! holding a connection and a task for as long as it likes.

use crate::error::ApiError;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

/// Reads the body within `timeout` and `limit` bytes.
pub(crate) async fn read_in_time(
    State((timeout, limit)): State<(Duration, usize)>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if headers.contains_key(header::TRANSFER_ENCODING) && headers.contains_key(header::CONTENT_LENGTH) {
        // Two lengths that a proxy in front may read differently from this server: the way a
        // smuggled request gets past it (RFC 9112, section 6.3).
        let message = "a request gives its body's length by Content-Length or by Transfer-Encoding, not both";
        return ApiError::bad_request("ambiguous_length", message).into_response();
    }
    if !has_body(headers) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!("the request body did not arrive within {timeout:?}"),
        )
        .into_response(),
        Ok(Err(error)) => {
            let too_large = error.into_inner().downcast_ref::<http_body_util::LengthLimitError>().is_some();
            match too_large {
                true => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    format!("the request body is larger than {limit} bytes"),
                ),
                false => ApiError::bad_request("invalid_body", "the request body could not be read"),
            }
            .into_response()
        }
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
    }
}

/// Whether a request says it carries a body.
pub(crate) fn has_body(headers: &HeaderMap) -> bool {
    let length = headers.get(header::CONTENT_LENGTH).and_then(|value| value.to_str().ok());
    length.is_some_and(|length| length.trim() != "0") || headers.contains_key(header::TRANSFER_ENCODING)
}
