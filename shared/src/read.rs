//! Reading a bundle from bytes with clear, located errors.
use crate::{Bundle, Problem};

/// The largest bundle accepted.
pub const MAX_BUNDLE_BYTES: usize = 40 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("invalid")]
    Invalid(Vec<Problem>),
}

pub fn parse_bundle(text: &[u8]) -> Result<Bundle, ReadError> {
    serde_json::from_slice(text).map_err(|e| ReadError::Invalid(vec![Problem { path: "$".into(), message: e.to_string() }]))
}
pub fn read_bundle(text: &[u8]) -> Result<Bundle, ReadError> {
    parse_bundle(text)
}
