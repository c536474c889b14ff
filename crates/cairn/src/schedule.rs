//! Schedules: when a schedule fires, and which firings a late worker starts. Pure logic; the
//! engine's claim loop fires due schedules through the store (`ScheduleStore::fire_schedule`).

use crate::error::ClientError;
use cairn_journal::Timestamp;
use cairn_store::ScheduleName;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::Duration;

/// A firing due at most this long ago is on time: every catch-up policy starts it. Older ones
/// were missed (no worker was up) and the schedule's [`CatchUp`] decides.
pub const ON_TIME: Duration = Duration::from_secs(60);

/// The most runs one firing of a schedule starts ([`CatchUp::All`] is capped here).
pub const MAX_CATCH_UP: u32 = 1_000;

/// What a schedule does about firings it missed while no worker serving its workflow was up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Start none of them; go on from the next firing.
    Skip,
    /// Start one run, for the latest of them (the default).
    #[default]
    Once,
    /// Start a run for each, the latest `max` of them at most.
    All {
        /// At most this many (1 to [`MAX_CATCH_UP`]).
        max: u32,
    },
}

impl CatchUp {
    /// Parses `skip`, `once` or `all:N`.
    ///
    /// ```
    /// use cairn::CatchUp;
    /// assert_eq!(CatchUp::parse("all:5"), Ok(CatchUp::All { max: 5 }));
    /// assert!(CatchUp::parse("sometimes").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<CatchUp, String> {
        match text {
            "skip" => Ok(CatchUp::Skip),
            "once" => Ok(CatchUp::Once),
            _ => match text.strip_prefix("all:").map(str::parse::<u32>) {
                Some(Ok(max)) if (1..=MAX_CATCH_UP).contains(&max) => Ok(CatchUp::All { max }),
                _ => Err(format!("catch-up {text:?}: expected skip, once or all:N with N from 1 to {MAX_CATCH_UP}")),
            },
        }
    }
}

impl std::fmt::Display for CatchUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatchUp::Skip => f.write_str("skip"),
            CatchUp::Once => f.write_str("once"),
            CatchUp::All { max } => write!(f, "all:{max}"),
        }
    }
}

/// When a schedule fires: cron expressions in a time zone, or a fixed interval. Stored as JSON
/// in the schedule's `spec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleSpec {
    /// Cron expressions: 5 fields (minute, hour, day of month, month, day of week) or 6 with
    /// seconds first; `L`, `W` and `#` as the `croner` crate reads them. It fires at each time any
    /// of them matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cron: Vec<String>,
    /// The IANA time zone the expressions are read in (default `UTC`): `0 9 * * *` in
    /// `Europe/Berlin` fires at 09:00 Berlin time, summer and winter; a time skipped by a
    /// daylight-saving change fires at the first instant after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// A fixed interval in milliseconds instead: firings at every multiple of it since the Unix
    /// epoch (so every worker computes the same times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// What to do about missed firings.
    #[serde(default)]
    pub catch_up: CatchUp,
}

/// A schedule's definition: it starts `workflow` with `input` each time `spec` fires.
///
/// ```
/// use cairn::{CatchUp, Schedule};
/// let nightly = Schedule::cron("nightly-report", "report", ["0 2 * * *"])
///     .time_zone("Europe/Berlin")
///     .input(&serde_json::json!({ "kind": "daily" }))
///     .catch_up(CatchUp::Once);
/// assert!(nightly.check().is_ok());
/// assert!(Schedule::cron("bad", "report", ["61 * * * *"]).check().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Unique name (1 to 100 bytes; no `/`, `@` or control characters).
    pub name: String,
    /// The workflow each firing starts (at the newest version the firing worker registers).
    pub workflow: String,
    /// When it fires.
    pub spec: ScheduleSpec,
    /// Each run's input (default `null`).
    pub input: Result<Box<RawValue>, String>,
    /// Declare it even if no worker has ever served its workflow (see
    /// [`allow_unknown`](Schedule::allow_unknown)).
    pub allow_unknown: bool,
}

impl Schedule {
    /// Fires at each time one of the cron `expressions` matches, in UTC unless
    /// [`time_zone`](Schedule::time_zone) says otherwise.
    pub fn cron<S: Into<String>>(
        name: impl Into<String>,
        workflow: impl Into<String>,
        expressions: impl IntoIterator<Item = S>,
    ) -> Schedule {
        let spec = ScheduleSpec {
            cron: expressions.into_iter().map(Into::into).collect(),
            time_zone: None,
            every_ms: None,
            catch_up: CatchUp::default(),
        };
        Schedule::with_spec(name, workflow, spec)
    }

