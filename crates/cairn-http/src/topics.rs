//! Live topics: every stream that watches the same thing (one run, or one list query) shares
//! one, read and serialised once per interval by a single task while any stream is open; each
//! stream sends the shared bytes (reference-counted, not copied). After the first whole snapshot
//! a stream is sent JSON Patch (RFC 6902) `patch` events with only what changed, or the whole
//! snapshot again when that is shorter or when it fell behind.

use crate::error::ApiError;
use crate::patch;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;

/// The open topics by what they watch, held weakly (a topic ends when its last stream does), and
/// the room left for streams.
#[derive(Clone)]
pub(crate) struct Topics {
    open: Arc<Mutex<HashMap<String, Weak<Topic>>>>,
    /// One permit per stream that may open: each open stream holds one.
    streams: Arc<Semaphore>,
}

/// What the streams of one topic hold: the newest frame, and (through the `Arc`) the reader task
/// alive.
struct Topic {
    frames: watch::Receiver<Option<Arc<Frame>>>,
}

/// What an open stream holds: its topic, and its room among streams.
struct Open {
    /// Held, not read: the topic lives while a stream holds it.
    _topic: Arc<Topic>,
    _permit: OwnedSemaphorePermit,
}

/// The answer when as many streams are open as there is room for.
fn busy() -> Response {
    let message = "as many live streams are open as this server takes: try again later";
    let mut response = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message).into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, axum::http::HeaderValue::from_static("5"));
    // The connection goes too, so a client turned away holds no slot while it waits.
    headers.insert(header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    response
}

/// One change of a topic, ready to send.
struct Frame {
    /// Counts changes from 1.
    version: u64,
    /// The whole snapshot as an event (`error` when reading it failed).
    whole: Bytes,
    /// The `patch` event from the version before, when there is one shorter than `whole`.
    patch: Option<(u64, Bytes)>,
}

/// An SSE event's bytes: `data` is one line of compact JSON.
fn event_bytes(name: &str, data: &str) -> Bytes {
    let mut bytes = Vec::with_capacity(name.len() + data.len() + 16);
    for part in ["event: ", name, "\ndata: ", data, "\n\n"] {
        bytes.extend_from_slice(part.as_bytes());
    }
    Bytes::from(bytes)
}

/// How often an idle stream sends a comment, so that proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How often topics are read, and when they stop.
#[derive(Clone)]
pub(crate) struct Polling {
    pub(crate) interval: Duration,
    pub(crate) shutdown: CancellationToken,
}

impl Topics {
    /// Room for at most `most` streams at once.
    pub(crate) fn new(most: usize) -> Topics {
        Topics { open: Arc::default(), streams: Arc::new(Semaphore::new(most)) }
    }

    /// A server-sent event stream of `event` for `key`: the snapshot now and whenever it changes
    /// (polled every interval by one task per key, however many streams watch it), until the
    /// client goes away or the server shuts down. With as many streams open as there is room
    /// for, `503` with `Retry-After`.
    pub(crate) fn stream<T, F, Fut>(
        &self,
        polling: &Polling,
        key: String,
        event: &'static str,
        patches: bool,
        snapshot: F,
    ) -> Response
    where
        T: Serialize + Send + 'static,
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, ApiError>> + Send + 'static,
    {
        let Ok(permit) = Arc::clone(&self.streams).try_acquire_owned() else { return busy() };
        let topic = self.topic(polling, key, event, snapshot);
        let shutdown = polling.shutdown.clone();
        let mut frames = topic.frames.clone();
        frames.mark_changed();
        let state = (Open { _topic: topic, _permit: permit }, frames, 0u64);
        let events = futures::stream::unfold(state, move |(topic, mut frames, sent)| {
            let shutdown = shutdown.clone();
            async move {
                loop {
                    tokio::select! {
                        changed = frames.changed() => changed.ok()?,
                        () = tokio::time::sleep(KEEP_ALIVE) => {
                            return Some((Ok::<_, Infallible>(Bytes::from_static(b":\n\n")), (topic, frames, sent)));
                        }
                        () = shutdown.cancelled() => return None,
                    }
                    let Some(frame) = frames.borrow_and_update().clone() else { continue };
                    if frame.version == sent {
                        continue;
                    }
                    let bytes = match &frame.patch {
                        Some((from, patch)) if patches && *from == sent => patch.clone(),
                        _ => frame.whole.clone(),
                    };
                    return Some((Ok(bytes), (topic, frames, frame.version)));
                }
            }
        });
        ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(events))
            .into_response()
    }

    /// The open topic for `key`, or a new one with its reader task.
    fn topic<T, F, Fut>(&self, polling: &Polling, key: String, event: &'static str, snapshot: F) -> Arc<Topic>
    where
        T: Serialize + Send + 'static,
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, ApiError>> + Send + 'static,
    {
        let mut topics = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(topic) = topics.get(&key).and_then(Weak::upgrade) {
            return topic;
        }
        let (sender, frames) = watch::channel(None);
        let topic = Arc::new(Topic { frames });
        topics.insert(key.clone(), Arc::downgrade(&topic));
        tokio::spawn(read_topic(self.clone(), polling.clone(), key, event, sender, snapshot));
        topic
    }
}

