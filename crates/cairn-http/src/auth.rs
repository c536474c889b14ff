//! The bearer-token guard.

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Refuses a request without the configured bearer token.
pub(crate) async fn authorize(State(token): State<Option<Arc<str>>>, request: Request, next: Next) -> Response {
    if let Some(token) = &token {
        let given =
            request.headers().get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()).and_then(bearer_token);
        if !given.is_some_and(|given| same_secret(given.as_bytes(), token.as_bytes())) {
            let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong bearer token")
                .into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

/// The token of an `Authorization: Bearer <token>` value. The scheme's name is
/// case-insensitive (RFC 9110, section 11.1), and spaces may follow it.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim_start_matches(' '))
}

/// Compares two secrets in time that depends on their lengths only.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_scheme_is_case_insensitive_and_the_token_exact() {
        for (value, token) in [
            ("Bearer s3cret", Some("s3cret")),
            ("bearer s3cret", Some("s3cret")),
            ("BEARER  s3cret", Some("s3cret")),
            ("Basic s3cret", None),
            ("Bearers3cret", None),
            ("Bearer s3cret ", Some("s3cret ")),
        ] {
            assert_eq!(super::bearer_token(value), token, "{value:?}");
        }
    }
}
