//! Explicit continuations: `cargo run -p cairn --example continuations`.
//!
//! A support ticket as a state machine of named steps sharing a scratchpad: `triage` sends it to
//! `auto-reply` or `escalate`, and each says what comes next.

use cairn::prelude::*;
use cairn::{Continuations, SqliteStore, Transition};

#[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
struct Ticket {
    notes: Vec<String>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let support = Continuations::<String, Ticket, String>::new("triage")
        .step("triage", |text: String, mut ticket: Ticket| async move {
            ticket.notes.push(format!("triaged {text:?}"));
            let next = if text.contains("urgent") { "escalate" } else { "auto-reply" };
            Ok::<_, StepError>((ticket, Transition::next(next)))
        })
        .step("auto-reply", |_, mut ticket: Ticket| async move {
            ticket.notes.push("sent the FAQ".into());
            let done = Transition::Done(ticket.notes.join("; "));
            Ok::<_, StepError>((ticket, done))
        })
        .step("escalate", |_, mut ticket: Ticket| async move {
            ticket.notes.push("paged the on-call engineer".into());
            let done = Transition::Done(ticket.notes.join("; "));
            Ok::<_, StepError>((ticket, done))
        })
        .workflow()?;
    let dir = tempfile::tempdir()?;
    let engine = Engine::builder()
        .store(SqliteStore::open(dir.path().join("cairn.db"))?)
        .register("support", 1, support)
        .start()
        .await?;
    for text in ["where is my invoice?", "urgent: the site is down"] {
        let outcome: String = engine.client().start("support", &text.to_owned()).await?.result().await?;
        println!("{outcome}");
    }
    engine.shutdown().await;
    Ok(())
}
