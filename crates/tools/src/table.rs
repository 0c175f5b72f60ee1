//! A small terminal table: a header row and rows of cells, the first column left-aligned and the
//! others right-aligned, with optional ANSI colours (SGR codes; none when colour is off).

use std::fmt::Write as _;

/// How a cell is highlighted when colour is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Tone {
    /// No highlight.
    #[default]
    Plain,
    /// Bold (headers, corrected values).
    Bold,
    /// Green: within tolerance of the truth.
    Good,
    /// Red: far from the truth.
    Bad,
    /// Dim: unavailable or secondary.
    Dim,
}

impl Tone {
    fn sgr(self) -> &'static str {
        match self {
            Tone::Plain => "",
            Tone::Bold => "\x1b[1m",
            Tone::Good => "\x1b[32m",
            Tone::Bad => "\x1b[31m",
            Tone::Dim => "\x1b[2m",
        }
    }
}

/// One cell: its text and tone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Cell {
    /// The text (no control characters).
    pub(crate) text: String,
    /// The highlight.
    pub(crate) tone: Tone,
}

impl Cell {
    /// A cell with `tone`.
    pub(crate) fn new(text: impl Into<String>, tone: Tone) -> Cell {
        Cell {
            text: text.into(),
            tone,
        }
    }

    /// A plain cell.
    pub(crate) fn plain(text: impl Into<String>) -> Cell {
        Cell::new(text, Tone::Plain)
    }
}

/// A table with a header row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Table {
    /// Column titles.
    pub(crate) header: Vec<String>,
    /// Rows; a short row is padded with empty cells.
    pub(crate) rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table with these column titles and no rows.
    pub(crate) fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub(crate) fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    /// The table as text lines (each ending in `\n`): header, a rule of `─`, then the rows,
    /// columns separated by two spaces. With `color`, tones become ANSI SGR codes.
    pub(crate) fn render(&self, color: bool) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0usize; columns];
        for (i, h) in self.header.iter().enumerate() {
            widths[i] = widths[i].max(h.chars().count());
        }
        for row in &self.rows {
            for (i, c) in row.iter().enumerate() {
                widths[i] = widths[i].max(c.text.chars().count());
            }
        }
        let mut out = String::new();
        let header: Vec<Cell> = self
            .header
            .iter()
            .map(|h| Cell::new(h.clone(), Tone::Bold))
            .collect();
        write_row(&mut out, &header, &widths, color);
        let rule: usize = widths.iter().sum::<usize>() + 2 * columns.saturating_sub(1);
        out.push_str(&"─".repeat(rule));
        out.push('\n');
        for row in &self.rows {
            write_row(&mut out, row, &widths, color);
        }
        out
    }
}

fn write_row(out: &mut String, row: &[Cell], widths: &[usize], color: bool) {
    let mut line = String::new();
    for (i, width) in widths.iter().enumerate() {
        let empty = Cell::default();
        let cell = row.get(i).unwrap_or(&empty);
        if i > 0 {
            line.push_str("  ");
        }
        let pad = width - cell.text.chars().count();
        let styled = color && cell.tone != Tone::Plain;
        if i > 0 {
            line.push_str(&" ".repeat(pad));
        }
        if styled {
            line.push_str(cell.tone.sgr());
        }
        line.push_str(&cell.text);
        if styled {
            line.push_str("\x1b[0m");
        }
        if i == 0 {
            line.push_str(&" ".repeat(pad));
        }
    }
    let _ = writeln!(out, "{}", line.trim_end());
}

#[cfg(test)]
mod tests;
