//! Published events as the store keeps them, for the events view: each with the runs it started.

use super::run::{RunId, StoreError};
use cairn_journal::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// An event published to a topic, with the runs it started (one per subscribed workflow).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventRecord {
    /// Its id (given by the publisher, or generated).
    pub id: String,
    /// The topic it was published to.
    pub topic: String,
    /// Its payload, the input of the runs it started.
    pub payload: Box<RawValue>,
    /// When it was first published.
    pub published_at: Timestamp,
    /// The runs it started, by workflow.
    pub runs: Vec<EventRun>,
}

impl PartialEq for EventRecord {
    fn eq(&self, other: &Self) -> bool {
        (&self.id, &self.topic, self.payload.get(), self.published_at, &self.runs)
            == (&other.id, &other.topic, other.payload.get(), other.published_at, &other.runs)
    }
}

impl EventRecord {
    /// The runs to store for this record when its id already has `kept` (none for a new id):
    /// `kept`, and this record's run of each workflow `kept` has none of, by workflow. A record of
    /// an id seen before keeps its first topic, payload and time; only its runs grow.
    ///
    /// ```
    /// # use cairn_store::{EventRecord, EventRun, RunId};
    /// # use cairn_journal::Timestamp;
    /// let run = |workflow: &str, id: &str| EventRun { workflow: workflow.into(), run: RunId::new(id) };
    /// let payload = serde_json::value::to_raw_value(&1).unwrap();
    /// let again = EventRecord { id: "e1".into(), topic: "user.signup".into(), payload, published_at: Timestamp::from_millis(9),
    ///     runs: vec![run("welcome", "w2"), run("audit", "a1")] };
    /// assert_eq!(again.runs_over(vec![run("welcome", "w1")]), [run("audit", "a1"), run("welcome", "w1")]);
    /// ```
    pub fn runs_over(&self, mut kept: Vec<EventRun>) -> Vec<EventRun> {
        for run in &self.runs {
            if !kept.iter().any(|k| k.workflow == run.workflow) {
                kept.push(run.clone());
            }
        }
        kept.sort_by(|a, b| a.workflow.cmp(&b.workflow));
        kept
    }

    /// Where a page that ends with this event continues.
    pub fn cursor(&self) -> EventCursor {
        EventCursor { published_at: self.published_at, id: self.id.clone() }
    }
}

/// A run an event started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRun {
    /// Its workflow.
    pub workflow: String,
    /// The run.
    pub run: RunId,
}

/// Which recorded events to list ([`EventStore::events`](crate::EventStore::events)), newest first.
#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    /// Only those published to this topic.
    pub topic: Option<String>,
    /// Continue after this cursor (from [`EventPage::next_cursor`]).
    pub cursor: Option<EventCursor>,
    /// Most events listed (0: none).
    pub limit: usize,
}

impl EventQuery {
    /// Whether `event` is one this query lists (its cursor included).
    pub fn selects(&self, event: &EventRecord) -> bool {
        self.topic.as_ref().is_none_or(|topic| *topic == event.topic)
            && self.cursor.as_ref().is_none_or(|c| (event.published_at, event.id.as_str()) < (c.published_at, &c.id))
    }
}

/// Where a page of events ended: the `(published_at, id)` of its last event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventCursor {
    /// When the last event listed was published.
    pub published_at: Timestamp,
    /// Its id.
    pub id: String,
}

impl EventCursor {
    /// The opaque text form, for APIs and the CLI.
    pub fn encode(&self) -> String {
        super::lists::join_cursor(self.published_at, &self.id)
    }

    /// Parses [`EventCursor::encode`]'s text.
    pub fn decode(text: &str) -> Result<EventCursor, StoreError> {
        let (published_at, id) = super::lists::split_cursor(text)?;
        Ok(EventCursor { published_at, id: id.to_owned() })
    }
}

/// One page of events, newest first.
#[derive(Debug, Clone, Default)]
pub struct EventPage {
    /// The events.
    pub events: Vec<EventRecord>,
    /// Where the next page starts, if there may be one.
    pub next_cursor: Option<EventCursor>,
}

impl EventPage {
    /// A page from `events` fetched with one more than `size` (newest first): the extra event,
    /// if any, only tells that another page follows.
    pub fn cut(mut events: Vec<EventRecord>, size: usize) -> EventPage {
        let next_cursor = super::lists::cut(&mut events, size, EventRecord::cursor);
        EventPage { events, next_cursor }
    }
}
