//! The values of the API's fields that are one of a set: a run's status and why it is
//! suspended, a step's kind and phase, what a cancel, pause or resume did. Each is serialized as
//! its name (the strings the API always answered with), and compares with one:
//! `run.status == "completed"` reads as it did when the field was a `String`.
//!
//! ```
//! use cairn_api::values::{ControlOutcome, RunStatus};
//! assert_eq!(serde_json::to_string(&RunStatus::Completed).unwrap(), r#""completed""#);
//! assert_eq!(RunStatus::parse("paused"), Some(RunStatus::Paused));
//! assert!(RunStatus::Failed == "failed");
//! assert_eq!(ControlOutcome::PauseRequested.to_string(), "pause-requested");
//! ```

use serde::{Deserialize, Serialize};

/// An enum of unit variants, each serialized as its name, with `as_str`, `parse`, `ALL`,
/// `Display` and comparison with a `&str`.
macro_rules! named_values {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:tt,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Every value.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// Its name, as the API writes it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// The value named `text`, if there is one.
            pub fn parse(text: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|value| value.as_str() == text)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

named_values! {
    /// Where a run stands.
    RunStatus {
        /// Created, not yet claimed by a worker.
        Pending = "pending",
        /// A worker holds it.
        Running = "running",
        /// Waiting for time or a signal; no worker holds it.
        Suspended = "suspended",
        /// Finished with an output.
        Completed = "completed",
        /// Finished with an error.
        Failed = "failed",
        /// Cancelled.
        Cancelled = "cancelled",
        /// Parked until an operator resumes it (by request, or after an error).
        Paused = "paused",
        /// Ended by handing over to a fresh run of its workflow.
        Continued = "continued",
    }
}

named_values! {
    /// Why a suspended run waits.
    SuspendReason {
        /// In a durable sleep.
        Sleeping = "sleeping",
        /// Waiting for a signal.
        Waiting = "waiting",
        /// Waiting to retry a failed step.
        BackingOff = "backing-off",
        /// Waiting for its turn under a rate limit.
        RateLimited = "rate-limited",
        /// A debounced start that has not begun.
        Debouncing = "debouncing",
    }
}

named_values! {
    /// What a step is.
    StepKind {
        /// `ctx.step`: a body whose result is journaled.
        Step = "step",
        /// `ctx.sleep`.
        Sleep = "sleep",
        /// `ctx.wait_for_event`.
        Wait = "wait",
    }
}

named_values! {
    /// Where a step stands.
    StepPhase {
        /// An attempt failed; the next is due.
        Retrying = "retrying",
        /// Its body returned a value.
        Completed = "completed",
        /// It failed for good.
        Failed = "failed",
        /// A sleep not over yet.
        Sleeping = "sleeping",
        /// A sleep that is over.
        Slept = "slept",
        /// A wait for a signal not over yet.
        Waiting = "waiting",
        /// A wait that received its signal.
        Received = "received",
        /// A wait whose deadline passed.
        TimedOut = "timed_out",
        /// The run ended before it did.
        Abandoned = "abandoned",
    }
}

named_values! {
    /// What a cancel, pause or resume did.
    ControlOutcome {
        /// The run is cancelled.
        Cancelled = "cancelled",
        /// A worker holds the run: it stops it at its next heartbeat.
        CancelRequested = "cancel-requested",
        /// The run is paused.
        Paused = "paused",
        /// A worker holds the run: it parks it at its next step boundary.
        PauseRequested = "pause-requested",
        /// The run is pending again.
        Resumed = "resumed",
    }
}