/// The largest snapshot (serialised) a topic patches: a larger one is sent whole on each change,
/// so that no topic keeps the parsed tree of a run with megabytes of input (to diff the next
/// snapshot against) for as long as it is watched.
const MOST_PATCHED: usize = 256 * 1024;

/// How many intervals apart the biggest snapshots are read (see [`read_topic`]).
const SLOWEST: usize = 10;

/// Reads a topic's snapshot every interval and publishes each change, until no stream watches it
/// or the server shuts down. An unchanged snapshot is told by its text, so an idle topic builds
/// no tree; only a change to a snapshot of at most [`MOST_PATCHED`] bytes is diffed, and a larger
/// snapshot is read once every `size / MOST_PATCHED` intervals (at most [`SLOWEST`]).
async fn read_topic<T, F, Fut>(
    topics: Topics,
    polling: Polling,
    key: String,
    event: &'static str,
    sender: watch::Sender<Option<Arc<Frame>>>,
    mut snapshot: F,
) where
    T: Serialize + Send + 'static,
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, ApiError>> + Send + 'static,
{
    // The last snapshot's text (or the error's), and its tree when it is small enough to patch.
    let mut last: Option<(Result<String, String>, Option<Value>)> = None;
    let mut version = 0;
    loop {
        let now = match snapshot().await.and_then(|value| {
            serde_json::to_string(&value)
                .map_err(|error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", error.to_string()))
        }) {
            Ok(text) => Ok(text),
            Err(error) => Err(serde_json::to_string(&error.body()).unwrap_or_default()),
        };
        // A big snapshot is read less often, in proportion to its size (every 10 intervals at
        // most): building one of a run with megabytes of payload each second for every run
        // watched took the server's cores.
        let size = now.as_ref().map_or(0, String::len);
        let pause = polling.interval * u32::try_from((size / MOST_PATCHED).clamp(1, SLOWEST)).unwrap_or(1);
        if last.as_ref().map(|(text, _)| text) != Some(&now) {
            version += 1;
            let tree = match &now {
                Ok(text) if text.len() <= MOST_PATCHED => serde_json::from_str::<Value>(text).ok(),
                _ => None,
            };
            let frame = match &now {
                Ok(text) => {
                    let whole = event_bytes(event, text);
                    let patch = match (last.as_ref().and_then(|(_, before)| before.as_ref()), &tree) {
                        (Some(before), Some(after)) => {
                            Some(event_bytes("patch", &Value::from(patch::diff(before, after)).to_string()))
                                .filter(|patch| patch.len() < whole.len())
                                .map(|patch| (version - 1, patch))
                        }
                        _ => None,
                    };
                    Frame { version, whole, patch }
                }
                Err(error) => Frame { version, whole: event_bytes("error", error), patch: None },
            };
            sender.send_replace(Some(Arc::new(frame)));
            last = Some((now, tree));
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = sender.closed() => break,
            () = polling.shutdown.cancelled() => break,
        }
    }
    let mut topics = topics.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if topics.get(&key).is_some_and(|topic| topic.strong_count() == 0) {
        topics.remove(&key);
    }
}
