//! The body of every error answer.

use serde::{Deserialize, Serialize};

/// Every error answer's body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// A stable snake_case code (`run_not_found`, `invalid_json`, `run_finished`, …).
    pub code: String,
    /// For people.
    pub message: String,
}
