// The PostgreSQL side of the settle-pg examples, no npm dependencies: one `psql` process
// per job run, fed statements on stdin, each answer awaited before the next statement
// (a job that applies a payment and then reports it must know the write committed).
//
// The database is DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test). The
// schema is SETTLE_SCHEMA when set (one schema for every run: production), else the one
// `pg-state.js setup` made for the drill's sandbox and named in $BATCHGUARD_SANDBOX/pg-schema.
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const path = require("path");

const url = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";

function schemaFile() {
  const sandbox = process.env.BATCHGUARD_SANDBOX;
  return sandbox ? path.join(sandbox, "pg-schema") : null;
}

function schema() {
  if (process.env.SETTLE_SCHEMA) return process.env.SETTLE_SCHEMA;
  const file = schemaFile();
  if (!file) throw new Error("set SETTLE_SCHEMA (or run under a drill with replay.setup)");
  return fs.readFileSync(file, "utf8").trim();
}

// A SQL string literal.
function lit(s) {
  return "'" + String(s).replace(/'/g, "''") + "'";
}

// A schema or table name: only what pg-state.js makes (or a plain name) is accepted.
function ident(s) {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(s)) throw new Error(`not a plain SQL name: ${s}`);
  return s;
}

class Psql {
  constructor() {
    this.p = spawn("psql", [url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    this.buf = "";
    this.waiting = [];
    this.n = 0;
    this.p.stdout.setEncoding("utf8");
    this.p.stdout.on("data", (d) => {
      this.buf += d;
      this.pump();
    });
    this.p.on("exit", (code) => {
      this.exited = code;
      this.pump();
    });
    this.p.on("error", (e) => {
      this.exited = e.message;
      this.pump();
    });
  }

  // The rows of one statement (or several), each row's columns joined by `|`.
  query(sql) {
    const tag = `__settle_done_${++this.n}__`;
    this.p.stdin.write(`${sql};\n\\echo ${tag}\n`);
    return new Promise((resolve, reject) => {
      this.waiting.push({ tag, resolve, reject });
      this.pump();
    });
  }

  pump() {
    while (this.waiting.length) {
      const w = this.waiting[0];
      const at = this.buf.indexOf(w.tag + "\n");
      if (at < 0) {
        if (this.exited === undefined) return;
        this.waiting.shift();
        w.reject(new Error(`psql ended (${this.exited})`));
        continue;
      }
      const out = this.buf.slice(0, at);
      this.buf = this.buf.slice(at + w.tag.length + 1);
      this.waiting.shift();
      w.resolve(out.split("\n").filter((l) => l.length > 0));
    }
  }

  end() {
    this.p.stdin.end();
  }
}

// The snapshot's payments.
function payments(input) {
  return fs
    .readFileSync(input, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

function inputArg() {
  const i = process.argv.indexOf("--input");
  const input = (i > 0 && process.argv[i + 1]) || process.env.BATCHGUARD_SNAPSHOT;
  if (!input) {
    console.error(`usage: ${path.basename(process.argv[1])} --input SNAPSHOT.jsonl`);
    process.exit(2);
  }
  return input;
}

module.exports = { Psql, schema, schemaFile, lit, ident, payments, inputArg, url };
