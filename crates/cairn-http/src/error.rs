//! Error answers: `{"error": {"code", "message"}}` with their status, and how each
//! refusal and failure maps to one.

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cairn::api::OperationError;
use cairn::{ClientError, ControlError, ReadError, RestartError, SignalError, StartError};
pub use cairn_api::{ErrorBody, ErrorDetail};

/// An error answer: `{"error": {"code", "message"}}` with its status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }

    pub(crate) fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }
}

impl ApiError {
    pub(crate) fn body(&self) -> ErrorBody {
        ErrorBody { error: ErrorDetail { code: self.code.to_owned(), message: self.message.clone() } }
    }
}

impl ApiError {
    /// The whole HTTP/1.1 answer as bytes, with `headers` (`name: value\r\n` each) and
    /// `Connection: close`: for a connection no handler serves (one turned away while every
    /// slot is busy, or one hyper answers itself).
    pub(crate) fn closing_answer(&self, headers: &str) -> Vec<u8> {
        let body = serde_json::to_string(&self.body()).unwrap_or_default();
        let reason = self.status.canonical_reason().unwrap_or("Error");
        format!(
            "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\n{headers}connection: close\r\n\
             content-length: {}\r\n\r\n{body}",
            self.status.as_u16(),
            body.len()
        )
        .into_bytes()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

impl From<OperationError> for ApiError {
    fn from(error: OperationError) -> Self {
        let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError { status, code: error.code(), message: error.detail().message }
    }
}

/// What the engine refuses or fails with answers as the operation that failed with it.
macro_rules! answered_as_operation_error {
    ($($error:ty),*) => {$(
        impl From<$error> for ApiError {
            fn from(error: $error) -> Self {
                ApiError::from(OperationError::from(error))
            }
        }
    )*};
}

answered_as_operation_error!(ClientError, StartError, SignalError, ControlError, RestartError, ReadError);

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        let status = rejection.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE { "body_too_large" } else { "invalid_body" };
        ApiError::new(status, code, rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::bad_request("invalid_path", rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::bad_request("invalid_query", rejection.body_text())
    }
}

pub(crate) async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

/// A route that exists, asked with a method it does not take.
pub(crate) async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", format!("this route does not take {method}"))
}

pub(crate) type Answer<T> = Result<Json<T>, ApiError>;
