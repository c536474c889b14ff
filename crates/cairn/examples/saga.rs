//! A saga: `cargo run -p cairn --example saga`.
//!
//! `trip` books a flight and a hotel, then charges the card; when the charge fails for good, the
//! bookings are cancelled in reverse order, each cancellation a journaled step.

use cairn::SqliteStore;
use cairn::prelude::*;

async fn trip(ctx: Ctx, card_ok: bool) -> Result<String, WorkflowError> {
    let booked = ctx
        .saga(|ctx, saga| async move {
            let flight = saga
                .step(ctx.step("flight", || async { Ok::<_, StepError>("LH-400".to_owned()) }), |flight| async move {
                    println!("  cancelling flight {flight}");
                    Ok::<_, StepError>(())
                })
                .await?;
            let hotel = saga
                .step(ctx.step("hotel", || async { Ok::<_, StepError>("H-7".to_owned()) }), |hotel| async move {
                    println!("  cancelling hotel {hotel}");
                    Ok::<_, StepError>(())
                })
                .await?;
            ctx.step(
                "charge",
                || async move { if card_ok { Ok(()) } else { Err(StepError::terminal("card declined")) } },
            )
            .await?;
            Ok(format!("booked {flight} and {hotel}"))
        })
        .await;
    match booked {
        Err(WorkflowError::Compensated { error, undone }) => Ok(format!("undid {} after: {error}", undone.join(", "))),
        other => other,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let engine = Engine::builder()
        .store(SqliteStore::open(dir.path().join("cairn.db"))?)
        .register("trip", 1, trip)
        .start()
        .await?;
    println!("{}", engine.client().start("trip", &true).await?.result::<String>().await?);
    println!("{}", engine.client().start("trip", &false).await?.result::<String>().await?);
    engine.shutdown().await;
    Ok(())
}
