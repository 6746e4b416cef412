//! OpenTelemetry from `run` (docs/opentelemetry.md): one span per attempt (and per skip),
//! exported once at exit over OTLP/HTTP, configured by the standard `OTEL_*` variables
//! and off when no endpoint is set.
//!
//! The protobuf is written by hand: an export is six small messages (request, resource
//! spans, resource, scope spans, span, key-value) of which `run` fills a handful of
//! fields, and the generated types of `opentelemetry-proto` would bring prost and every
//! signal's messages into a binary whose `run -- true` path is latency-critical. The
//! field numbers are those of `opentelemetry/proto/trace/v1/trace.proto` and
//! `common/v1/common.proto`; tests/run_otel.rs decodes what is sent with prost.

use super::http::Request;
use std::time::Duration;

/// Where and how spans are exported, from the environment.
pub struct Config {
    pub endpoint: String,
    pub json: bool,
    pub headers: Vec<(String, String)>,
    pub resource: Vec<(String, String)>,
    pub timeout: Duration,
}

/// The caller's span, from its `TRACEPARENT` (W3C Trace Context).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
}

/// An attribute value.
pub enum Val {
    Str(String),
    Int(i64),
}

/// One finished span.
pub struct Span {
    pub span_id: [u8; 8],
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Vec<(&'static str, Val)>,
    /// The error's description: status ERROR.
    pub error: Option<String>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The exporter the environment asks for, or `None` (no endpoint, `OTEL_SDK_DISABLED`,
/// `OTEL_TRACES_EXPORTER=none`). `Err` says why a configuration cannot be used.
/// Only two variables are read when tracing is off.
pub fn from_env(service: &str) -> Result<Option<Config>, String> {
    let endpoint = match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        Some(e) => e.trim().to_owned(),
        None => match var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            Some(base) => format!("{}/v1/traces", base.trim().trim_end_matches('/')),
            None => return Ok(None),
        },
    };
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    if var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none")) {
        return Ok(None);
    }
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(format!(
            "the OTLP endpoint `{}` is not an http(s) URL",
            crate::manifest::model::mask_url(&endpoint)
        ));
    }
    let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|| "http/protobuf".into());
    let json = match protocol.trim() {
        "http/protobuf" => false,
        "http/json" => true,
        other => {
            return Err(format!(
                "OTLP protocol `{other}` is not supported: use http/protobuf (the default) or http/json"
            ));
        }
    };
    let mut headers = Vec::new();
    for v in [
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    ] {
        for (k, val) in pairs(&var(v).unwrap_or_default()) {
            headers.retain(|(h, _): &(String, String)| !h.eq_ignore_ascii_case(&k));
            headers.push((k, val));
        }
    }
    let mut resource = pairs(&var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default());
    let name = var("OTEL_SERVICE_NAME")
        .map(|s| s.trim().to_owned())
        .or_else(|| {
            resource
                .iter()
                .find(|(k, _)| k == "service.name")
                .map(|(_, v)| v.clone())
        })
        .unwrap_or_else(|| service.to_owned());
    resource.retain(|(k, _)| k != "service.name");
    resource.insert(0, ("service.name".into(), name));
    let timeout = var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
        .or_else(|| var("OTEL_EXPORTER_OTLP_TIMEOUT"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(2), Duration::from_millis);
    Ok(Some(Config {
        endpoint,
        json,
        headers,
        resource,
        timeout,
    }))
}

