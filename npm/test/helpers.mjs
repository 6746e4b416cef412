// What the Node.js tests share: where the binary and the repository are, scratch folders,
// the tools from npm (npm ci of tools/package-lock.json), and a child process's output.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const testDir = path.dirname(fileURLToPath(import.meta.url));
export const npmDir = path.dirname(testDir);
export const repoRoot = path.dirname(npmDir);
export const packageDir = path.join(npmDir, "batchguard");

/** The binary under test: BATCHGUARD_BINARY, else the release build pack.sh made. */
export function binary() {
  const given = process.env.BATCHGUARD_BINARY;
  if (given) return given;
  const target = process.env.CARGO_TARGET_DIR || path.join(repoRoot, "target");
  const built = path.join(target, "release", "batchguard");
  if (!fs.existsSync(built)) {
    throw new Error(`${built} is missing: run npm/pack.sh first (or set BATCHGUARD_BINARY)`);
  }
  return built;
}

/** A fresh folder, removed when the process exits unless KEEP_SCRATCH is set. */
export function scratch(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bg-node-${prefix}-`));
  if (!process.env.KEEP_SCRATCH) {
    process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
  }
  return dir;
}

/** The tools folder with its node_modules (installed once from the committed lockfile). */
export function tools() {
  const dir = path.join(testDir, "tools");
  const stamp = path.join(dir, "node_modules", ".package-lock.json");
  if (!fs.existsSync(stamp)) {
    execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: dir, stdio: "inherit" });
  }
  return dir;
}

/** A unique name per test run (jobs, keys, schemas on the shared servers). */
export function unique(prefix) {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Runs a command to its end; resolves with { code, signal, stdout, stderr }. */
export function run(cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** Polls `probe` until it returns a truthy value (an observable fact), up to `limitMs`. */
export async function until(probe, limitMs, what) {
  const end = Date.now() + limitMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Is a TCP server listening? (the PostgreSQL and Redis tests skip without one, fail in CI) */
export async function reachable(host, port) {
  const net = await import("node:net");
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 1000 });
    socket.on("connect", () => { socket.destroy(); resolve(true); });
    socket.on("error", () => resolve(false));
    socket.on("timeout", () => { socket.destroy(); resolve(false); });
  });
}

/** The test's skip reason when a server is down, or throws under CI=true. */
export async function needServer(name, host, port) {
  if (await reachable(host, port)) return null;
  const message = `${name} is not reachable at ${host}:${port}`;
  if (process.env.CI === "true") throw new Error(message);
  return `${message}: skipped`;
}
