//! How a report or a comparison is printed (`--format`, `--wide`), for the
//! commands that print one.

/// How a report or comparison is printed.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Output format: `table` fits 100 columns (verdicts and key figures);
    /// markdown, csv and json hold every column.
    #[arg(long, value_enum, default_value_t = TableFormat::Table)]
    pub format: TableFormat,
    /// The full table (every column, with min–max) as aligned text, however wide.
    #[arg(long, conflicts_with = "format")]
    pub wide: bool,
}

impl OutputArgs {
    pub fn style(&self) -> crate::report::Style {
        use crate::report::Style;
        match self.format {
            TableFormat::Table if self.wide => Style::Wide,
            TableFormat::Table => Style::Compact,
            TableFormat::Markdown => Style::Markdown,
            TableFormat::Csv => Style::Csv,
            TableFormat::Json => Style::Json,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    Table,
    Markdown,
    Csv,
    Json,
}