/// `key=value,key2=value2` with percent-encoded values (the OTel environment format).
fn pairs(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter_map(|p| {
            let (k, v) = p.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (decode(k), decode(v.trim())))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (hexval(b.get(i + 1)), hexval(b.get(i + 2)))
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hexval(b: Option<&u8>) -> Option<u8> {
    (*b? as char).to_digit(16).map(|d| d as u8)
}

/// The caller's `TRACEPARENT`, when it is a valid version-00 header with non-zero ids.
pub fn parent_from_env() -> Option<Parent> {
    parse_traceparent(&std::env::var("TRACEPARENT").ok()?)
}

pub fn parse_traceparent(s: &str) -> Option<Parent> {
    let parts: Vec<&str> = s.trim().split('-').collect();
    let [version, trace, span, flags] = parts[..] else {
        return None;
    };
    if version.len() != 2 || version == "ff" || trace.len() != 32 || span.len() != 16 {
        return None;
    }
    let mut p = Parent {
        trace_id: [0; 16],
        span_id: [0; 8],
        flags: u8::from_str_radix(flags, 16).ok()?,
    };
    unhex(trace, &mut p.trace_id)?;
    unhex(span, &mut p.span_id)?;
    if p.trace_id == [0; 16] || p.span_id == [0; 8] || flags.len() != 2 {
        return None;
    }
    Some(p)
}

fn unhex(s: &str, out: &mut [u8]) -> Option<()> {
    if !s
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(())
}

/// The export request of `spans`, all in the trace `trace_id`, children of `parent`.
pub fn export(
    cfg: &Config,
    trace_id: &[u8; 16],
    parent: Option<&Parent>,
    spans: &[Span],
) -> Request {
    let body = if cfg.json {
        json(cfg, trace_id, parent, spans).into_bytes()
    } else {
        protobuf(cfg, trace_id, parent, spans)
    };
    let mut headers = vec![(
        "Content-Type".to_owned(),
        if cfg.json {
            "application/json"
        } else {
            "application/x-protobuf"
        }
        .to_owned(),
    )];
    headers.extend(cfg.headers.iter().cloned());
    Request {
        what: format!("OTLP export of {} span(s)", spans.len()),
        post: true,
        url: cfg.endpoint.clone(),
        headers,
        body,
    }
}

const SCOPE: &str = "batchguard";

/// `Span.flags`: the W3C trace flags (sampled when there is no caller), bit 8 (whether
/// the parent is remote is known) and bit 9 (it is: the caller's `TRACEPARENT`).
fn span_flags(parent: Option<&Parent>) -> u32 {
    match parent {
        Some(p) => 0x300 | u32::from(p.flags),
        None => 0x100 | 1,
    }
}

fn json(cfg: &Config, trace_id: &[u8; 16], parent: Option<&Parent>, spans: &[Span]) -> String {
    use serde_json::json;
    let kv = |k: &str, v: &Val| match v {
        Val::Str(s) => json!({ "key": k, "value": { "stringValue": s } }),
        // OTLP/JSON writes 64-bit integers as strings.
        Val::Int(i) => json!({ "key": k, "value": { "intValue": i.to_string() } }),
    };
    let spans: Vec<_> = spans
        .iter()
        .map(|s| {
            let mut v = json!({
                "traceId": super::hex(trace_id),
                "spanId": super::hex(&s.span_id),
                "name": s.name,
                "kind": 1,
                "startTimeUnixNano": s.start_ns.to_string(),
                "endTimeUnixNano": s.end_ns.to_string(),
                "attributes": s.attributes.iter().map(|(k, v)| kv(k, v)).collect::<Vec<_>>(),
                "status": match &s.error {
                    Some(m) => json!({ "code": 2, "message": m }),
                    None => json!({ "code": 0 }),
                },
            });
            if let Some(p) = parent {
                v["parentSpanId"] = json!(super::hex(&p.span_id));
            }
            v["flags"] = json!(span_flags(parent));
            v
        })
        .collect();
    let resource: Vec<_> = cfg
        .resource
        .iter()
        .map(|(k, v)| kv(k, &Val::Str(v.clone())))
        .collect();
    json!({
        "resourceSpans": [{
            "resource": { "attributes": resource },
            "scopeSpans": [{
                "scope": { "name": SCOPE, "version": env!("CARGO_PKG_VERSION") },
                "spans": spans,
            }],
        }],
    })
    .to_string()
}

/// Protobuf wire format: the few encoders an OTLP export needs.
mod pb {
    pub fn varint(buf: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        buf.push(v as u8);
    }
    fn key(buf: &mut Vec<u8>, field: u32, wire: u8) {
        varint(buf, (u64::from(field) << 3) | u64::from(wire));
    }
    pub fn bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
        key(buf, field, 2);
        varint(buf, b.len() as u64);
        buf.extend_from_slice(b);
    }
    pub fn string(buf: &mut Vec<u8>, field: u32, s: &str) {
        bytes(buf, field, s.as_bytes());
    }
    pub fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
        key(buf, field, 0);
        varint(buf, v);
    }
    pub fn fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
        key(buf, field, 1);
        buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn fixed32(buf: &mut Vec<u8>, field: u32, v: u32) {
        key(buf, field, 5);
        buf.extend_from_slice(&v.to_le_bytes());
    }
    /// An embedded message, written by `f`.
    pub fn message(buf: &mut Vec<u8>, field: u32, f: impl FnOnce(&mut Vec<u8>)) {
        let mut inner = Vec::new();
        f(&mut inner);
        bytes(buf, field, &inner);
    }
}

