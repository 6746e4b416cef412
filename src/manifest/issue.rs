//! What reading a manifest or a registration source can find wrong, by kind. Readers
//! report kinds, not rule codes: lint maps each kind to its rule in one exhaustive
//! `match`, so a kind cannot be misspelt into a code no rule has.

/// The kind of a problem found while reading, before any rule runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Issue {
    /// Not YAML, not UTF-8, several documents, tabs in the indentation (BG001).
    YamlSyntax,
    /// A key the format does not have (BG002).
    UnknownField,
    /// A required key absent, or an empty file (BG003).
    MissingField,
    /// A value of the wrong type or out of range (BG004).
    InvalidValue,
    /// A key a mapping repeats (BG005).
    DuplicateKey,
    /// Over a size, depth or alias-expansion limit (BG006).
    InputLimit,
    /// A registration source that holds nothing readable as registrations (BG609).
    SourceNotRead,
    /// A crontab line that is not a crontab entry (BG610).
    CrontabFormat,
    /// A crontab line whose schedule its runner cannot read: 6 or 7 fields under cron
    /// (BG101).
    InvalidCron,
}
