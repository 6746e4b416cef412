// The database state of the settle-pg examples: `setup` makes an empty schema (tables
// `settled` and `fence`), `teardown` drops it, `list` prints the key of every settled
// payment, one per line (`replay.verify`).
//
// Under a drill, `setup` names a new schema for the sandbox and writes its name to
// $BATCHGUARD_SANDBOX/pg-schema, where the job, `list` and `teardown` read it: each
// sandbox starts from empty state and leaves nothing behind. With SETTLE_SCHEMA set, that
// one schema is used (created if missing; `teardown` drops it).
//
// Usage: node pg-state.js setup|teardown|list
"use strict";
const crypto = require("crypto");
const fs = require("fs");
const { Psql, schema, schemaFile, ident } = require("./pg.js");

async function main(action) {
  const db = new Psql();
  try {
    if (action === "setup") {
      let name = process.env.SETTLE_SCHEMA;
      if (!name) {
        name = "settle_" + crypto.randomBytes(8).toString("hex");
        fs.writeFileSync(schemaFile(), name + "\n");
      }
      const s = ident(name);
      await db.query(`CREATE SCHEMA IF NOT EXISTS ${s};
        CREATE TABLE IF NOT EXISTS ${s}.settled (
          payment_id text NOT NULL, amount bigint NOT NULL, fence bigint NOT NULL,
          processed_at timestamptz NOT NULL DEFAULT now());
        CREATE TABLE IF NOT EXISTS ${s}.fence (id int PRIMARY KEY, last_fence bigint NOT NULL);
        INSERT INTO ${s}.fence VALUES (1, 0) ON CONFLICT DO NOTHING`);
    } else if (action === "teardown") {
      await db.query(`SET client_min_messages TO warning; DROP SCHEMA IF EXISTS ${ident(schema())} CASCADE`);
    } else if (action === "list") {
      for (const k of await db.query(`SELECT payment_id FROM ${ident(schema())}.settled ORDER BY payment_id`)) {
        console.log(k);
      }
    } else {
      console.error("usage: pg-state.js setup|teardown|list");
      process.exitCode = 2;
    }
  } finally {
    db.end();
  }
}

main(process.argv[2]).catch((e) => {
  console.error(`pg-state.js: ${e.message}`);
  process.exit(1);
});
