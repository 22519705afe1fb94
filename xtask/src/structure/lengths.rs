//! Functions longer than a screen: every `fn` with a body (free, in an
//! `impl`, a trait's default), counted from its signature to its closing
//! brace, test code included.
use std::path::Path;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// The most lines a function may take.
pub(crate) const MAX_LINES: usize = 100;

/// `(name, first line, lines)` of each function in `file` longer than [`MAX_LINES`].
pub(crate) fn long_functions(file: &Path) -> anyhow::Result<Vec<(String, usize, usize)>> {
    let text = std::fs::read_to_string(file)?;
    let ast = syn::parse_file(&text)?;
    let mut v = Lengths::default();
    v.visit_file(&ast);
    Ok(v.long)
}

#[derive(Default)]
struct Lengths {
    long: Vec<(String, usize, usize)>,
}

impl Lengths {
    fn check(&mut self, name: String, sig: proc_macro2::Span, body: proc_macro2::Span) {
        let (start, end) = (sig.start().line, body.end().line);
        let lines = end.saturating_sub(start) + 1;
        if lines > MAX_LINES {
            self.long.push((name, start, lines));
        }
    }
}

impl<'ast> Visit<'ast> for Lengths {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.check(f.sig.ident.to_string(), f.sig.span(), f.block.span());
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.check(f.sig.ident.to_string(), f.sig.span(), f.block.span());
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.check(f.sig.ident.to_string(), f.sig.span(), body.span());
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}
