//! One module per subcommand.
pub mod bare;
pub mod compare;
pub mod env;
pub mod job;
pub mod merge;
pub mod report;
pub mod run;
pub mod serve;
pub mod site;
pub mod trace;
pub mod validate;