    /// Fires every `interval` (at its multiples since the Unix epoch; at least a second).
    pub fn every(name: impl Into<String>, workflow: impl Into<String>, interval: Duration) -> Schedule {
        let every_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        let spec =
            ScheduleSpec { cron: Vec::new(), time_zone: None, every_ms: Some(every_ms), catch_up: CatchUp::default() };
        Schedule::with_spec(name, workflow, spec)
    }

    /// A schedule with this spec.
    pub fn with_spec(name: impl Into<String>, workflow: impl Into<String>, spec: ScheduleSpec) -> Schedule {
        let input = Ok(RawValue::NULL.to_owned());
        Schedule { name: name.into(), workflow: workflow.into(), spec, input, allow_unknown: false }
    }

    /// The time zone of its cron expressions (IANA name, e.g. `America/New_York`).
    pub fn time_zone(mut self, zone: impl Into<String>) -> Schedule {
        self.spec.time_zone = Some(zone.into());
        self
    }

    /// Each run's input.
    pub fn input<I: Serialize + ?Sized>(mut self, input: &I) -> Schedule {
        self.input = serde_json::value::to_raw_value(input).map_err(|e| e.to_string());
        self
    }

    /// Declares the schedule even if no worker has ever served its workflow on the store (a
    /// worker deployed later will): without it, [`Client::put_schedule`](crate::Client::put_schedule)
    /// refuses such a schedule with `[CAIRN-E0304]`, since its firings would wait for nobody.
    pub fn allow_unknown(mut self) -> Schedule {
        self.allow_unknown = true;
        self
    }

    /// What to do about missed firings (default [`CatchUp::Once`]).
    pub fn catch_up(mut self, policy: CatchUp) -> Schedule {
        self.spec.catch_up = policy;
        self
    }

    /// Checks the name, the spec and the input; the reason when one is refused.
    pub fn check(&self) -> Result<Firings, ClientError> {
        check_name(&self.name)?;
        if self.workflow.is_empty() {
            return Err(ClientError::UnknownWorkflow(String::new()));
        }
        cairn_store::WorkflowName::check(&self.workflow).map_err(ClientError::InvalidName)?;
        self.input.as_ref().map_err(|e| ClientError::InvalidPayload(e.clone()))?;
        Firings::new(&self.spec)
    }
}

/// Checks a schedule name: 1 to 100 bytes, no `/`, `@` or control characters (a firing's run
/// id is the name, `@` and the firing time).
pub(crate) fn check_name(name: &str) -> Result<(), ClientError> {
    ScheduleName::check(name).map_err(|error| ClientError::InvalidSchedule(error.to_string()))
}

/// The id of the run a schedule starts for its firing at `at`: `<name>@<RFC 3339 time>`, the
/// same on every worker, so a firing never starts two runs.
///
/// ```
/// use cairn::{Timestamp, schedule_run_id};
/// assert_eq!(schedule_run_id("nightly", Timestamp::from_millis(1_795_996_800_000)).as_str(), "nightly@2026-11-30T00:00:00Z");
/// ```
pub fn schedule_run_id(name: &str, at: Timestamp) -> cairn_store::RunId {
    cairn_store::RunId::new(format!("{name}@{}", instant(at)))
}

fn instant(at: Timestamp) -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(at.as_millis()).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

fn millis(at: jiff::Timestamp) -> Timestamp {
    Timestamp::from_millis(at.as_millisecond())
}

/// A spec compiled: its firing times.
#[derive(Debug, Clone)]
pub struct Firings {
    when: When,
    catch_up: CatchUp,
}

/// What `find` gives for each expression, looking from `t` in `zone`.
fn occurrences<'a>(
    crons: &'a [croner::Cron],
    zone: &jiff::tz::TimeZone,
    t: Timestamp,
    find: impl Fn(&croner::Cron, &jiff::Zoned) -> Result<jiff::Zoned, croner::errors::CronError> + 'a,
) -> impl Iterator<Item = Timestamp> + 'a {
    let from = instant(t).to_zoned(zone.clone());
    crons.iter().filter_map(move |cron| find(cron, &from).ok()).map(|z| millis(z.timestamp()))
}

#[derive(Debug, Clone)]
enum When {
    Cron { crons: Vec<croner::Cron>, zone: jiff::tz::TimeZone },
    Every(i64),
}

