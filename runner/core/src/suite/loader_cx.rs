//! One `[experiment.loader]` table being parsed ([`LoaderCx`]): where it
//! is and what applies to it. A leaf: the loader kinds (`loader`) and their
//! data (`source`) both read it, neither through the other.

use std::ops::Range;
use std::path::Path;

use super::located::Located;
use super::raw::RawLoader;
use toml::Spanned;

/// One loader table being parsed: the experiment's kind and place, the
/// suite's folder (a relative `python_path` is anchored there) and
/// whether `--quick` applies.
pub(super) struct LoaderCx<'a> {
    pub cx: &'a Located<'a>,
    /// `loader` or `stall`.
    pub kind: &'a str,
    pub index: usize,
    pub kind_span: Range<usize>,
    pub suite_dir: &'a Path,
    pub quick: bool,
}

impl LoaderCx<'_> {
    /// The key of one of this table's fields, `experiment[2].loader.workers`.
    pub(super) fn at(&self, key: &str) -> String {
        format!("experiment[{}].loader.{key}", self.index)
    }

    /// Where `source` is written, else the experiment's kind.
    pub(super) fn source_span(&self, raw: &RawLoader) -> Range<usize> {
        raw.source
            .as_ref()
            .map_or(self.kind_span.clone(), |s| s.span())
    }

    /// Where `v` is written, else `fallback`.
    pub(super) fn span_or<T>(v: &Option<Spanned<T>>, fallback: Range<usize>) -> Range<usize> {
        v.as_ref().map_or(fallback, |v| v.span())
    }
}
