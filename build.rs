//! Links the `batchguard` executable as a position-dependent binary on x86-64 Linux.
//!
//! `batchguard run` sits on the latency path of every scheduler tick, and a PIE executable
//! of this size has some 31,000 relative relocations for the dynamic loader to apply (and
//! as many copy-on-write page faults) at each start: about 0.3 ms of a run's ~3 ms. The
//! heap, stack and shared libraries keep their address randomisation; only the
//! executable's own image loads at a fixed address. Test binaries are not affected.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os == "linux" && env == "gnu" && arch == "x86_64" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
