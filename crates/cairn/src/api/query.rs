//! The API's queries read as the store's filters: a list's parameters, checked once for the HTTP
//! routes, the `cairn` command and any other caller of [`cairn_api::Operations`].

use super::error::OperationError;
use super::views::input_fields;
use cairn_api::ListQuery;
use cairn_journal::Timestamp;
use cairn_store::{PageCursor, RunFilter, RunStatus};

/// What a list query selects: a filter, and whether only stranded runs (judged by the live
/// workers when the page is read).
#[derive(Debug, Clone)]
pub struct Selection {
    /// The runs, as the store filters them.
    pub filter: RunFilter,
    /// Only those no live worker serves.
    pub stranded: bool,
}

/// The runs `query` selects; a parameter that breaks its rule is `invalid_query` (or
/// `invalid_cursor`, or the name's own code for a workflow name).
///
/// ```
/// let query = cairn_api::ListQuery { status: Some("failed".into()), limit: Some(5), ..Default::default() };
/// let selection = cairn::api::selection(&query).unwrap();
/// assert_eq!((selection.filter.status, selection.filter.limit), (Some(cairn::RunStatus::Failed), Some(5)));
/// let wrong = cairn_api::ListQuery { limit: Some(0), ..Default::default() };
/// assert!(cairn::api::selection(&wrong).is_err());
/// ```
pub fn selection(query: &ListQuery) -> Result<Selection, OperationError> {
    let status = (query.status.as_deref().map(RunStatus::parse_given).transpose())
        .map_err(|message| OperationError::invalid("invalid_query", message))?;
    let cursor = match query.cursor.as_deref() {
        Some(text) => Some(
            PageCursor::decode(text).map_err(|error| OperationError::invalid("invalid_cursor", error.to_string()))?,
        ),
        None => None,
    };
    let workflow = match &query.workflow {
        Some(name) => {
            cairn_store::WorkflowName::check(name).map_err(crate::error::ClientError::InvalidName)?;
            Some(name.clone())
        }
        None => None,
    };
    let input_contains =
        input_fields(&query.input).map_err(|message| OperationError::invalid("invalid_query", message))?;
    let filter = RunFilter {
        workflow,
        status,
        created_after: query.since.as_deref().map(|t| timestamp("since", t)).transpose()?,
        created_before: query.until.as_deref().map(|t| timestamp("until", t)).transpose()?,
        limit: Some(page_limit(query.limit)?),
        cursor,
        id_prefix: query.id_prefix.clone().filter(|prefix| !prefix.is_empty()),
        error_contains: query.error.clone().filter(|text| !text.is_empty()),
        input_contains,
        ..RunFilter::default()
    };
    Ok(Selection { filter, stranded: query.stranded })
}

/// A page size asked for: 1 to 1,000, 100 when not given.
pub(crate) fn page_limit(limit: Option<usize>) -> Result<usize, OperationError> {
    match limit {
        Some(limit) if !(1..=1000).contains(&limit) => {
            Err(OperationError::invalid("invalid_query", format!("limit {limit} is not between 1 and 1000")))
        }
        limit => Ok(limit.unwrap_or(100)),
    }
}

/// A time given as RFC 3339 (`2026-11-26T10:00:00Z`, `2026-11-26T11:00:00+01:00`), or without
/// an offset, read as UTC (`2026-11-26 10:00:00`).
fn timestamp(name: &str, text: &str) -> Result<Timestamp, OperationError> {
    if let Ok(at) = text.parse::<jiff::Timestamp>() {
        return Ok(Timestamp::from_millis(at.as_millisecond()));
    }
    humantime::parse_rfc3339_weak(text).map(Timestamp::from_system_time).map_err(|error| {
        OperationError::invalid("invalid_query", format!("{name} {text:?} is not an RFC 3339 time: {error}"))
    })
}

/// A duration as people write it (`30s`, `90d`), or `code` with what is wrong, naming the field
/// (`olderThan`, `timeout`) as the API does.
pub(crate) fn duration(code: &'static str, field: &str, text: &str) -> Result<std::time::Duration, OperationError> {
    humantime::parse_duration(text)
        .map_err(|error| OperationError::invalid(code, format!("{field} {text:?} is not a duration: {error}")))
}
