//! OpenTelemetry from `batchguard run` (docs/opentelemetry.md): a local OTLP/HTTP receiver
//! decodes what `run` exports, protobuf with prost from the message definitions of
//! `opentelemetry/proto/trace/v1/trace.proto` (only the fields checked here), and JSON.

mod common;
#[path = "common/recorder.rs"]
mod recorder;

use common::{bin, sh};
use recorder::{Answer, Recorder, Req};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const SLOT: &str = "2026-03-01T02:00:00Z";
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportTraceServiceRequest {
        #[prost(message, repeated, tag = "1")]
        pub resource_spans: Vec<ResourceSpans>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceSpans {
        #[prost(message, optional, tag = "1")]
        pub resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        pub scope_spans: Vec<ScopeSpans>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        #[prost(message, repeated, tag = "1")]
        pub attributes: Vec<KeyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ScopeSpans {
        #[prost(message, optional, tag = "1")]
        pub scope: Option<Scope>,
        #[prost(message, repeated, tag = "2")]
        pub spans: Vec<Span>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Scope {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Span {
        #[prost(bytes = "vec", tag = "1")]
        pub trace_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub span_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "4")]
        pub parent_span_id: Vec<u8>,
        #[prost(string, tag = "5")]
        pub name: String,
        #[prost(int32, tag = "6")]
        pub kind: i32,
        #[prost(fixed64, tag = "7")]
        pub start_time_unix_nano: u64,
        #[prost(fixed64, tag = "8")]
        pub end_time_unix_nano: u64,
        #[prost(message, repeated, tag = "9")]
        pub attributes: Vec<KeyValue>,
        #[prost(message, optional, tag = "15")]
        pub status: Option<Status>,
        #[prost(fixed32, tag = "16")]
        pub flags: u32,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Status {
        #[prost(string, tag = "2")]
        pub message: String,
        #[prost(int32, tag = "3")]
        pub code: i32,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyValue {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<AnyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AnyValue {
        #[prost(oneof = "Value", tags = "1, 2, 3, 4")]
        pub value: Option<Value>,
    }
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(string, tag = "1")]
        Str(String),
        #[prost(bool, tag = "2")]
        Bool(bool),
        #[prost(int64, tag = "3")]
        Int(i64),
        #[prost(double, tag = "4")]
        Double(f64),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// An attribute as text (`"j"`, `2`), or `None`.
fn attr(attrs: &[proto::KeyValue], key: &str) -> Option<String> {
    let v = attrs
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?;
    Some(match v {
        proto::Value::Str(s) => s.clone(),
        proto::Value::Int(i) => i.to_string(),
        proto::Value::Bool(b) => b.to_string(),
        proto::Value::Double(d) => d.to_string(),
    })
}

struct Case {
    dir: tempfile::TempDir,
}

const OTEL_VARS: &[&str] = &[
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "TRACEPARENT",
];

impl Case {
    fn new(retry: &str, command: &str) -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!(
            "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {command}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 10s\n    retry:\n{retry}"
        );
        std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
        Case { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn run(&self, env: &[(&str, &str)]) -> Output {
        let mut c = Command::new(bin());
        c.current_dir(self.dir.path())
            .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
            .args(["--instance", "t1", "--scheduled-at", SLOT])
            .stdin(Stdio::null());
        for v in OTEL_VARS {
            c.env_remove(v);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("run")
    }

    /// The TRACEPARENT each attempt of the command saw, one a line.
    fn seen(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("tp.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn decode(r: &Req) -> proto::ExportTraceServiceRequest {
    prost::Message::decode(&r.body[..]).expect("an ExportTraceServiceRequest")
}

#[test]
fn each_attempt_is_a_protobuf_span_under_the_callers_trace() {
    let rx = Recorder::start(Answer::Status(200));
    let retry = "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 0s\n      on_unknown: dead_letter\n";
    let c = Case::new(
        retry,
        &sh(
            "echo \"$TRACEPARENT\" >> tp.txt; if [ -e once ]; then exit 0; fi; touch once; echo slow >&2; exit 75",
        ),
    );
    let caller = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let o = c.run(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &format!("{}/", rx.base)),
        ("OTEL_SERVICE_NAME", "billing"),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=prod,team=a%2Cb",
        ),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20tok"),
        ("TRACEPARENT", &caller),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 1, "one export at exit: {reqs:?}");
    let r = &reqs[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/traces"));
    assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
    assert_eq!(r.header("authorization"), Some("Bearer tok"));
    let req = decode(r);
    assert_eq!(req.resource_spans.len(), 1);
    let rs = &req.resource_spans[0];
    let res = &rs.resource.as_ref().expect("resource").attributes;
    assert_eq!(attr(res, "service.name").as_deref(), Some("billing"));
    assert_eq!(attr(res, "deployment.environment").as_deref(), Some("prod"));
    assert_eq!(attr(res, "team").as_deref(), Some("a,b"));
    let ss = &rs.scope_spans[0];
    assert_eq!(
        ss.scope.as_ref().map(|s| s.name.as_str()),
        Some("batchguard")
    );
    let spans = &ss.spans;
    assert_eq!(spans.len(), 2, "{spans:?}");
    let seen = c.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (i, s) in spans.iter().enumerate() {
        assert_eq!(hex(&s.trace_id), CALLER_TRACE, "the caller's trace");
        assert_eq!(
            hex(&s.parent_span_id),
            CALLER_SPAN,
            "the caller's span is the parent"
        );
        assert_eq!(s.name, "run j");
        assert!(s.end_time_unix_nano >= s.start_time_unix_nano && s.start_time_unix_nano > 0);
        assert_eq!(
            s.flags & 0x3ff,
            0x301,
            "sampled, remote parent: {:x}",
            s.flags
        );
        let a = &s.attributes;
        assert_eq!(attr(a, "batchguard.job").as_deref(), Some("j"));
        assert_eq!(attr(a, "batchguard.slot").as_deref(), Some(SLOT));
        assert_eq!(attr(a, "batchguard.attempt"), Some((i + 1).to_string()));
        assert_eq!(attr(a, "batchguard.fence"), Some((i + 1).to_string()));
        assert_eq!(attr(a, "batchguard.instance").as_deref(), Some("t1"));
        // The command's TRACEPARENT: this span as its parent, in the same trace.
        assert_eq!(seen[i], format!("00-{CALLER_TRACE}-{}-01", hex(&s.span_id)));
    }
    let (a0, a1) = (&spans[0].attributes, &spans[1].attributes);
    assert_eq!(attr(a0, "batchguard.outcome").as_deref(), Some("failed"));
    assert_eq!(
        attr(a0, "batchguard.error_code").as_deref(),
        Some("EX_TEMPFAIL")
    );
    assert_eq!(attr(a0, "process.exit.code").as_deref(), Some("75"));
    assert_eq!(attr(a0, "batchguard.trigger").as_deref(), Some("schedule"));
    let st = spans[0].status.as_ref().expect("status");
    assert_eq!(st.code, 2, "STATUS_CODE_ERROR");
    assert!(st.message.contains("EX_TEMPFAIL: slow"), "{}", st.message);
    assert_eq!(attr(a1, "batchguard.outcome").as_deref(), Some("succeeded"));
    assert_eq!(attr(a1, "process.exit.code").as_deref(), Some("0"));
    assert_eq!(attr(a1, "batchguard.trigger").as_deref(), Some("retry"));
    assert_eq!(spans[1].status.as_ref().map_or(0, |s| s.code), 0);
}

#[test]
fn http_json_exports_to_the_traces_endpoint_and_a_skip_is_a_span() {
    let rx = Recorder::start(Answer::Status(200));
    let c = Case::new(
        "      max_attempts: 1\n",
        &sh("echo \"$TRACEPARENT\" >> tp.txt"),
    );
    let endpoint = format!("{}/custom/traces", rx.base);
    let env = [
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9/unused"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ];
    let o = c.run(&env);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = c.run(&env);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let body = |r: &Req| -> serde_json::Value {
        assert_eq!(r.path, "/custom/traces");
        assert_eq!(r.header("content-type"), Some("application/json"));
        serde_json::from_slice(&r.body).expect("json")
    };
    let first = body(&reqs[0]);
    let rs = &first["resourceSpans"][0];
    let svc = rs["resource"]["attributes"]
        .as_array()
        .expect("attributes")
        .iter()
        .find(|a| a["key"] == "service.name")
        .map(|a| a["value"]["stringValue"].clone());
    assert_eq!(
        svc,
        Some(serde_json::json!("svc")),
        "the manifest's service by default"
    );
    let span = &rs["scopeSpans"][0]["spans"][0];
    let trace = span["traceId"].as_str().expect("traceId");
    assert_eq!(trace.len(), 32, "hex, not base64: {trace}");
    assert!(
        span.get("parentSpanId").is_none(),
        "no caller, no parent: {span}"
    );
    let seen = c.seen();
    assert_eq!(
        seen,
        [format!(
            "00-{trace}-{}-01",
            span["spanId"].as_str().expect("spanId")
        )]
    );
    let attrs = |s: &serde_json::Value, k: &str| -> serde_json::Value {
        s["attributes"]
            .as_array()
            .expect("attributes")
            .iter()
            .find(|a| a["key"] == k)
            .map(|a| a["value"].clone())
            .unwrap_or_default()
    };
    assert_eq!(
        attrs(span, "batchguard.fence"),
        serde_json::json!({ "intValue": "1" })
    );
    assert_eq!(
        attrs(span, "batchguard.outcome")["stringValue"],
        "succeeded"
    );
    // The second tick: a skip, one span with the reason.
    let second = body(&reqs[1]);
    let skip = &second["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
    assert_eq!(attrs(skip, "batchguard.outcome")["stringValue"], "skipped");
    let reason = attrs(skip, "batchguard.skip_reason")["stringValue"].clone();
    assert!(
        reason
            .as_str()
            .unwrap_or("")
            .starts_with("already succeeded (run "),
        "{reason}"
    );
    assert_eq!(attrs(skip, "batchguard.slot")["stringValue"], SLOT);
    assert_eq!(seen.len(), 1, "the skipped tick ran no command");
}

#[test]
fn without_an_endpoint_or_when_disabled_nothing_is_sent_and_traceparent_passes_through() {
    let rx = Recorder::start(Answer::Status(200));
    let c = Case::new(
        "      max_attempts: 1\n",
        &sh("echo \"$TRACEPARENT\" >> tp.txt"),
    );
    let caller = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    // Only the caller's context (and other OTel variables) without an endpoint.
    let o = c.run(&[("TRACEPARENT", &caller), ("OTEL_SERVICE_NAME", "x")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // An endpoint, but the SDK disabled.
    std::fs::remove_dir_all(c.path(".batchguard")).expect("reset store");
    let o = c.run(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &rx.base),
        ("OTEL_SDK_DISABLED", "true"),
        ("TRACEPARENT", &caller),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(rx.requests().is_empty(), "{:?}", rx.requests());
    assert_eq!(
        c.seen(),
        [caller.clone(), caller],
        "the caller's context, untouched"
    );
}

#[test]
fn an_unusable_protocol_is_said_and_the_job_runs() {
    let rx = Recorder::start(Answer::Status(200));
    let c = Case::new("      max_attempts: 1\n", &sh("echo ran > ran.txt"));
    let o = c.run(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &rx.base),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("OTLP protocol `grpc` is not supported"),
        "{}",
        stderr(&o)
    );
    assert!(c.path("ran.txt").exists());
    assert!(rx.requests().is_empty());
}

#[test]
fn a_linked_guard_gets_the_attempts_traceparent_and_its_span_is_exported() {
    use std::io::{BufRead, BufReader, Write};
    let rx = Recorder::start(Answer::Status(200));
    let c = Case::new("      max_attempts: 1\n", "[\"unused\"]");
    let mut cmd = Command::new(bin());
    cmd.current_dir(c.dir.path())
        .args([
            "run",
            "--manifest",
            "m.batchguard.yaml",
            "--job",
            "j",
            "--link",
        ])
        .args(["--scheduled-at", SLOT])
        .env_remove("BATCHGUARD_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for v in OTEL_VARS {
        cmd.env_remove(v);
    }
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &rx.base);
    let mut child = cmd.spawn().expect("spawn");
    let mut to = child.stdin.take().expect("stdin");
    let mut from = BufReader::new(child.stdout.take().expect("stdout"));
    let mut next = |event: &str| -> serde_json::Value {
        loop {
            let mut line = String::new();
            assert!(
                from.read_line(&mut line).expect("read") > 0,
                "ended before {event}"
            );
            let v: serde_json::Value = serde_json::from_str(&line).expect("json line");
            if v["event"] == event {
                return v;
            }
        }
    };
    let acquired = next("acquired");
    writeln!(
        to,
        "{}",
        serde_json::json!({"op": "done", "status": "success"})
    )
    .expect("write");
    to.flush().expect("flush");
    assert_eq!(next("result")["status"], "succeeded");
    drop(to);
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    let span = decode(&reqs[0]).resource_spans[0].scope_spans[0].spans[0].clone();
    assert_eq!(
        acquired["traceparent"],
        format!("00-{}-{}-01", hex(&span.trace_id), hex(&span.span_id)).as_str(),
        "{acquired}"
    );
}
