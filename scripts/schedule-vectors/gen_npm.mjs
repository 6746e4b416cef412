// Regenerates fixtures/schedule/{node-cron,cron-npm,croner,pm2}.jsonl by asking the real npm
// schedulers (versions pinned in package.json) what each expression of cases.json fires.
// pm2 is croner 4.1.97 (the version PM2 7 pins, installed as the alias `croner4`), called as
// PM2's God.registerCron calls it: no options, so it reads the process's local zone (TZ).
// Usage: (cd scripts/schedule-vectors && npm ci && node gen_npm.mjs)
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { Cron } from 'croner';
import { CronTime } from 'cron';
import nodeCron from 'node-cron';
// node-cron does not export its matcher; its bundle does (the scheduler itself uses it).
import { T as NodeCronMatcher } from './node_modules/node-cron/dist/_shared.js';

// npm `cron` uses luxon through require(); take that very instance. luxon resolves a
// repeated local time with the zone's offset at the moment the process first asked
// (Settings.now), so a process started in winter and one started in summer schedule the
// repeated hour differently. Pin "now" to a winter date so the vectors are reproducible;
// batchguard assumes a process started on standard time (docs/schedules.md).
const require = createRequire(import.meta.url);
// PM2 loads croner with require(), so take the same CommonJS build.
const Croner4 = require('croner4');
const { DateTime, Settings } = require('luxon');
const PINNED_NOW = Date.parse('2026-01-15T12:00:00Z');
Settings.now = () => PINNED_NOW;

const here = dirname(fileURLToPath(import.meta.url));
const cases = JSON.parse(readFileSync(join(here, 'cases.json'), 'utf8'));
const outDir = join(here, '..', '..', 'fixtures', 'schedule');

const fmt = (ms, tz) => DateTime.fromMillis(ms, { zone: tz }).toISO({ suppressMilliseconds: true });

// Each oracle: make(expr, tz) -> next(ms) -> ms | null (strictly after ms), or throws when invalid.
const oracles = {
  'croner': (expr, tz) => {
    const c = new Cron(expr, { timezone: tz, paused: true });
    return (ms) => { const d = c.nextRun(new Date(ms)); return d ? d.getTime() : null; };
  },
  'node-cron': (expr, tz) => {
    if (!nodeCron.validate(expr)) throw new Error('node-cron: validate() is false');
    const m = new NodeCronMatcher(expr, tz);
    return (ms) => { try { return m.getNextMatch(new Date(ms)).getTime(); } catch { return null; } };
  },
  'pm2': (expr, tz) => {
    // PM2 passes no timezone: croner 4 works in the local zone of the PM2 daemon.
    process.env.TZ = tz;
    const c = Croner4(expr);
    if (c.once) throw new Error('croner4: a date, run once, not a schedule');
    return (ms) => { const d = c.next(new Date(ms)); return d ? d.getTime() : null; };
  },
  'cron-npm': (expr, tz) => {
    const ct = new CronTime(expr, tz);
    // CronJob.start() asks for the next date from "now", which is the previous fire time.
    return (ms) => {
      try { return ct.getNextDateFrom(DateTime.fromMillis(ms, { zone: tz })).toMillis(); } catch { return null; }
    };
  },
};

function slots(next, w) {
  const from = DateTime.fromISO(w.from).toMillis();
  const to = DateTime.fromISO(w.to).toMillis();
  const out = [];
  // [from, to): the first slot may be `from` itself, so start one millisecond before.
  let t = from - 1;
  let to2 = to;
  for (;;) {
    const n = next(t);
    if (n === null || n >= to) break;
    if (n <= t) { out.push({ regress: n }); break; }
    out.push(n);
    t = n;
    if (out.length >= w.cap) { to2 = n + 1000; break; }
  }
  return { out, to: to2 };
}

for (const dialect of Object.keys(oracles)) {
  const make = oracles[dialect];
  const lines = [];
  const general = [...cases.five_field, ...cases.seconds, ...cases.lwh, ...cases.invalid,
    ...(dialect === 'croner' ? cases.croner_only : []),
    ...(dialect === 'pm2' ? cases.pm2_only : [])];
  const emit = (expr, windows, tag) => {
    let next0;
    try { make(expr, 'UTC'); } catch (e) {
      lines.push({ dialect, expr, tag, valid: false, error: String(e.message || e).split('\n')[0] });
      return;
    }
    // croner 4 replaces `?` with the current second, minute, ... when it reads the pattern:
    // the slots depend on when PM2 started, so batchguard refuses it (docs/schedules.md).
    if (dialect === 'pm2' && expr.includes('?')) {
      lines.push({ dialect, expr, tag, valid: false, library_accepts: true,
        error: '`?` stands for the time PM2 read the pattern' });
      return;
    }
    for (const w of windows) {
      next0 = make(expr, w.tz);
      const { out, to } = slots(next0, w);
      const bad = out.find((x) => typeof x !== 'number');
      if (bad) {
        lines.push({ dialect, expr, tag, tz: w.tz, from: fmt(DateTime.fromISO(w.from).toMillis(), w.tz),
          note: `library returned a date before its start: ${fmt(bad.regress, w.tz)}` });
        continue;
      }
      lines.push({ dialect, expr, tag, tz: w.tz, from: fmt(DateTime.fromISO(w.from).toMillis(), w.tz),
        to: fmt(to, w.tz), slots: out.map((ms) => fmt(ms, w.tz)) });
    }
  };
  for (const expr of general) emit(expr, cases.general_windows, 'general');
  for (const expr of cases.dst) emit(expr, cases.dst_windows, 'dst');
  // croner 4 in a half-hour gap (Lord Howe): the chain jumps past slots after the gap.
  if (dialect === 'pm2') {
    for (const expr of [...cases.dst, ...cases.pm2_dst]) emit(expr, cases.pm2_dst_windows, 'dst');
  }
  process.env.TZ = 'UTC';
  writeFileSync(join(outDir, `${dialect}.jsonl`), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  console.log(dialect, lines.length);
}
