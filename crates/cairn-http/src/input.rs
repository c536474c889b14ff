//! The parameters routes take, and how a list's are read as the API's [`ListQuery`].

use crate::error::ApiError;
use cairn_api::ListQuery;
use serde::Deserialize;
use utoipa::IntoParams;

/// The query of the list routes.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only this workflow (`/v1/runs` only).
    pub(crate) workflow: Option<String>,
    /// Only this status.
    pub(crate) status: Option<String>,
    /// Created at or after (RFC 3339).
    pub(crate) since: Option<String>,
    /// Created before (RFC 3339).
    pub(crate) until: Option<String>,
    /// From a page's `next_cursor`.
    pub(crate) cursor: Option<String>,
    /// Page size, 1 to 1,000 (default 100).
    pub(crate) limit: Option<usize>,
    /// Only stranded runs: pending, running or suspended while no live worker serves their
    /// workflow version.
    pub(crate) stranded: Option<bool>,
    /// Only runs whose id starts with this text.
    pub(crate) id_prefix: Option<String>,
    /// Only runs whose error holds this text, ignoring the case of ASCII letters.
    pub(crate) error: Option<String>,
    /// `input.<field>=<value>` (repeatable; `<field>` may be a dotted path): only runs whose
    /// input contains `{"<field>": <value>}`, the value read as JSON when it is JSON
    /// (`input.customer=42`, `input.vip=true`) and as a string otherwise (`input.city=Oslo`).
    /// Any other parameter is refused.
    #[serde(flatten)]
    #[param(ignore)]
    pub(crate) rest: std::collections::BTreeMap<String, String>,
}

impl ListParams {
    /// The list query these parameters ask for, of `workflow` (from the path or the query);
    /// a parameter that is neither the list's nor an input filter is refused.
    pub(crate) fn query(self, workflow: Option<String>) -> Result<ListQuery, ApiError> {
        let input = (self.rest.into_iter())
            .map(|(name, value)| match name.strip_prefix("input.") {
                Some(field) => Ok((field.to_owned(), value)),
                None => Err(ApiError::bad_request("invalid_query", cairn::api::views::unknown_parameter(&name))),
            })
            .collect::<Result<_, _>>()?;
        Ok(ListQuery {
            workflow,
            status: self.status,
            since: self.since,
            until: self.until,
            stranded: self.stranded.unwrap_or(false),
            id_prefix: self.id_prefix,
            error: self.error,
            input,
            cursor: self.cursor,
            limit: self.limit,
        })
    }
}

/// What `GET /v1/events` takes.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventParams {
    /// Only events published to this topic.
    pub(crate) topic: Option<String>,
    /// From a page's `next_cursor`.
    pub(crate) cursor: Option<String>,
    /// Page size, 1 to 1,000 (default 100).
    pub(crate) limit: Option<usize>,
}

/// What `GET /v1/workers` takes.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct WorkersParams {
    /// Every worker the store recorded, not only the live ones (default false).
    pub(crate) all: Option<bool>,
}

/// What `GET …/result` takes.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ResultParams {
    /// How long to wait for the run to end (`30s`, `5m`; default 30 s, at most 5 minutes).
    pub(crate) timeout: Option<String>,
}
