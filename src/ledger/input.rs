//! Opening a file ledger as teams export it: a path, a named pipe or `-` (standard input),
//! plain or compressed with gzip or zstd (recognised by their magic bytes, so a pipe from
//! `zcat`'s counterpart works as well as `events.csv.gz`). Everything is read once, as a
//! stream: a pipe cannot be read twice, and a compressed ledger is never unpacked whole.

use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// The path that means standard input.
pub const STDIN: &str = "-";

pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// How a source is named in messages and row locations.
pub fn display(path: &Path) -> String {
    if is_stdin(path) {
        "stdin".to_owned()
    } else {
        path.display().to_string()
    }
}

/// Compression of a stream, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn sniff(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// Buffer for sniffing and for the decompressors. Small on purpose: the parsers keep their
/// own large buffers, and `BufReader` hands reads at least this large straight through, so
/// a plain file is not copied twice.
const BUF: usize = 64 * 1024;

/// Opens `path` (or standard input for `-`) for one streaming read, decompressing gzip
/// and zstd. Named pipes and process substitutions (`<(…)`) are opened once and read once.
pub fn open(path: &Path) -> io::Result<Box<dyn Read + Send>> {
    let raw: Box<dyn Read + Send> = if is_stdin(path) {
        Box::new(io::stdin())
    } else {
        Box::new(std::fs::File::open(path)?)
    };
    let mut buf = BufReader::with_capacity(BUF, raw);
    let head = loop {
        match buf.fill_buf() {
            Ok(h) => break h,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    };
    Ok(match Compression::sniff(head) {
        Compression::None => Box::new(buf),
        // Multi-member: `cat a.gz b.gz` is one valid gzip stream.
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buf)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(buf)?),
    })
}

/// The file name without a compression suffix, lowercased: what tells its format.
pub fn format_name(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    for suffix in [".gz", ".zst", ".zstd"] {
        if let Some(stem) = lower.strip_suffix(suffix) {
            return stem.to_owned();
        }
    }
    lower
}
