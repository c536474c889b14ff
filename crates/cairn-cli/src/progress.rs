//! Progress of long commands (`bench`, `runs prune`, `demo`) on stderr: a bar redrawn in place
//! when stderr is a terminal, a plain line now and then otherwise (logs, CI).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often a bar is redrawn, and a plain line printed at most.
const REDRAW: Duration = Duration::from_millis(100);
const PLAIN: Duration = Duration::from_secs(5);

/// One task's progress: `done` of `total` (when known) units.
pub(crate) struct Progress {
    what: String,
    unit: &'static str,
    total: Option<u64>,
    done: u64,
    tty: bool,
    drawn: Option<Instant>,
}

impl Progress {
    /// A bar on a terminal, plain lines otherwise.
    pub(crate) fn new(what: impl Into<String>, unit: &'static str, total: Option<u64>) -> Progress {
        Progress::with_terminal(what, unit, total, std::io::stderr().is_terminal())
    }

    fn with_terminal(what: impl Into<String>, unit: &'static str, total: Option<u64>, tty: bool) -> Progress {
        Progress { what: what.into(), unit, total, done: 0, tty, drawn: None }
    }

    /// Whether this draws a bar (a terminal) rather than plain lines.
    pub(crate) fn is_bar(&self) -> bool {
        self.tty
    }

    /// Sets how much is done, and shows it if it is time to.
    pub(crate) fn set(&mut self, done: u64) {
        self.done = done;
        let every = if self.tty { REDRAW } else { PLAIN };
        if self.drawn.is_none_or(|at| at.elapsed() >= every) {
            self.show();
        }
    }

    /// Adds to what is done.
    pub(crate) fn add(&mut self, more: u64) {
        self.set(self.done + more);
    }

    /// The line as shown.
    fn line(&self) -> String {
        match self.total {
            Some(total) if self.tty => {
                const WIDTH: u64 = 30;
                let filled = (self.done.min(total) * WIDTH).checked_div(total).unwrap_or(WIDTH);
                let bar: String = (0..WIDTH).map(|i| if i < filled { '#' } else { '-' }).collect();
                let percent = (self.done.min(total) * 100).checked_div(total).unwrap_or(100);
                format!("{} [{bar}] {percent:>3}% {}/{total} {}", self.what, self.done, self.unit)
            }
            Some(total) => format!("{}: {}/{total} {}", self.what, self.done, self.unit),
            None => format!("{}: {} {}", self.what, self.done, self.unit),
        }
    }

    fn show(&mut self) {
        self.drawn = Some(Instant::now());
        let mut err = std::io::stderr().lock();
        let _ = if self.tty { write!(err, "\r{}\x1b[K", self.line()) } else { writeln!(err, "{}", self.line()) };
        let _ = err.flush();
    }

    /// Shows the final count and ends the bar's line (a terminal), or prints it (otherwise).
    pub(crate) fn finish(mut self) {
        self.show();
        if self.tty {
            let _ = writeln!(std::io::stderr());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_and_plain_lines() {
        let mut bar = Progress::with_terminal("w1", "runs", Some(200), true);
        bar.done = 50;
        assert_eq!(bar.line(), format!("w1 [{}{}]  25% 50/200 runs", "#".repeat(7), "-".repeat(23)));
        bar.done = 250;
        assert!(bar.line().contains("100% 250/200"), "{}", bar.line());
        let mut plain = Progress::with_terminal("pruning", "runs deleted", None, false);
        plain.done = 3000;
        assert_eq!(plain.line(), "pruning: 3000 runs deleted");
        let empty = Progress::with_terminal("w1", "runs", Some(0), true);
        assert!(empty.line().contains("100%"), "{}", empty.line());
    }
}
