//! The open enums of the format: a value this build does not know is kept as
//! text (`Unknown`) and written back unchanged, so a bundle of a newer minor
//! is read and shown rather than refused. Whether such a value is acceptable
//! is the reader's decision, from the bundle's minor ([`crate::read`]).
//!
//! Each enum derives its known variants with `#[serde(remote = "Self")]`
//! (inherent `serialize`/`deserialize`), and the trait impls here fall back
//! to `Unknown` around them.

use serde::de::Error as _;
use serde::de::value::{Error as ValueError, StrDeserializer};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::format::{CrashCause, Engine, ExperimentKind, Failure, Resource, TimingMode};

/// The `kind`s of [`Failure`] this build knows.
pub const FAILURE_KINDS: &[&str] = &[
    "out_of_memory",
    "worker_error",
    "panic",
    "interrupted",
    "error",
    "comm_timeout",
    "would_not_fit",
    "crashed",
    "script",
];

/// A format enum that keeps values it does not know.
pub trait OpenEnum {
    /// The text of a value this build does not know, if this is one.
    fn unknown(&self) -> Option<&str>;
    /// For an unknown value: serde's message for it ("unknown variant `x`,
    /// expected ..."), as a bundle of this build's minor or older gets it.
    fn refusal(&self) -> Option<String>;
}

macro_rules! open_string_enum {
    ($($ty:ident),*) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $ty::Unknown(text) => s.serialize_str(text),
                    known => $ty::serialize(known, s),
                }
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok($ty::from_name(&String::deserialize(d)?))
            }
        }

        impl $ty {
            /// The value a name stands for: a known variant, else `Unknown`
            /// with the name.
            pub fn from_name(name: &str) -> Self {
                $ty::deserialize(StrDeserializer::<ValueError>::new(name))
                    .unwrap_or_else(|_| $ty::Unknown(name.to_string()))
            }
        }

        impl OpenEnum for $ty {
            fn unknown(&self) -> Option<&str> {
                match self {
                    $ty::Unknown(text) => Some(text),
                    _ => None,
                }
            }
            fn refusal(&self) -> Option<String> {
                let text = self.unknown()?;
                $ty::deserialize(StrDeserializer::<ValueError>::new(text))
                    .err()
                    .map(|e| e.to_string())
            }
        }
    )*};
}

open_string_enum!(ExperimentKind, TimingMode, Engine, Resource, CrashCause);

impl Serialize for Failure {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Failure::Unknown { kind, message } => {
                let mut st = s.serialize_struct("Failure", 1 + usize::from(message.is_some()))?;
                st.serialize_field("kind", kind)?;
                if let Some(m) = message {
                    st.serialize_field("message", m)?;
                }
                st.end()
            }
            known => Failure::serialize(known, s),
        }
    }
}

impl<'de> Deserialize<'de> for Failure {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        match value.get("kind").and_then(Value::as_str) {
            Some(kind) if !FAILURE_KINDS.contains(&kind) => Ok(Failure::Unknown {
                kind: kind.to_string(),
                message: value
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }),
            // A known kind, or no usable `kind`: the derived errors say what is wrong.
            _ => Failure::deserialize(value).map_err(D::Error::custom),
        }
    }
}

impl OpenEnum for Failure {
    fn unknown(&self) -> Option<&str> {
        match self {
            Failure::Unknown { kind, .. } => Some(kind),
            _ => None,
        }
    }
    fn refusal(&self) -> Option<String> {
        let kind = self.unknown()?;
        Failure::deserialize(serde_json::json!({ "kind": kind }))
            .err()
            .map(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_failure_kind_is_a_derived_variant() {
        for kind in FAILURE_KINDS {
            let err = Failure::deserialize(serde_json::json!({ "kind": kind }))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(!err.contains("unknown variant"), "{kind}: {err}");
        }
        let unknown = Failure::deserialize(serde_json::json!({ "kind": "cosmic_ray" }));
        assert!(unknown.unwrap_err().to_string().contains("unknown variant"));
    }

    #[test]
    fn unknown_values_round_trip_as_written() {
        let mode: TimingMode = serde_json::from_str("\"fast\"").unwrap();
        assert_eq!(mode, TimingMode::Unknown("fast".into()));
        assert_eq!(serde_json::to_string(&mode).unwrap(), "\"fast\"");
        assert_eq!(
            mode.refusal().unwrap(),
            "unknown variant `fast`, expected `whole_run` or `diagnostic`"
        );
        let known: Engine = serde_json::from_str("\"pytorch\"").unwrap();
        assert_eq!(known, Engine::Pytorch);
        assert_eq!(known.refusal(), None);
        assert_eq!(
            ExperimentKind::from_name("batch_sweep"),
            ExperimentKind::BatchSweep
        );

        let f: Failure =
            serde_json::from_str(r#"{"kind":"cosmic_ray","message":"a bit flipped","x":1}"#)
                .unwrap();
        assert_eq!(f.unknown(), Some("cosmic_ray"));
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"kind":"cosmic_ray","message":"a bit flipped"}"#
        );
        // A known kind with a broken body stays an error, not an unknown kind.
        let err = serde_json::from_str::<Failure>(r#"{"kind":"panic"}"#).unwrap_err();
        assert!(err.to_string().contains("missing field `message`"), "{err}");
    }
}
