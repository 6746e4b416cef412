"use strict";
// Finds the batchguard binary: BATCHGUARD_BINARY, else the platform package named in
// platforms.json for this os, cpu and libc (installed by npm as an optional dependency, as
// esbuild and biome ship theirs: no install script, no download).

const path = require("node:path");
const fs = require("node:fs");
const platforms = require("../platforms.json");

/** glibc or musl on Linux (the libc a Rust target links), null elsewhere. */
function libc() {
  if (process.platform !== "linux") return null;
  try {
    const report = process.report && process.report.getReport();
    const header = report && (typeof report === "string" ? JSON.parse(report) : report).header;
    return header && header.glibcVersionRuntime ? "glibc" : "musl";
  } catch {
    return "glibc";
  }
}

/** The platforms.json entry for this machine, or null. */
function currentPlatform() {
  const want = libc();
  for (const [name, entry] of Object.entries(platforms)) {
    if (entry.os !== process.platform || entry.cpu !== process.arch) continue;
    if (entry.libc && want && entry.libc !== want) continue;
    return { name, ...entry };
  }
  return null;
}

function binaryError(message) {
  const err = new Error(message);
  err.code = "E_BINARY";
  return err;
}

/**
 * The path of the binary to run. Throws an Error with code E_BINARY when there is none:
 * the message says which package was expected and how to override it.
 */
function binaryPath() {
  const override = process.env.BATCHGUARD_BINARY;
  if (override) {
    if (!fs.existsSync(override)) {
      throw binaryError(`BATCHGUARD_BINARY=${override}: no such file`);
    }
    return override;
  }
  const platform = currentPlatform();
  const here = `${process.platform}-${process.arch}${libc() ? `-${libc()}` : ""}`;
  if (!platform) {
    const known = Object.keys(platforms).join(", ");
    throw binaryError(
      `batchguard has no binary for ${here} (packages exist for: ${known}); ` +
        "build it with `cargo install --path .` and set BATCHGUARD_BINARY to its path",
    );
  }
  try {
    const manifest = require.resolve(`${platform.package}/package.json`);
    const bin = path.join(path.dirname(manifest), "bin", platform.binary);
    if (fs.existsSync(bin)) return bin;
    throw binaryError(`${platform.package} is installed but has no bin/${platform.binary}`);
  } catch (err) {
    if (err.code === "E_BINARY") throw err;
    throw binaryError(
      `the batchguard binary for ${here} is missing: the optional dependency ` +
        `${platform.package} was not installed (was npm run with --no-optional or ` +
        "--omit=optional?); reinstall, or set BATCHGUARD_BINARY to the binary's path",
    );
  }
}

module.exports = { binaryPath, currentPlatform, platforms };
