//! **Test-only.** The one procedural macro that `kernel-idpool` needs from
//! the kernel's `macros` crate: `#[kunit_tests(suite)]`.
//!
//! In the kernel it registers the `#[test]` functions of a module as a KUnit
//! suite. Here the module is compiled under `#[cfg(test)]` and its `#[test]`
//! functions are ordinary Rust tests, which the standard test harness runs
//! (a test returning `Result` fails on `Err`, as KUnit's does).

use proc_macro::{Delimiter, Group, Ident, Punct, Spacing, Span, TokenStream, TokenTree};

/// `#[kunit_tests(suite_name)] mod tests { ... }` becomes
/// `#[cfg(test)] mod tests { ... }`; the suite name is dropped.
///
/// # Panics
///
/// When the argument is not a single identifier (the suite name), as the
/// kernel's macro would refuse it too.
#[proc_macro_attribute]
pub fn kunit_tests(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args: Vec<TokenTree> = attr.into_iter().collect();
    assert!(
        matches!(args.as_slice(), [TokenTree::Ident(_)]),
        "kunit_tests takes the suite name, e.g. #[kunit_tests(rust_kernel_bitmap)]"
    );
    let cfg_test: TokenStream = [
        TokenTree::Ident(Ident::new("cfg", Span::call_site())),
        TokenTree::Group(Group::new(
            Delimiter::Parenthesis,
            TokenTree::Ident(Ident::new("test", Span::call_site())).into(),
        )),
    ]
    .into_iter()
    .collect();
    let mut out: TokenStream = [
        TokenTree::Punct(Punct::new('#', Spacing::Alone)),
        TokenTree::Group(Group::new(Delimiter::Bracket, cfg_test)),
    ]
    .into_iter()
    .collect();
    out.extend(item);
    out
}
