//! Printing: aligned tables for people, JSON documents and lines for programs.

use std::io::Write;

use aiki::{Clock, Millis, RunRecord, SystemClock};
use serde_json::Value;

use crate::Failure;
use crate::args::Format;

/// A run record as JSON, without its input and output if payloads are left out.
pub(crate) fn run_json(run: &RunRecord, no_payloads: bool) -> Value {
    let mut value = serde_json::to_value(run).expect("BUG: run records serialize");
    if no_payloads && let Some(object) = value.as_object_mut() {
        object.remove("input");
        object.remove("output");
    }
    value
}

/// Writes one JSON document (`json`) or one line (`jsonl`).
pub(crate) fn json(out: &mut impl Write, format: Format, value: &Value) -> Result<(), Failure> {
    match format {
        Format::Jsonl => writeln!(out, "{value}")?,
        _ => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(value).expect("BUG: JSON values serialize")
        )?,
    }
    Ok(())
}

/// Columns aligned to their widest cell.
#[derive(Debug, Default)]
pub(crate) struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(headers: &[&str]) -> Self {
        Table {
            rows: vec![headers.iter().map(|h| h.to_uppercase()).collect()],
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(crate) fn print(&self, out: &mut impl Write) -> Result<(), Failure> {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|row| row.get(c))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  ", width = widths[c]));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// `3 min ago`, `in 2 h 5 min`, `now`.
pub(crate) fn relative(at: Millis) -> String {
    let now = SystemClock.now();
    let (ms, future) = if at >= now {
        (at - now, true)
    } else {
        (now - at, false)
    };
    let span = span(ms);
    if span == "0 s" {
        return "now".to_owned();
    }
    if future {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// A length of time in its two largest units: `2 h 59 min`, `40 s`, `3 d 4 h`.
pub(crate) fn span(ms: i64) -> String {
    let seconds = ms / 1000;
    let units = [("d", 86_400), ("h", 3600), ("min", 60), ("s", 1)];
    let mut parts = Vec::new();
    let mut rest = seconds;
    for (name, size) in units {
        if rest >= size || (parts.is_empty() && size == 1) {
            parts.push(format!("{} {name}", rest / size));
            rest %= size;
        }
        if parts.len() == 2 {
            break;
        }
        if !parts.is_empty() && rest == 0 {
            break;
        }
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_keep_their_two_largest_units() {
        assert_eq!(span(0), "0 s");
        assert_eq!(span(40_000), "40 s");
        assert_eq!(span(10_740_000), "2 h 59 min");
        assert_eq!(span(3_600_000), "1 h");
        assert_eq!(span(273_600_000), "3 d 4 h");
    }

    #[test]
    fn tables_align_their_columns() {
        let mut table = Table::new(&["id", "status"]);
        table.row(vec!["a".into(), "queued".into()]);
        table.row(vec!["bbbb".into(), "completed".into()]);
        let mut out = Vec::new();
        table.print(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ID    STATUS\na     queued\nbbbb  completed\n"
        );
    }
}
