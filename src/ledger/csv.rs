//! CSV ledgers: a header row names the columns (any order; extra columns ignored; required
//! ones missing from the header are a [`SourceError`] naming them). Empty fields of optional
//! columns are absent values. One [`csv::ByteRecord`] is reused for every row and fields are
//! borrowed from it, so the reader allocates only the strings an [`Event`](super::Event)
//! owns.

use super::read::{LedgerRow, MAX_COLUMNS, ReadOptions, missing_columns, row_error};
use super::{RowError, SourceError};
use std::io::Read;
use std::path::Path;

pub(crate) fn read<R: LedgerRow>(
    path: &Path,
    opts: &ReadOptions,
    on_row: &mut dyn FnMut(R),
    on_error: &mut dyn FnMut(RowError),
) -> Result<u64, SourceError> {
    read_fields::<R>(
        path,
        &mut |fields, name, line| {
            on_row(R::from_fields(fields, opts, name, line)?);
            Ok(())
        },
        on_error,
    )
}

/// The rows of a CSV file of `R`'s columns as text fields (`fields[i]` is the value of
/// `R::COLUMNS[i]`, `None` when absent or empty) with the source name and line; a row the
/// closure refuses goes to `on_error`.
#[allow(clippy::type_complexity)]
pub(crate) fn read_fields<R: LedgerRow>(
    path: &Path,
    on_fields: &mut dyn FnMut(&[Option<&str>], &str, u64) -> Result<(), RowError>,
    on_error: &mut dyn FnMut(RowError),
) -> Result<u64, SourceError> {
    let name = super::input::display(path);
    let io_err =
        |e: &dyn std::fmt::Display| SourceError(format!("cannot read ledger file {name}: {e}"));
    let mut file = super::input::open(path).map_err(|e| io_err(&e))?;
    // csv-core reports a record's line before it consumes the `\n` of the previous `\r\n`,
    // so CRLF files would be one line short: look at the first line and correct.
    let mut head = vec![0u8; 64 * 1024];
    let got = read_prefix(&mut file, &mut head).map_err(|e| io_err(&e))?;
    head.truncate(got);
    let crlf = u64::from(
        head.iter()
            .position(|&b| b == b'\n')
            .is_some_and(|i| i > 0 && head[i - 1] == b'\r'),
    );
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .buffer_capacity(1 << 20)
        .from_reader(std::io::Cursor::new(head).chain(file));
    let headers = rdr.byte_headers().map_err(|e| io_err(&e))?.clone();
    let mut index: [Option<usize>; MAX_COLUMNS] = [None; MAX_COLUMNS];
    for (j, h) in headers.iter().enumerate() {
        let h = std::str::from_utf8(h)
            .unwrap_or("")
            .trim_start_matches('\u{feff}')
            .trim();
        if let Some(i) = R::COLUMNS.iter().position(|c| *c == h)
            && index[i].is_none()
        {
            index[i] = Some(j);
        }
    }
    if let Some(e) = missing_columns::<R>(&index, &format!("the header of {name}")) {
        return Err(e);
    }
    let ncols = R::COLUMNS.len();
    let mut rec = csv::ByteRecord::new();
    let mut rows = 0u64;
    loop {
        match rdr.read_byte_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                if let csv::ErrorKind::Io(_) = e.kind() {
                    return Err(io_err(&e));
                }
                rows += 1;
                let line = e.position().map_or(0, |p| p.line() + crlf);
                on_error(row_error(&name, line, None, format!("malformed CSV: {e}")));
                continue;
            }
        }
        rows += 1;
        let line = rec.position().map_or(rows + 1, |p| p.line() + crlf);
        // A short record with a field holding a comma or a line break is an unclosed quote
        // (the field ran on over the row's other values): say so, rather than blaming the
        // columns it swallowed.
        if rec.len() < headers.len() && rec.iter().any(|f| f.contains(&b',') || f.contains(&b'\n'))
        {
            on_error(row_error(
                &name,
                line,
                None,
                "malformed CSV: a `\"` opens a quoted field that is never closed, so the rest of the row is read as one value".into(),
            ));
            continue;
        }
        let mut fields: [Option<&str>; MAX_COLUMNS] = [None; MAX_COLUMNS];
        let mut bad = None;
        // One UTF-8 check for the whole record; a field is then a checked sub-slice
        // (`str::get` refuses a range that is not on char boundaries: that field is checked
        // on its own below).
        let whole = std::str::from_utf8(rec.as_slice()).ok();
        for i in 0..ncols {
            let Some(j) = index[i] else { continue };
            if let (Some(w), Some(r)) = (whole, rec.range(j))
                && let Some(f) = w.get(r)
            {
                fields[i] = (!f.is_empty()).then_some(f);
                continue;
            }
            match rec.get(j) {
                None | Some(b"") => {}
                Some(b) => match std::str::from_utf8(b) {
                    Ok(s) => fields[i] = Some(s),
                    Err(_) => {
                        bad = Some(row_error(
                            &name,
                            line,
                            Some(R::COLUMNS[i]),
                            "not valid UTF-8".into(),
                        ));
                        break;
                    }
                },
            }
        }
        if let Some(e) = bad {
            on_error(e);
            continue;
        }
        if let Err(e) = on_fields(&fields[..ncols], &name, line) {
            on_error(e);
        }
    }
    Ok(rows)
}

/// Fills `buf` as far as the file goes.
fn read_prefix(file: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
