//! The viewer's components, one per file.

pub mod bundle_page;
pub mod chart_panel;
pub mod compare_view;
pub mod comparison_table;
pub mod config_options;
pub mod cost;
pub mod drop_zone;
pub mod environment;
pub mod experiment_page;
pub mod failures;
pub mod header;
pub mod how_to_read;
pub mod job;
pub mod job_answer;
pub mod library;
pub mod load_messages;
pub mod metric_glossary;
pub mod missing;
pub mod provenance;
pub mod rank_list;
pub mod ranks;
pub mod stragglers;
pub mod timelines;
pub mod your_job;
