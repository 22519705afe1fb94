//! Fitting text into the terminal's 100 columns: width in characters,
//! truncation with `…`, word wrapping, and a compact aligned table whose
//! label column shrinks (and whose last column wraps) to stay inside.

use stallscope_bundle::TimingMode;
use stallscope_bundle::analysis::MetricKey;

/// The width every default (compact) line keeps within, in characters.
pub const WIDTH: usize = 100;

/// Columns taken by a string: its characters (not its bytes).
pub fn width(s: &str) -> usize {
    s.chars().count()
}

/// `s` cut to `max` characters, the last one `…` when something was cut.
pub fn fit(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// Word-wrap `text` into lines of at most `max` characters, the first line
/// starting with `first`, the others with `rest`; a word longer than a line
/// is split. Every line ends with a newline.
pub fn wrap(text: &str, first: &str, rest: &str, max: usize) -> String {
    wrap_lines(text, first, rest, max)
        .into_iter()
        .map(|l| l + "\n")
        .collect()
}

/// [`wrap`] as separate lines, without newlines.
pub fn wrap_lines(text: &str, first: &str, rest: &str, max: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut has_word = false;
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let used = width(&line) + usize::from(has_word);
            if used + word.len() <= max {
                break;
            }
            if has_word {
                lines.push(std::mem::replace(&mut line, rest.to_string()));
                has_word = false;
                continue;
            }
            // A word longer than a whole line: split it.
            let room = max.saturating_sub(width(&line));
            if room == 0 {
                break;
            }
            line.extend(word.drain(..room));
            lines.push(std::mem::replace(&mut line, rest.to_string()));
        }
        if word.is_empty() {
            continue;
        }
        if has_word {
            line.push(' ');
        }
        line.extend(word);
        has_word = true;
    }
    if has_word || lines.is_empty() {
        lines.push(line.trim_end().to_string());
    }
    lines
}

/// One column of a [`compact_table`].
#[derive(Debug, Clone)]
pub struct Column {
    /// Heading, up to two lines (the second may be empty).
    pub head: [String; 2],
    /// Right-aligned (numbers) or left-aligned (text).
    pub right: bool,
}

impl Column {
    pub fn left(head: &str, second: &str) -> Column {
        Column {
            head: [head.into(), second.into()],
            right: false,
        }
    }
    pub fn right(head: &str, second: &str) -> Column {
        Column {
            head: [head.into(), second.into()],
            right: true,
        }
    }
}

const INDENT: &str = "  ";
const GAP: &str = "  ";
/// The narrowest the first (label) column is squeezed to.
const MIN_LABEL: usize = 12;
/// The narrowest a wrapping last column is squeezed to.
const MIN_LAST: usize = 16;

