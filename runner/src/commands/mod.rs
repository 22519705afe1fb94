//! One module per subcommand.
pub mod compare;
pub mod validate;
