//! A [`metrics`] recorder that keeps counters, gauges and histograms in memory and renders them
//! in Prometheus' text format: what `GET /metrics` serves. `cairn serve` installs one; a library
//! user may install it too ([`Prometheus::install`]), or any other `metrics` recorder.
//!
//! ```
//! let prometheus = cairn_http::metrics::Prometheus::new();
//! metrics::with_local_recorder(&prometheus, || metrics::counter!("jobs_total", "queue" => "a").increment(2));
//! assert!(prometheus.render().contains("jobs_total{queue=\"a\"} 2"));
//! ```

use metrics::{Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// Bucket bounds of histograms in seconds (names ending `_seconds`): 1 ms to a day.
const SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0,
    86400.0,
];
/// Bucket bounds of other histograms (sizes, counts): powers of two to 4096.
const SIZES: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0];

/// A histogram's buckets (not cumulative: rendering adds them up), count and sum.
struct Buckets {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    count: AtomicU64,
    /// An `f64`'s bits.
    sum: AtomicU64,
}

impl Buckets {
    fn new(name: &str) -> Buckets {
        let bounds = if name.ends_with("_seconds") { SECONDS } else { SIZES };
        Buckets {
            bounds,
            counts: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }
}

impl HistogramFn for Buckets {
    fn record(&self, value: f64) {
        if let Some(i) = self.bounds.iter().position(|bound| value <= *bound) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| Some((f64::from_bits(bits) + value).to_bits()));
    }
}

#[derive(Clone)]
enum Series {
    Counter(Arc<AtomicU64>),
    /// An `f64`'s bits.
    Gauge(Arc<AtomicU64>),
    Histogram(Arc<Buckets>),
}

impl Series {
    fn kind(&self) -> &'static str {
        match self {
            Series::Counter(_) => "counter",
            Series::Gauge(_) => "gauge",
            Series::Histogram(_) => "histogram",
        }
    }
}

#[derive(Default)]
struct Registry {
    series: RwLock<HashMap<Key, Series>>,
    /// The kind of each name: a name is one kind of series whatever its labels.
    kinds: RwLock<HashMap<String, &'static str>>,
    help: RwLock<HashMap<String, String>>,
}

/// The recorder, cheap to clone (clones share their numbers).
#[derive(Clone, Default)]
pub struct Prometheus(Arc<Registry>);

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prometheus").finish_non_exhaustive()
    }
}

impl Prometheus {
    /// An empty recorder.
    pub fn new() -> Prometheus {
        Prometheus::default()
    }

    /// Installs a new recorder as the process's global `metrics` recorder and describes Cairn's
    /// metrics to it; `None` when another recorder is installed already.
    pub fn install() -> Option<Prometheus> {
        let prometheus = Prometheus::new();
        metrics::set_global_recorder(prometheus.clone()).ok()?;
        cairn::telemetry::describe();
        Some(prometheus)
    }

    /// The series `key` names, made `make` the first time; `None` when its name is taken by
    /// another kind of series.
    fn series(&self, key: &Key, make: impl FnOnce() -> Series) -> Option<Series> {
        if let Some(series) = self.0.series.read().unwrap_or_else(PoisonError::into_inner).get(key) {
            return Some(series.clone());
        }
        let mut all = self.0.series.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(series) = all.get(key) {
            return Some(series.clone());
        }
        let made = make();
        let mut kinds = self.0.kinds.write().unwrap_or_else(PoisonError::into_inner);
        if *kinds.entry(key.name().to_owned()).or_insert(made.kind()) != made.kind() {
            return None;
        }
        all.insert(key.clone(), made.clone());
        Some(made)
    }

