// The npm package as a user gets it: packed by npm/pack.sh, installed from the two tarballs
// into an empty project with no network, run with npx, required, imported, type-checked.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { binary, npmDir, repoRoot, run, scratch, tools } from "./helpers.mjs";

const version = /^version = "(.*)"$/m.exec(fs.readFileSync(path.join(repoRoot, "Cargo.toml"), "utf8"))[1];
const env = { ...process.env };
delete env.BATCHGUARD_BINARY; // the installed package must find its own binary

let project;

test("pack.sh writes both tarballs to npm/dist", async () => {
  const packed = await run("bash", [path.join(npmDir, "pack.sh")], {
    env: { ...process.env, BATCHGUARD_PACK_BINARY: binary() },
  });
  assert.equal(packed.code, 0, packed.stderr);
  for (const name of [`batchguard-${version}.tgz`, `batchguard-linux-x64-gnu-${version}.tgz`]) {
    assert.ok(fs.existsSync(path.join(npmDir, "dist", name)), `${name} in npm/dist`);
  }
  const listing = await run("tar", ["tzf", path.join(npmDir, "dist", `batchguard-linux-x64-gnu-${version}.tgz`)]);
  assert.match(listing.stdout, /^package\/bin\/batchguard$/m);
  const js = await run("tar", ["xzOf", path.join(npmDir, "dist", `batchguard-${version}.tgz`), "package/package.json"]);
  const manifest = JSON.parse(js.stdout);
  assert.equal(manifest.scripts, undefined, "no install script");
  assert.deepEqual(manifest.optionalDependencies, { "@batchguard/linux-x64-gnu": version });
});

test("installed from the tarballs into an empty project with no network", async () => {
  project = scratch("install");
  fs.writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", private: true }));
  const cache = scratch("cache"); // an empty cache: nothing can come from an earlier install
  const installed = await run(
    "npm",
    ["install", "--offline", "--no-audit", "--no-fund", `--cache=${cache}`, "--registry=http://127.0.0.1:9/",
      path.join(npmDir, "dist", `batchguard-${version}.tgz`),
      path.join(npmDir, "dist", `batchguard-linux-x64-gnu-${version}.tgz`)],
    { cwd: project, env },
  );
  assert.equal(installed.code, 0, installed.stderr);
  const bin = path.join(project, "node_modules", "@batchguard", "linux-x64-gnu", "bin", "batchguard");
  assert.ok(fs.statSync(bin).mode & 0o111, "the binary is executable");
});

test("npx batchguard runs the binary, its exit code passed through", async () => {
  const shown = await run("npx", ["--offline", "batchguard", "--version"], { cwd: project, env });
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, new RegExp(`batchguard ${version.replace(/\./g, "\\.")}`));
  const lint = await run("npx", ["--offline", "batchguard", "lint", "--manifest", "nope.yaml"], { cwd: project, env });
  const direct = await run(binary(), ["lint", "--manifest", "nope.yaml"], { cwd: project });
  assert.notEqual(direct.code, 0);
  assert.equal(lint.code, direct.code);
  assert.equal(lint.stderr, direct.stderr);
});

test("BATCHGUARD_BINARY overrides the platform package", async () => {
  const missing = await run("npx", ["--offline", "batchguard", "--version"], {
    cwd: project, env: { ...env, BATCHGUARD_BINARY: path.join(project, "no-such-binary") },
  });
  assert.equal(missing.code, 125);
  assert.match(missing.stderr, /BATCHGUARD_BINARY=.*no-such-binary: no such file/);
});

