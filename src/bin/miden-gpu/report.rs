//! The results a command prints on stdout: one `name  value` line per item, values aligned.

use std::{fmt::Display, time::Duration};

/// Lines of a command's results, printed together.
#[derive(Default)]
pub struct Report {
    lines: Vec<(&'static str, String)>,
}

impl Report {
    /// An empty report.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the line `name  value`.
    pub fn line(&mut self, name: &'static str, value: impl Display) -> &mut Self {
        self.lines.push((name, value.to_string()));
        self
    }

    /// Prints the lines with the values in one column.
    pub fn print(&self) {
        let width = self.lines.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
        for (name, value) in &self.lines {
            println!("{name:<width$}  {value}");
        }
    }
}

/// A duration in milliseconds, one decimal.
pub fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}