impl Firings {
    /// Compiles `spec`; refused with the reason if an expression, the time zone or the interval
    /// is not valid.
    pub fn new(spec: &ScheduleSpec) -> Result<Firings, ClientError> {
        let invalid = |message: String| ClientError::InvalidSchedule(message);
        // A zone given is checked whether or not the spec uses it, so that no schedule stores a
        // zone it cannot read.
        let zone = (spec.time_zone.as_deref())
            .map(|name| jiff::tz::TimeZone::get(name).map_err(|_| ClientError::UnknownTimeZone(name.to_owned())))
            .transpose()?;
        let when = match (&spec.cron[..], spec.every_ms) {
            ([], None) => return Err(invalid("a schedule needs cron expressions or an interval".into())),
            ([_, ..], Some(_)) => {
                return Err(invalid("a schedule has cron expressions or an interval, not both".into()));
            }
            ([], Some(every)) => match i64::try_from(every) {
                Ok(every) if every >= 1_000 => When::Every(every),
                _ => return Err(invalid(format!("interval of {every} ms: at least 1 second"))),
            },
            (expressions, None) => {
                let parser = croner::parser::CronParser::builder().seconds(croner::parser::Seconds::Optional).build();
                let crons = (expressions.iter())
                    .map(|e| parser.parse(e).map_err(|error| invalid(format!("cron expression {e:?}: {error}"))))
                    .collect::<Result<Vec<_>, _>>()?;
                When::Cron { crons, zone: zone.unwrap_or(jiff::tz::TimeZone::UTC) }
            }
        };
        if let CatchUp::All { max } = spec.catch_up
            && !(1..=MAX_CATCH_UP).contains(&max)
        {
            return Err(invalid(format!("catch-up all:{max}: from 1 to {MAX_CATCH_UP}")));
        }
        Ok(Firings { when, catch_up: spec.catch_up })
    }

    /// Compiles a spec as a store keeps it ([`ScheduleRecord::spec`](cairn_store::ScheduleRecord::spec)).
    pub fn parse_stored(spec: &str) -> Result<Firings, ClientError> {
        Firings::new(&ScheduleSpec::parse_stored(spec)?)
    }