/// `KeyValue { key = 1; AnyValue value = 2 }`, `AnyValue { string_value = 1; int_value = 3 }`.
fn key_value(buf: &mut Vec<u8>, field: u32, k: &str, v: &Val) {
    pb::message(buf, field, |kv| {
        pb::string(kv, 1, k);
        pb::message(kv, 2, |any| match v {
            Val::Str(s) => pb::string(any, 1, s),
            Val::Int(i) => pb::uint(any, 3, *i as u64),
        });
    });
}

/// `ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1 }` and below.
fn protobuf(cfg: &Config, trace_id: &[u8; 16], parent: Option<&Parent>, spans: &[Span]) -> Vec<u8> {
    let mut req = Vec::new();
    pb::message(&mut req, 1, |rs| {
        // ResourceSpans.resource = 1: Resource { repeated KeyValue attributes = 1 }
        pb::message(rs, 1, |r| {
            for (k, v) in &cfg.resource {
                key_value(r, 1, k, &Val::Str(v.clone()));
            }
        });
        // ResourceSpans.scope_spans = 2
        pb::message(rs, 2, |ss| {
            // ScopeSpans.scope = 1: InstrumentationScope { name = 1; version = 2 }
            pb::message(ss, 1, |sc| {
                pb::string(sc, 1, SCOPE);
                pb::string(sc, 2, env!("CARGO_PKG_VERSION"));
            });
            for s in spans {
                // ScopeSpans.spans = 2: Span
                pb::message(ss, 2, |sp| {
                    pb::bytes(sp, 1, trace_id);
                    pb::bytes(sp, 2, &s.span_id);
                    if let Some(p) = parent {
                        pb::bytes(sp, 4, &p.span_id);
                    }
                    pb::string(sp, 5, &s.name);
                    pb::uint(sp, 6, 1); // SPAN_KIND_INTERNAL
                    pb::fixed64(sp, 7, s.start_ns);
                    pb::fixed64(sp, 8, s.end_ns);
                    for (k, v) in &s.attributes {
                        key_value(sp, 9, k, v);
                    }
                    // Status { message = 2; code = 3 } (1 OK-unset… 2 ERROR)
                    pb::message(sp, 15, |st| {
                        if let Some(m) = &s.error {
                            pb::string(st, 2, m);
                            pb::uint(st, 3, 2);
                        }
                    });
                    pb::fixed32(sp, 16, span_flags(parent));
                });
            }
        });
    });
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_version_00_with_non_zero_ids() {
        let p = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .expect("valid");
        assert_eq!(p.flags, 1);
        assert_eq!(p.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "garbage",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn otel_pairs_are_trimmed_and_percent_decoded() {
        assert_eq!(
            pairs(" a = b%20c ,,=x, k=v%2Cw,bad%zz=1%"),
            [
                ("a".to_owned(), "b c".to_owned()),
                ("k".to_owned(), "v,w".to_owned()),
                ("bad%zz".to_owned(), "1%".to_owned()),
            ]
        );
    }

    #[test]
    fn varints_are_little_endian_groups_of_seven_bits() {
        let mut b = Vec::new();
        pb::varint(&mut b, 300);
        assert_eq!(b, [0xac, 0x02]);
    }
}
