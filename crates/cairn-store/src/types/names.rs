//! The names and keys a user passes, each a type checked once where it is made, so that the same
//! rules hold from Rust, over HTTP and from the command line: workflow names, event (signal)
//! names, idempotency keys, schedule names, the ids of published events, and the reasons given
//! for cancels and restarts. (Run ids are
//! [`RunId::validate`](super::run::RunId::validate)d the same way.)

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A name or key that breaks its rule: which kind of name, the text given, and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {given:?} must be {rule}")]
pub struct NameError {
    /// The kind of name: `workflow name`, `event name`, `idempotency key`, …
    pub what: &'static str,
    /// A stable snake_case name of the refusal (`invalid_workflow_name`): the HTTP API's
    /// `error.code`.
    pub code: &'static str,
    /// The text given.
    pub given: String,
    /// What it must be.
    pub rule: &'static str,
}

/// Whether `given` keeps a rule: 1 to `max` characters (Unicode scalar values, as JSON Schema's
/// `maxLength` counts them), no control character (NUL included), none of `forbidden`.
pub(crate) fn keeps(given: &str, max: usize, forbidden: &[char]) -> bool {
    !given.is_empty() && !given.chars().enumerate().any(|(i, c)| i >= max || c.is_control() || forbidden.contains(&c))
}

/// Declares a checked name type.
macro_rules! name {
    ($(#[$doc:meta])* $name:ident, $what:literal, $code:literal, $max:literal, [$($forbidden:literal),*], $rule:literal) => {
        $(#[$doc])*
        ///
        /// Its text is shared: a clone is a reference count, as a [`RunId`](crate::RunId)'s.
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
        #[serde(try_from = "String")]
        pub struct $name(Arc<str>);

        impl $name {
            /// The rule, in words.
            pub const RULE: &'static str = $rule;
            /// The most characters it may have.
            pub const MAX_CHARS: usize = $max;
            /// The characters it may not hold besides control characters.
            pub const FORBIDDEN: &'static [char] = &[$($forbidden),*];

            /// `text`, if it keeps the rule.
            pub fn new(text: impl Into<String>) -> Result<$name, NameError> {
                $name::try_from(text.into().as_str())
            }

            /// A name a store wrote after it was checked, read back: not checked again, so
            /// that a rule made stricter later does not make stored runs unreadable.
            pub fn read_back(text: &str) -> $name {
                $name(Arc::from(text))
            }

            /// Whether `text` keeps the rule, without making the name (nothing is allocated
            /// unless it does not).
            pub fn check(text: &str) -> Result<(), NameError> {
                match keeps(text, $max, &[$($forbidden),*]) {
                    true => Ok(()),
                    false => Err(NameError { what: $what, code: $code, given: text.to_owned(), rule: $rule }),
                }
            }

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The text, owned.
            pub fn into_string(self) -> String {
                self.0.as_ref().to_owned()
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                *self.0 == **other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == &*other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == &*other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                **self == *other.0
            }
        }

        impl TryFrom<&str> for $name {
            type Error = NameError;
            /// Checks `text` first, then copies it once.
            fn try_from(text: &str) -> Result<$name, NameError> {
                $name::check(text)?;
                Ok($name(Arc::from(text)))
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(text: String) -> Result<$name, NameError> {
                $name::new(text)
            }
        }

        impl From<$name> for String {
            fn from(name: $name) -> String {
                name.into_string()
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name!(
    /// A workflow's name: 1 to 200 characters, no control characters.
    ///
    /// ```
    /// use cairn_store::WorkflowName;
    /// assert!(WorkflowName::new("order").is_ok());
    /// assert!(WorkflowName::new("").is_err());
    /// ```
    WorkflowName, "workflow name", "invalid_workflow_name", 200, [], "1 to 200 characters without control characters"
);

name!(
    /// The name of an event a run waits for (a signal's name): 1 to 200 characters, no control
    /// characters.
    EventName, "event name", "invalid_event_name", 200, [], "1 to 200 characters without control characters"
);

name!(
    /// An idempotency key: 1 to 400 characters, no control characters (NUL included). Starts with
    /// the same workflow and key find one run. (400 characters of any script fit PostgreSQL's
    /// index beside the longest workflow name.)
    ///
    /// ```
    /// use cairn_store::IdempotencyKey;
    /// assert!(IdempotencyKey::new("order-7").is_ok());
    /// assert!(IdempotencyKey::new("a\0b").is_err());
    /// assert!(IdempotencyKey::new("k".repeat(3_000)).is_err());
    /// assert!(IdempotencyKey::new("é".repeat(400)).is_ok());
    /// ```
    IdempotencyKey, "idempotency key", "invalid_idempotency_key", 400, [], "1 to 400 characters without control characters"
);

name!(
    /// A schedule's name: 1 to 100 characters, no control characters, no `/` or `@` (the runs it
    /// starts are named `<name>@<time>`).
    ScheduleName, "schedule name", "invalid_schedule", 100, ['/', '@'], "1 to 100 characters without `/`, `@` or control characters"
);

name!(
    /// The id of a published event: 1 to 200 characters, no control characters. Publishing an id
    /// again starts nothing new.
    EventId, "event id", "invalid_event_id", 200, [], "1 to 200 characters without control characters"
);

name!(
    /// Why a run is cancelled or restarted, as its canceller or restarter gives it: 1 to 1,000
    /// characters, no control characters. A cancel journals it in the run's `cancelled` event, a
    /// restart in the new run's `started` event.
    Reason, "reason", "invalid_reason", 1000, [], "1 to 1000 characters without control characters"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_keeps_its_rule() {
        assert!(WorkflowName::new("w".repeat(200)).is_ok());
        assert!(WorkflowName::new("w".repeat(201)).is_err());
        assert!(WorkflowName::new("a\nb").is_err());
        assert!(EventName::new("approved").is_ok());
        assert!(EventName::new("").is_err());
        assert!(IdempotencyKey::new("k".repeat(400)).is_ok());
        assert!(IdempotencyKey::new("k".repeat(401)).is_err());
        assert!(WorkflowName::new("😀".repeat(200)).is_ok(), "characters are counted, not bytes");
        assert!(WorkflowName::new("😀".repeat(201)).is_err());
        assert!(IdempotencyKey::new("\u{0}").is_err());
        assert!(ScheduleName::new("nightly").is_ok());
        assert!(ScheduleName::new("a@b").is_err());
        assert!(ScheduleName::new("a/b").is_err());
        assert!(EventId::new("evt-1").is_ok());
        let error = WorkflowName::new("").unwrap_err();
        assert_eq!(error.to_string(), "workflow name \"\" must be 1 to 200 characters without control characters");
    }

    #[test]
    fn a_name_read_from_json_keeps_its_rule_too() {
        let key: IdempotencyKey = serde_json::from_str("\"order-7\"").unwrap();
        assert_eq!(key.as_str(), "order-7");
        assert!(serde_json::from_str::<IdempotencyKey>("\"a\\u0000b\"").is_err());
        assert_eq!(serde_json::to_string(&key).unwrap(), "\"order-7\"");
    }
}