/// Rows of cells as an aligned table within [`WIDTH`]: when too wide, the
/// first column (the configuration label) is cut with `…`, then the last
/// column, when `wrap_last`, wraps onto further lines. A rule under the
/// heading; no separators between columns other than spaces.
pub fn compact_table(cols: &[Column], rows: &[Vec<String>], wrap_last: bool) -> String {
    let n = cols.len();
    if n == 0 {
        return String::new();
    }
    let mut w: Vec<usize> = cols
        .iter()
        .map(|c| width(&c.head[0]).max(width(&c.head[1])))
        .collect();
    for r in rows {
        for (i, cell) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(width(cell));
        }
    }
    let total = |w: &[usize]| width(INDENT) + w.iter().sum::<usize>() + width(GAP) * (n - 1);
    if total(&w) > WIDTH {
        let excess = total(&w) - WIDTH;
        w[0] = w[0].saturating_sub(excess).max(MIN_LABEL.min(w[0]));
    }
    if wrap_last && n > 1 && total(&w) > WIDTH {
        let excess = total(&w) - WIDTH;
        w[n - 1] = w[n - 1].saturating_sub(excess).max(MIN_LAST.min(w[n - 1]));
    }
    let line = |cells: &[String]| {
        let mut s = INDENT.to_string();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str(GAP);
            }
            let pad = " ".repeat(w[i].saturating_sub(width(c)));
            if cols[i].right {
                s.push_str(&pad);
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&pad);
            }
        }
        // Last resort: nothing printed by default passes the width.
        fit(s.trim_end(), WIDTH) + "\n"
    };
    let mut out = String::new();
    for h in 0..2 {
        let head: Vec<String> = cols
            .iter()
            .enumerate()
            .map(|(i, c)| fit(&c.head[h], w[i]))
            .collect();
        if h == 0 || head.iter().any(|c| !c.is_empty()) {
            out.push_str(&line(&head));
        }
    }
    out.push_str(&fit(
        &format!("{INDENT}{}", "-".repeat(total(&w) - width(INDENT))),
        WIDTH,
    ));
    out.push('\n');
    for r in rows {
        let mut cells: Vec<String> = (0..n)
            .map(|i| r.get(i).cloned().unwrap_or_default())
            .collect();
        cells[0] = fit(&cells[0], w[0]);
        let mut more = Vec::new();
        if wrap_last && n > 1 {
            let mut parts = wrap_lines(&cells[n - 1], "", "", w[n - 1]).into_iter();
            cells[n - 1] = parts.next().unwrap_or_default();
            more = parts.collect();
        }
        for i in 1..n {
            if !(wrap_last && i == n - 1) {
                cells[i] = fit(&cells[i], w[i]);
            }
        }
        out.push_str(&line(&cells));
        for m in more {
            let mut blank = vec![String::new(); n];
            blank[n - 1] = m;
            out.push_str(&line(&blank));
        }
    }
    out
}

/// `whole-run`, `diagnostic`: a timing mode in a column heading.
pub(super) fn short_mode(mode: &TimingMode) -> &str {
    match mode {
        TimingMode::WholeRun => "whole-run",
        TimingMode::Diagnostic => "diagnostic",
        TimingMode::Unknown(name) => name.as_str(),
    }
}

/// `whole-run, steady`, `diagnostic, cold`, `memory, steady`.
pub(super) fn mode_and_phase(key: &MetricKey) -> String {
    let mode = if key.metric.is_memory() {
        "memory"
    } else {
        short_mode(&key.mode)
    };
    format!("{mode}, {}", key.phase.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_counts_characters_not_bytes() {
        assert_eq!(fit("µs–µs", 5), "µs–µs");
        assert_eq!(fit("8192 KiB, pageable", 10), "8192 KiB,…");
        assert_eq!(width(&fit("ééééééé", 4)), 4);
    }

    #[test]
    fn wrap_keeps_lines_within_the_width() {
        let text = "Sweet spot: batch_size 256 reaches 97% of the best whole-run throughput (batch_size 1024) with 12.0 MiB peak allocated instead of 40.0 MiB.";
        let lines = wrap_lines(text, "  ", "    ", 40);
        assert!(lines.len() > 2, "{lines:?}");
        assert!(lines.iter().all(|l| width(l) <= 40), "{lines:?}");
        assert!(lines[0].starts_with("  Sweet") && lines[1].starts_with("    "));
        assert_eq!(
            lines.join(" ").split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        let long = "x".repeat(95);
        let lines = wrap_lines(&format!("a {long}"), "", "", 40);
        assert!(lines.iter().all(|l| width(l) <= 40), "{lines:?}");
        assert_eq!(lines.concat().len(), 96);
    }

    #[test]
    fn the_label_column_gives_way() {
        let cols = [
            Column::left("configuration", ""),
            Column::right("samples/s", "whole-run"),
        ];
        let label = "a very long configuration label ".repeat(5);
        let t = compact_table(&cols, &[vec![label.clone(), "12,345/s".into()]], false);
        assert!(t.lines().all(|l| width(l) <= WIDTH), "{t}");
        assert!(t.contains('…') && t.contains("12,345/s"), "{t}");
    }
}