test("require and import give the same functions and find the installed binary", async () => {
  const cjs = await run("node", ["-e", `
    const b = require("batchguard");
    console.log(JSON.stringify({ guard: typeof b.guard, guarded: typeof b.guarded, coordinator: typeof b.runCoordinator, bin: b.binaryPath() }));
  `], { cwd: project, env });
  assert.equal(cjs.code, 0, cjs.stderr);
  const seen = JSON.parse(cjs.stdout);
  assert.deepEqual([seen.guard, seen.guarded, seen.coordinator], ["function", "function", "function"]);
  assert.equal(seen.bin, path.join(fs.realpathSync(project), "node_modules", "@batchguard", "linux-x64-gnu", "bin", "batchguard"));
  const esm = await run("node", ["--input-type=module", "-e", `
    import { guard, guarded, runCoordinator } from "batchguard";
    import batchguard from "batchguard";
    console.log(guard === batchguard.guard && typeof guarded === "function" && typeof runCoordinator === "function");
  `], { cwd: project, env });
  assert.equal(esm.code, 0, esm.stderr);
  assert.equal(esm.stdout.trim(), "true");
});

test("a project without the platform package gets E_BINARY, not a hang", async () => {
  const bare = scratch("bare");
  fs.mkdirSync(path.join(bare, "node_modules"));
  fs.cpSync(path.join(project, "node_modules", "batchguard"), path.join(bare, "node_modules", "batchguard"), { recursive: true });
  const tried = await run("node", ["-e", `
    require("batchguard").guard({ manifest: "m.yaml", job: "j" }, () => { console.log("ran"); })
      .then(() => console.log("resolved"), (e) => console.log(e.code + " " + e.message));
  `], { cwd: bare, env });
  assert.equal(tried.code, 0, tried.stderr);
  assert.match(tried.stdout, /^E_BINARY the batchguard binary for linux-x64-glibc is missing: the optional dependency @batchguard\/linux-x64-gnu was not installed/);
});

test("the types compile (tsc --noEmit, TypeScript from npm)", async () => {
  const dir = tools();
  fs.writeFileSync(path.join(project, "sample.ts"), `
import { guard, guarded, runCoordinator, type GuardResult, type Run } from "batchguard";

async function main(): Promise<void> {
  const result: GuardResult = await guard(
    { manifest: "billing.batchguard.yaml", job: "settle-payments", store: process.env.BATCHGUARD_STORE, scheduledAt: new Date() },
    async (run: Run) => {
      const fence: bigint = run.fence;
      const slot: Date = run.slot;
      run.signal.throwIfAborted();
      await run.output(\`invoice-\${fence}-\${slot.toISOString()}\`);
      const tx = { query: async (_text: string, _values: unknown[]) => ({ rows: [] }) };
      const first: boolean = await run.claim("invoice-1", tx);
      const again: boolean = await run.claim("invoice-2");
      console.log(first, again);
    },
  );
  if (result.status === "skipped") console.log(result.reason);
  if (result.status === "failed") console.log(result.error?.code);
  const tick = guarded({ manifest: "m.yaml", job: "j" }, async (run, ctx: { date: Date }) => run.attempt + ctx.date.getTime());
  const r: GuardResult = await tick({ date: new Date() });
  const coordinator = runCoordinator({ store: "sqlite:s.db", manifest: "m.yaml", job: (name) => name });
  const ok: boolean = await coordinator.shouldRun("j:2026-03-01T02:00:00.000Z", 30000);
  console.log(r.fence, ok);
}
void main();
`);
  fs.writeFileSync(path.join(project, "tsconfig.json"), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022",
      typeRoots: [path.join(dir, "node_modules", "@types")], types: ["node"] },
    files: ["sample.ts"],
  }));
  const checked = await run(path.join(dir, "node_modules", ".bin", "tsc"), ["-p", "tsconfig.json"], { cwd: project });
  assert.equal(checked.code, 0, checked.stdout + checked.stderr);
  // and a type error is one: the check is not vacuous
  fs.writeFileSync(path.join(project, "bad.ts"), `import { guard } from "batchguard";\nconst n: number = guard;\n`);
  const bad = await run(path.join(dir, "node_modules", ".bin", "tsc"), ["--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "bad.ts"], { cwd: project });
  assert.notEqual(bad.code, 0);
  assert.match(bad.stdout, /TS2322/);
});