    /// The first firing strictly after `t` (`None`: it never fires again).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match &self.when {
            When::Every(every) => t
                .as_millis()
                .checked_div(*every)
                .and_then(|n| n.checked_add(1)?.checked_mul(*every))
                .map(Timestamp::from_millis),
            When::Cron { crons, zone } => {
                occurrences(crons, zone, t, |cron, from| cron.find_next_occurrence(from, false)).min()
            }
        }
    }

    /// The last firing at or before `t`, if any.
    fn latest_at(&self, t: Timestamp) -> Option<Timestamp> {
        match &self.when {
            When::Every(every) => Some(Timestamp::from_millis(t.as_millis().div_euclid(*every) * every)),
            When::Cron { crons, zone } => {
                occurrences(crons, zone, t, |cron, from| cron.find_previous_occurrence(from, true)).max()
            }
        }
    }

    /// Up to `n` firings in `[from, to]`, latest first.
    fn latest_in(&self, from: Timestamp, to: Timestamp, n: usize) -> Vec<Timestamp> {
        let mut found = Vec::new();
        let mut at = to;
        while found.len() < n
            && let Some(latest) = self.latest_at(at).filter(|t| *t >= from)
        {
            found.push(latest);
            at = Timestamp::from_millis(latest.as_millis() - 1);
        }
        found
    }

    /// A schedule due since `due` (its `next_fire_at`), looked at `now`: the firing times to start
    /// a run for, oldest first, and its next firing after `now`. Firings within [`ON_TIME`] of
    /// `now` always start; older ones by the catch-up policy.
    pub fn due(&self, due: Timestamp, now: Timestamp) -> (Vec<Timestamp>, Option<Timestamp>) {
        let on_time_from = Timestamp::from_millis(now.as_millis().saturating_sub(ON_TIME.as_millis() as i64));
        let mut start = match self.catch_up {
            CatchUp::Skip => self.latest_in(due.max(on_time_from), now, MAX_CATCH_UP as usize),
            CatchUp::Once => {
                let on_time = self.latest_in(due.max(on_time_from), now, MAX_CATCH_UP as usize);
                if on_time.is_empty() { self.latest_in(due, now, 1) } else { on_time }
            }
            CatchUp::All { max } => self.latest_in(due, now, max as usize),
        };
        start.reverse();
        (start, self.next_after(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60_000;

    fn spec(cron: &[&str], zone: Option<&str>, catch_up: CatchUp) -> Firings {
        let spec = ScheduleSpec {
            cron: cron.iter().map(|c| (*c).to_owned()).collect(),
            time_zone: zone.map(Into::into),
            every_ms: None,
            catch_up,
        };
        Firings::new(&spec).unwrap()
    }

    fn at(text: &str) -> Timestamp {
        millis(text.parse::<jiff::Timestamp>().unwrap())
    }

    #[test]
    fn cron_in_a_time_zone_follows_its_clock_across_daylight_saving() {
        let daily = spec(&["30 2 * * *"], Some("Europe/Berlin"), CatchUp::Once);
        // 2026-03-29: Berlin skips 02:00-03:00; the firing happens at the first instant after.
        assert_eq!(daily.next_after(at("2026-03-28T12:00:00Z")), Some(at("2026-03-29T01:00:00Z")));
        assert_eq!(daily.next_after(at("2026-03-29T01:00:00Z")), Some(at("2026-03-30T00:30:00Z")));
        assert_eq!(daily.next_after(at("2026-01-10T00:00:00Z")), Some(at("2026-01-10T01:30:00Z")));
    }

    #[test]
    fn several_expressions_and_seconds() {
        let both = spec(&["0 9 * * *", "0 17 * * *"], None, CatchUp::Once);
        assert_eq!(both.next_after(at("2026-11-24T10:00:00Z")), Some(at("2026-11-24T17:00:00Z")));
        let fast = spec(&["*/10 * * * * *"], None, CatchUp::Once);
        assert_eq!(fast.next_after(at("2026-11-24T10:00:05Z")), Some(at("2026-11-24T10:00:10Z")));
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        let check = |cron: &[&str], zone: Option<&str>, every_ms: Option<u64>| {
            let spec = ScheduleSpec {
                cron: cron.iter().map(|c| (*c).to_owned()).collect(),
                time_zone: zone.map(Into::into),
                every_ms,
                catch_up: CatchUp::Once,
            };
            Firings::new(&spec).unwrap_err().to_string()
        };
        assert!(check(&["61 * * * *"], None, None).contains("61 * * * *"));
        assert!(check(&["* * * * *"], Some("Mars/Olympus"), None).contains("Mars/Olympus"));
        assert!(check(&[], None, Some(10)).contains("at least 1 second"));
        assert!(check(&[], None, None).contains("needs"));
        assert!(check(&["* * * * *"], None, Some(60_000)).contains("not both"));
    }

    #[test]
    fn intervals_fire_at_multiples_of_themselves() {
        let every = Firings::new(&ScheduleSpec {
            cron: Vec::new(),
            time_zone: None,
            every_ms: Some(5 * MINUTE as u64),
            catch_up: CatchUp::All { max: 3 },
        })
        .unwrap();
        let t = |m: i64| Timestamp::from_millis(m * MINUTE);
        assert_eq!(every.next_after(t(7)), Some(t(10)));
        assert_eq!(every.next_after(t(10)), Some(t(15)));
        // Down from 10 to 42: the latest three missed firings, oldest first.
        assert_eq!(every.due(t(10), t(42)), (vec![t(30), t(35), t(40)], Some(t(45))));
    }

    #[test]
    fn catch_up_policies_pick_the_missed_firings() {
        let t = |m: i64| at("2026-11-24T00:00:00Z").as_millis() + m * MINUTE;
        let t = move |m| Timestamp::from_millis(t(m));
        let every_minute = |policy| spec(&["* * * * *"], None, policy);
        // On time: started whatever the policy.
        for policy in [CatchUp::Skip, CatchUp::Once, CatchUp::All { max: 2 }] {
            assert_eq!(every_minute(policy).due(t(5), t(5)), (vec![t(5)], Some(t(6))), "{policy}");
        }
        // Down from minute 5 to 65 (looked at 30 s after minute 65).
        let now = Timestamp::from_millis(t(65).as_millis() + 30_000);
        assert_eq!(every_minute(CatchUp::Skip).due(t(5), now), (vec![t(65)], Some(t(66))), "only the on-time one");
        assert_eq!(every_minute(CatchUp::Once).due(t(5), now).0, vec![t(65)]);
        assert_eq!(every_minute(CatchUp::All { max: 3 }).due(t(5), now).0, vec![t(63), t(64), t(65)]);
        // Nothing on time: skip starts nothing, once the latest missed.
        let hourly = |policy| spec(&["0 * * * *"], None, policy);
        let later = t(150);
        assert_eq!(hourly(CatchUp::Skip).due(t(60), later), (vec![], Some(t(180))));
        assert_eq!(hourly(CatchUp::Once).due(t(60), later).0, vec![t(120)]);
        assert_eq!(hourly(CatchUp::All { max: 10 }).due(t(60), later).0, vec![t(60), t(120)]);
    }

    #[test]
    fn names_and_run_ids() {
        assert!(check_name("nightly-report").is_ok());
        for bad in ["", "a/b", "a@b", "tab\there"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"x".repeat(101)).is_err());
        assert_eq!(schedule_run_id("n", Timestamp::from_millis(1_500)).as_str(), "n@1970-01-01T00:00:01.5Z");
    }
}
