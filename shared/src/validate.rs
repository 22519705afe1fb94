//! Validation of a decoded bundle.
use crate::Bundle;

#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

pub fn validate(_b: &Bundle) -> Vec<Problem> {
    Vec::new()
}
