//! The dashboard: one HTML page with its style and script compiled in (no build step, nothing
//! fetched from elsewhere; its Content-Security-Policy forbids it). The page reads the API
//! relative to where it is mounted, follows changes over the live streams, and asks for the
//! bearer token when the API answers `401`.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The whole page.
const PAGE: &str = concat!(
    "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
    "<title>Cairn</title>\n<style>\n",
    include_str!("dashboard/app.css"),
    "</style>\n</head>\n<body>\n",
    include_str!("dashboard/body.html"),
    "<script>\n",
    // One script in four files, joined in this order: app.js opens it, pages.js closes it.
    include_str!("dashboard/app.js"),
    include_str!("dashboard/runs.js"),
    include_str!("dashboard/run.js"),
    include_str!("dashboard/pages.js"),
    "</script>\n</body>\n</html>\n"
);

/// The page may run its own inline script and style and talk to its own origin, nothing else.
const POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
    connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

#[utoipa::path(get, path = "/", tag = "service",
    responses((status = 200, description = "The dashboard", content_type = "text/html", body = String)))]
pub(crate) async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        PAGE,
    )
        .into_response()
}
