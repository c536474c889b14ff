//! `cairn schedules …`: declare, list, pause, resume, trigger and delete schedules.

use crate::backend::{Command, Target};
use crate::runs::table;
use crate::store_args::Access;
use anyhow::Result;
use cairn_api::views::ScheduleView;
use cairn_api::{Operations, ScheduleBody};
use clap::Subcommand;

/// `cairn schedules …`.
#[derive(Subcommand)]
pub(crate) enum SchedulesCommand {
    /// List every schedule: its workflow, when it fires, whether it is paused, its next firing.
    List {
        #[command(flatten)]
        target: Target,
        /// Print JSON (the HTTP API's answer) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one schedule.
    Show {
        #[command(flatten)]
        target: Target,
        /// The schedule's name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Create a schedule, or update it (a paused one stays paused; its next firing moves only
    /// if when it fires changed). Workers serving the workflow fire it.
    Put {
        #[command(flatten)]
        target: Target,
        /// The schedule's name.
        name: String,
        /// The workflow each firing starts.
        #[arg(long)]
        workflow: String,
        /// A cron expression (5 fields, or 6 with seconds first); repeat for several.
        #[arg(long = "cron")]
        cron: Vec<String>,
        /// The IANA time zone of the cron expressions (default UTC).
        #[arg(long = "tz")]
        time_zone: Option<String>,
        /// A fixed interval instead of cron (`30s`, `5m`, `1h`).
        #[arg(long)]
        every: Option<String>,
        /// Each run's input as JSON (default `null`).
        #[arg(long)]
        input: Option<String>,
        /// Missed firings: `skip`, `once` (default) or `all:N`.
        #[arg(long = "catch-up")]
        catch_up: Option<String>,
        /// Declare it even if no worker has ever served its workflow on the store. Without it
        /// such a schedule is refused (unknown workflow).
        #[arg(long = "allow-unknown")]
        allow_unknown: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pause a schedule: it fires no more until resumed.
    Pause {
        #[command(flatten)]
        target: Target,
        /// The schedule's name.
        name: String,
    },
    /// Resume a schedule from its next firing after now.
    Resume {
        #[command(flatten)]
        target: Target,
        /// The schedule's name.
        name: String,
    },
    /// Start one run of a schedule now.
    Trigger {
        #[command(flatten)]
        target: Target,
        /// The schedule's name.
        name: String,
    },
    /// Delete a schedule (the runs it started stay).
    Delete {
        #[command(flatten)]
        target: Target,
        /// The schedule's name.
        name: String,
    },
}

fn describe(schedule: &ScheduleView) -> String {
    match (&schedule.every_ms, schedule.cron.is_empty()) {
        (Some(ms), _) => format!("every {}", humantime::format_duration(std::time::Duration::from_millis(*ms))),
        (None, false) => {
            let zone = schedule.time_zone.as_deref().unwrap_or("UTC");
            format!("{} ({zone})", schedule.cron.join(" | "))
        }
        (None, true) => "?".to_owned(),
    }
}

fn print(schedule: &ScheduleView) {
    out!("schedule  {}", schedule.name);
    out!("workflow  {}", schedule.workflow);
    out!("fires     {}", describe(schedule));
    out!("catch-up  {}", schedule.catch_up);
    out!("input     {}", schedule.input);
    out!("paused    {}", if schedule.paused { "yes" } else { "no" });
    out!("next      {}", schedule.next_fire_at.as_deref().unwrap_or("-"));
    out!("last      {}", schedule.last_fired_at.as_deref().unwrap_or("-"));
}

impl Command for SchedulesCommand {
    fn target(&self) -> (&Target, Access) {
        use SchedulesCommand::*;
        match self {
            List { target, .. } | Show { target, .. } => (target, Access::Read),
            Put { target, .. } => (target, Access::Create),
            Pause { target, .. } | Resume { target, .. } | Trigger { target, .. } | Delete { target, .. } => {
                (target, Access::Write)
            }
        }
    }

    async fn execute<O: Operations>(self, ops: &O) -> Result<()> {
        execute(self, ops).await
    }
}

async fn execute<O: Operations>(command: SchedulesCommand, ops: &O) -> Result<()> {
    match command {
        SchedulesCommand::List { target: _, json } => {
            let schedules = ops.schedules().await?;
            if json {
                out!("{}", serde_json::to_string(&schedules)?);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = (schedules.schedules.iter())
                .map(|s| {
                    vec![
                        s.name.clone(),
                        s.workflow.clone(),
                        describe(s),
                        s.catch_up.clone(),
                        if s.paused { "paused" } else { "active" }.to_owned(),
                        s.next_fire_at.clone().unwrap_or_else(|| "-".into()),
                        s.last_fired_at.clone().unwrap_or_else(|| "-".into()),
                    ]
                })
                .collect();
            out!("{}", table(&["NAME", "WORKFLOW", "FIRES", "CATCH-UP", "STATE", "NEXT", "LAST"], &rows));
        }
        SchedulesCommand::Show { target: _, name, json } => {
            let schedule = ops.schedule(&name).await?;
            match json {
                true => out!("{}", serde_json::to_string(&schedule)?),
                false => print(&schedule),
            }
        }
        SchedulesCommand::Put {
            target: _,
            name,
            workflow,
            cron,
            time_zone,
            every,
            input,
            catch_up,
            allow_unknown,
            json,
        } => {
            let input = input
                .map(|text| serde_json::from_str(&text))
                .transpose()
                .map_err(|e| anyhow::anyhow!("--input is not JSON: {e}"))?;
            let allow_unknown = allow_unknown.then_some(true);
            let body = ScheduleBody { workflow, cron, time_zone, every, input, catch_up, allow_unknown };
            let schedule = ops.put_schedule(&name, &body).await?;
            match json {
                true => out!("{}", serde_json::to_string(&schedule)?),
                false => print(&schedule),
            }
        }
        SchedulesCommand::Pause { target: _, name } => {
            let schedule = ops.pause_schedule(&name).await?;
            out!("paused {}", schedule.name);
        }
        SchedulesCommand::Resume { target: _, name } => {
            let schedule = ops.resume_schedule(&name).await?;
            out!("resumed {}; next firing {}", schedule.name, schedule.next_fire_at.as_deref().unwrap_or("-"));
        }
        SchedulesCommand::Trigger { target: _, name } => {
            let started = ops.trigger_schedule(&name).await?;
            out!("started {} ({} v{})", started.run.id, started.run.workflow, started.run.version);
        }
        SchedulesCommand::Delete { target: _, name } => {
            ops.delete_schedule(&name).await?;
            out!("deleted {name}");
        }
    }
    Ok(())
}
