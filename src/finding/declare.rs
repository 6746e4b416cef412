//! The macros that declare a rule or a check: the doc comment is its documentation
//! (`explain` prints it), the fields its identity.

/// Declares a lint rule's struct, its metadata (`META`) and its [`Declared`] impl; the
/// doc comment is the rule's documentation. `scope` is a [`Scope`] variant; `masks: true`
/// marks a rule whose findings point at secrets.
///
/// [`Declared`]: crate::finding::Declared
/// [`Scope`]: crate::finding::Scope
#[macro_export]
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])*
        pub struct $name:ident {
            code: $code:literal,
            name: $kebab:literal,
            severity: $sev:ident,
            scope: $scope:ident,
            $(masks: $masks:literal,)?
            summary: $summary:literal,
            help: $help:literal $(,)?
        }
    ) => {
        pub struct $name;
        impl $name {
            pub const META: $crate::finding::RuleMeta = $crate::finding::RuleMeta {
                code: $code,
                name: $kebab,
                severity: $crate::finding::Severity::$sev,
                scope: $crate::finding::Scope::$scope,
                masks: [$($masks,)? false][0],
                summary: $summary,
                help: $help,
                docs: concat!($($doc, "\n"),*),
            };
        }
        impl $crate::finding::Declared for $name {
            fn meta(&self) -> &'static $crate::finding::RuleMeta {
                &Self::META
            }
        }
    };
}

/// Declares an audit check's metadata as a `pub static` named by its code; the doc
/// comment is the check's documentation.
#[macro_export]
macro_rules! declare_check {
    (
        $(#[doc = $doc:literal])*
        $id:ident {
            code: $code:literal,
            name: $name:literal,
            severity: $sev:ident,
            summary: $summary:literal,
            help: $help:literal $(,)?
        }
    ) => {
        pub static $id: $crate::finding::RuleMeta = $crate::finding::RuleMeta {
            code: $code,
            name: $name,
            severity: $crate::finding::Severity::$sev,
            scope: $crate::finding::Scope::Ledger,
            masks: false,
            summary: $summary,
            help: $help,
            docs: concat!($($doc, "\n"),*),
        };
    };
}