    fn describe(&self, key: KeyName, description: SharedString) {
        self.0
            .help
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.as_str().to_owned(), description.into_owned());
    }

    /// Every series in Prometheus' text exposition format (version 0.0.4), sorted by name.
    pub fn render(&self) -> String {
        let series = self.0.series.read().unwrap_or_else(PoisonError::into_inner);
        let help = self.0.help.read().unwrap_or_else(PoisonError::into_inner);
        let mut by_name: BTreeMap<&str, Vec<(String, &Series)>> = BTreeMap::new();
        for (key, one) in series.iter() {
            let labels: Vec<String> =
                key.labels().map(|label| format!("{}=\"{}\"", label.key(), escape(label.value()))).collect();
            by_name.entry(key.name()).or_default().push((labels.join(","), one));
        }
        let mut out = String::new();
        for (name, mut all) in by_name {
            all.sort_by(|a, b| a.0.cmp(&b.0));
            if let Some(text) = help.get(name) {
                let _ = writeln!(out, "# HELP {name} {}", text.replace('\\', "\\\\").replace('\n', "\\n"));
            }
            let _ = writeln!(out, "# TYPE {name} {}", all[0].1.kind());
            for (labels, one) in all {
                let braces = |extra: &str| match (labels.is_empty(), extra.is_empty()) {
                    (true, true) => String::new(),
                    (true, false) => format!("{{{extra}}}"),
                    (false, true) => format!("{{{labels}}}"),
                    (false, false) => format!("{{{labels},{extra}}}"),
                };
                match one {
                    Series::Counter(value) => {
                        let _ = writeln!(out, "{name}{} {}", braces(""), value.load(Ordering::Relaxed));
                    }
                    Series::Gauge(bits) => {
                        let _ = writeln!(out, "{name}{} {}", braces(""), f64::from_bits(bits.load(Ordering::Relaxed)));
                    }
                    Series::Histogram(buckets) => {
                        let mut cumulative = 0;
                        for (bound, count) in buckets.bounds.iter().zip(&buckets.counts) {
                            cumulative += count.load(Ordering::Relaxed);
                            let _ = writeln!(out, "{name}_bucket{} {cumulative}", braces(&format!("le=\"{bound}\"")));
                        }
                        let count = buckets.count.load(Ordering::Relaxed);
                        let _ = writeln!(out, "{name}_bucket{} {count}", braces("le=\"+Inf\""));
                        let sum = f64::from_bits(buckets.sum.load(Ordering::Relaxed));
                        let _ = writeln!(out, "{name}_sum{} {sum}", braces(""));
                        let _ = writeln!(out, "{name}_count{} {count}", braces(""));
                    }
                }
            }
        }
        out
    }
}

/// A label value as Prometheus quotes it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Recorder for Prometheus {
    fn describe_counter(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn describe_gauge(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn describe_histogram(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn register_counter(&self, key: &Key, _metadata: &Metadata<'_>) -> Counter {
        match self.series(key, || Series::Counter(Arc::default())) {
            Some(Series::Counter(value)) => Counter::from_arc(value),
            _ => Counter::noop(),
        }
    }

    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        match self.series(key, || Series::Gauge(Arc::default())) {
            Some(Series::Gauge(value)) => Gauge::from_arc(value),
            _ => Gauge::noop(),
        }
    }

    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        match self.series(key, || Series::Histogram(Arc::new(Buckets::new(key.name())))) {
            Some(Series::Histogram(buckets)) => Histogram::from_arc(buckets),
            _ => Histogram::noop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_histograms() {
        let prometheus = Prometheus::new();
        metrics::with_local_recorder(&prometheus, || {
            metrics::describe_counter!("runs_total", "Runs.\nAll of them.");
            metrics::counter!("runs_total", "workflow" => "a\"b").increment(3);
            metrics::counter!("runs_total", "workflow" => "c").increment(1);
            metrics::gauge!("in_flight").increment(2.0);
            metrics::gauge!("in_flight").decrement(0.5);
            metrics::histogram!("step_seconds", "step" => "x").record(0.003);
            metrics::histogram!("step_seconds", "step" => "x").record(2.0);
            metrics::histogram!("batch").record(3.0);
            // The same name as another kind: ignored, never a panic.
            metrics::gauge!("runs_total").set(1.0);
        });
        let text = prometheus.render();
        let expected = [
            "# HELP runs_total Runs.\\nAll of them.",
            "# TYPE runs_total counter",
            "runs_total{workflow=\"a\\\"b\"} 3",
            "runs_total{workflow=\"c\"} 1",
            "# TYPE in_flight gauge\nin_flight 1.5",
            "step_seconds_bucket{step=\"x\",le=\"0.0025\"} 0",
            "step_seconds_bucket{step=\"x\",le=\"0.005\"} 1",
            "step_seconds_bucket{step=\"x\",le=\"2.5\"} 2",
            "step_seconds_bucket{step=\"x\",le=\"+Inf\"} 2",
            "step_seconds_sum{step=\"x\"} 2.003",
            "step_seconds_count{step=\"x\"} 2",
            "batch_bucket{le=\"2\"} 0",
            "batch_bucket{le=\"4\"} 1",
        ];
        for line in expected {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }
}
