//! One module per subcommand.
pub mod bare;
pub mod compare;
pub mod env;
pub mod finish;
pub mod job;
pub mod merge;
pub mod output;
pub mod progress;
pub mod report;
pub mod run;
pub mod serve;
pub mod site;
pub mod trace;
pub mod validate;
