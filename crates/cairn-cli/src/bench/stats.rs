//! Summaries of measured samples: percentiles and statement counts.

/// Statements run between two `statement_calls` snapshots, most frequent first, each as the
/// start of its text (whitespace squeezed, at most 100 characters).
pub(crate) fn statement_counts(before: &[(String, i64)], after: &[(String, i64)]) -> Vec<(String, i64)> {
    let before: std::collections::HashMap<&str, i64> = before.iter().map(|(q, n)| (q.as_str(), *n)).collect();
    let mut counts: Vec<(String, i64)> = after
        .iter()
        .map(|(query, n)| (query, n - before.get(query.as_str()).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .map(|(query, n)| (query.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(100).collect(), n))
        .collect();
    counts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    counts
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

pub(crate) fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}
