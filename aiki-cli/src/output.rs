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

/// Whether tables are coloured: only on a terminal, and not when `NO_COLOR` is set to anything
/// but the empty string (<https://no-color.org>).
pub(crate) fn colour_wanted(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

/// The ANSI colour of a cell that names a run status, if it gets one.
fn status_colour(cell: &str) -> Option<&'static str> {
    match cell.parse::<aiki::RunStatus>().ok()? {
        aiki::RunStatus::Completed => Some("\x1b[32m"),
        aiki::RunStatus::Failed => Some("\x1b[31m"),
        aiki::RunStatus::Cancelled | aiki::RunStatus::Stalled => Some("\x1b[33m"),
        aiki::RunStatus::Running => Some("\x1b[36m"),
        _ => None,
    }
}

/// Columns aligned to their widest cell; on a terminal, a bold header and coloured statuses.
#[derive(Debug, Default)]
pub(crate) struct Table {
    rows: Vec<Vec<String>>,
    colour: bool,
}

impl Table {
    pub(crate) fn new(headers: &[&str]) -> Self {
        use std::io::IsTerminal;
        Table {
            rows: vec![headers.iter().map(|h| h.to_uppercase()).collect()],
            colour: colour_wanted(
                std::io::stdout().is_terminal(),
                std::env::var_os("NO_COLOR"),
            ),
        }
    }

    /// Adds a row; control characters in its cells are shown, not sent to the terminal.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(
            cells
                .into_iter()
                .map(|cell| text(&cell).into_owned())
                .collect(),
        );
    }

    /// Whether it has no row but its header.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.len() <= 1
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
        for (r, row) in self.rows.iter().enumerate() {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                let pad = widths[c].saturating_sub(cell.chars().count());
                let colour = match (self.colour, r) {
                    (false, _) => None,
                    (true, 0) => Some("\x1b[1m"),
                    (true, _) => status_colour(cell),
                };
                match colour {
                    Some(colour) => line.push_str(&format!("{colour}{cell}\x1b[0m")),
                    None => line.push_str(cell),
                }
                if c + 1 < row.len() {
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// `text` with nothing a terminal would act on: a C0 control character is shown as its
/// Unicode control picture (U+0001 as `␁`, a newline as `␊`), DEL as `␡`, and C1 controls and
/// the bidirectional overrides that reorder what is shown as `\u{…}`. Everything stored
/// (names, messages, payloads) goes through it before a terminal sees it.
pub(crate) fn text(text: &str) -> std::borrow::Cow<'_, str> {
    let escaped =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !text.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\0'..='\u{1f}' => shown.push(char::from_u32(0x2400 + c as u32).unwrap_or('?')),
            '\u{7f}' => shown.push('\u{2421}'),
            c if escaped(c) => shown.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => shown.push(c),
        }
    }
    std::borrow::Cow::Owned(shown)
}

pub(crate) use aiki::ops::span;

/// The first 12 characters of a build's fingerprint: enough to tell builds apart.
pub(crate) fn short(fingerprint: &str) -> &str {
    fingerprint.get(..12).unwrap_or(fingerprint)
}

/// `3 min ago`, `in 2 h 5 min`, `now`.
pub(crate) fn relative(at: Millis) -> String {
    aiki::ops::relative(at, SystemClock.now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_reach_a_terminal() {
        assert_eq!(text("plain"), "plain");
        assert_eq!(text("\u{1}event:paid"), "\u{2401}event:paid");
        assert_eq!(text("a\nb\x1b[31m"), "a\u{240a}b\u{241b}[31m");
        assert_eq!(text("\u{7f}\u{85}\u{202e}x"), "\u{2421}\\u{85}\\u{202e}x");
        let mut table = Table::new(&["name"]);
        table.row(vec!["\u{1}child:ship:1".into()]);
        let mut out = Vec::new();
        table.print(&mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
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

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_wanted(true, None));
        assert!(
            colour_wanted(true, Some("".into())),
            "an empty NO_COLOR is unset"
        );
        assert!(!colour_wanted(true, Some("1".into())));
        assert!(!colour_wanted(false, None));
    }

    #[test]
    fn coloured_tables_keep_their_alignment() {
        let mut table = Table::new(&["id", "status", "note"]);
        table.colour = true;
        table.row(vec!["a".into(), "failed".into(), "x".into()]);
        table.row(vec!["bbbb".into(), "queued".into(), "y".into()]);
        let mut out = Vec::new();
        table.print(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\x1b[31mfailed\x1b[0m"), "{text:?}");
        assert!(text.contains("\x1b[1mID\x1b[0m"), "{text:?}");
        let plain = text
            .replace("\x1b[31m", "")
            .replace("\x1b[1m", "")
            .replace("\x1b[0m", "");
        assert_eq!(
            plain,
            "ID    STATUS  NOTE\na     failed  x\nbbbb  queued  y\n"
        );
    }
}
