//! Reading a ledger source only for the error it ends with: the rows are dropped.
#![allow(dead_code)]

use batchguard::{LedgerError, LedgerReadOptions, LedgerSource, read_events, read_outputs};

/// The source error that reading `src`'s events ends with; panics when it reads.
pub fn events_error(src: &LedgerSource) -> LedgerError {
    read_events(src, &LedgerReadOptions::default(), &mut |_| {}, &mut |_| {})
        .expect_err("a source error")
}

/// The source error that reading `src`'s outputs ends with; panics when it reads.
pub fn outputs_error(src: &LedgerSource) -> LedgerError {
    read_outputs(src, &LedgerReadOptions::default(), &mut |_| {}, &mut |_| {})
        .expect_err("a source error")
}
