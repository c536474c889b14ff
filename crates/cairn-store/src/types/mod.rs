//! The types stores take and give back, by concern: runs (`run`), pages and counts (`lists`),
//! flow control (`flow`), workers and subscriptions (`workers`), the changes callers ask for
//! (`writes`), schedules (`schedules`), published events (`events`); and the errors a store answers with (here).

mod events;
mod flow;
mod lists;
mod names;
mod run;
mod schedules;
mod workers;
mod writes;

pub use events::*;
pub use flow::*;
pub use lists::*;
pub use names::*;
pub use run::*;
pub use schedules::*;
pub use workers::*;
pub use writes::*;
