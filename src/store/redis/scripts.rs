//! The Redis store's Lua scripts: each decision is one script, so it is atomic and in
//! Redis time (`TIME`). See the store's module doc for the keys.

/// The job's unfinished slots, as a Lua function: the slots of the job's index (KEYS-like
/// `zkey`) scored from `min` to `max` that ended interrupted or failed, or whose run holds
/// no live lease while marked running (lost), appended to `out` as (slot, attempts,
/// state, run id). `slotp` and `runp` prefix the slot and run keys.
macro_rules! unfinished_fn {
    () => {
        r#"
local function unfinished(zkey, min, max, slotp, runp, out)
  for _, s in ipairs(redis.call('ZRANGEBYSCORE', zkey, min, max)) do
    local st = redis.call('HMGET', slotp .. s, 'attempts', 'state', 'run_id')
    local state = st[2]
    if state == 'running' then
      local live = false
      local key = st[3] and redis.call('GET', runp .. st[3])
      local held = key and redis.call('GET', key)
      if held then
        local ok, l = pcall(cjson.decode, held)
        live = ok and type(l) == 'table' and l.run_id == st[3]
      end
      if not live then state = 'lost' end
    end
    if state == 'failed' or state == 'interrupted' or state == 'lost' then
      table.insert(out, s)
      table.insert(out, st[1] or '0')
      table.insert(out, state)
      table.insert(out, st[3] or '')
    end
  end
end
"#
    };
}

/// The acquire. KEYS: lease, fence, slot, run, job's slots, jobs, epoch. ARGV: holder, run
/// id, job, scheduled_at, ttl ms, retention ms, max attempts (or ""), manual (1/0), the
/// fence floor (the highest this working directory has seen), the slot's epoch seconds,
/// the clock's bound in epoch microseconds (earliest, before; "" for none), the first
/// score of the catch-up window ("" for none), the prefix of the job's slot keys, the
/// prefix of run keys.
///
/// Items 22 and 27: a clock outside the bound answers `out_of_clock`, unfinished slots in
/// `[catch-up, slot)` answer `behind` with them; either writes nothing. Only a granted
/// lease `INCR`s the counter. The slot's hash keeps the run and its fence, so a finish of
/// an older run can name the newer one.
pub(super) const ACQUIRE: &str = concat!(
    "if redis.replicate_commands then redis.replicate_commands() end\n",
    unfinished_fn!(),
    r#"
local t = redis.call('TIME')
if redis.call('EXISTS', KEYS[7]) == 0 then return {'no_epoch', t[1], t[2]} end
local ret = tonumber(ARGV[6])
if tonumber(t[1]) - tonumber(ARGV[10]) > math.floor(ret / 1000) then return {'too_old', t[1], t[2]} end
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
if (ARGV[11] ~= '' and now_us < tonumber(ARGV[11])) or (ARGV[12] ~= '' and now_us >= tonumber(ARGV[12])) then
  return {'out_of_clock', t[1], t[2]}
end
if ARGV[13] ~= '' then
  local behind = {'behind', t[1], t[2]}
  unfinished(KEYS[5], ARGV[13], '(' .. ARGV[10], ARGV[14], ARGV[15], behind)
  if #behind > 3 then return behind end
end
local st = redis.call('HMGET', KEYS[3], 'attempts', 'state', 'run_id')
local used = tonumber(st[1]) or 0
if st[2] == 'succeeded' then return {'succeeded', t[1], t[2], st[3] or ''} end
if st[2] == 'dead_lettered' and ARGV[8] ~= '1' then return {'dead_lettered', t[1], t[2]} end
local held = redis.call('GET', KEYS[1])
if held then
  return {'held', t[1], t[2], held, redis.call('PTTL', KEYS[1])}
end
if ARGV[7] ~= '' and ARGV[8] ~= '1' and used >= tonumber(ARGV[7]) then
  redis.call('HSET', KEYS[3], 'state', 'dead_lettered', 'run_id', ARGV[2])
  redis.call('HDEL', KEYS[3], 'fence')
  redis.call('PEXPIRE', KEYS[3], ret)
  return {'exhausted', t[1], t[2], used}
end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if cur < tonumber(ARGV[9]) then
  redis.call('DEL', KEYS[7])
  return {'backwards', t[1], t[2], cur + 1}
end
local fence = redis.call('INCR', KEYS[2])
-- The fence as digits: cjson writes numbers with 14 significant digits only.
local digits = string.format('%d', fence)
local lease = cjson.encode({holder = ARGV[1], run_id = ARGV[2], fence = digits, job = ARGV[3], scheduled_at = ARGV[4], acquired_us = t[1] .. string.format('%06d', tonumber(t[2]))})
redis.call('SET', KEYS[1], lease, 'NX', 'PX', ARGV[5])
redis.call('SET', KEYS[4], KEYS[1], 'PX', ARGV[5])
local attempt = redis.call('HINCRBY', KEYS[3], 'attempts', 1)
redis.call('HSET', KEYS[3], 'state', 'running', 'run_id', ARGV[2], 'fence', digits)
redis.call('PEXPIRE', KEYS[3], ret)
local now = tonumber(t[1])
redis.call('SADD', KEYS[6], ARGV[3])
redis.call('ZADD', KEYS[5], tonumber(ARGV[10]), ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. tostring(now - math.floor(ret / 1000)))
return {'acquired', t[1], t[2], fence, attempt}
"#
);

/// The finish. KEYS: lease, slot, run, the run's claims. ARGV: run id, fence, state,
/// retention ms. Every answer ends with the run's claims (key, time pairs, SPEC 7.5): Redis
/// keeps no ledger, so the finish's ledger apart writes them, read in this round trip.
///
/// Item 23: once per run id. The slot's hash keeps what each run's finish came to
/// (`end:<run id>`: `written`, or `superseded <fence> <newer run>`), set by the script
/// that decided it, so a finish sent again (a spool flushed by several processes, a flush
/// retried) changes nothing and answers `already` with it. Item 24: when the slot's hash
/// names another run, a newer holder took the slot after this run's lease ended: nothing
/// of the slot or the lease is touched, and the answer names that run and its fence.
pub(super) const FINISH: &str = r#"
local t = redis.call('TIME')
local claims = redis.call('HGETALL', KEYS[4])
local mark = 'end:' .. ARGV[1]
local prior = redis.call('HGET', KEYS[2], mark)
if prior then return {t[1], t[2], 'already', prior, '', claims} end
local srun = redis.call('HGET', KEYS[2], 'run_id')
if srun and srun ~= ARGV[1] then
  local nf = redis.call('HGET', KEYS[2], 'fence')
  if not nf then
    local held = redis.call('GET', KEYS[1])
    local ok, l = pcall(cjson.decode, held or '')
    if ok and type(l) == 'table' and l.run_id == srun then nf = l.fence end
    if type(nf) == 'number' then nf = string.format('%d', nf) end
  end
  nf = nf or ''
  redis.call('HSET', KEYS[2], mark, 'superseded ' .. nf .. ' ' .. srun)
  redis.call('DEL', KEYS[3])
  return {t[1], t[2], 'superseded', srun, nf, claims}
end
if srun == ARGV[1] or ARGV[3] == 'succeeded' then
  redis.call('HSET', KEYS[2], 'state', ARGV[3])
  if ARGV[3] == 'succeeded' then redis.call('HSET', KEYS[2], 'run_id', ARGV[1]) end
end
redis.call('HSET', KEYS[2], mark, 'written')
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[4]))
local held = redis.call('GET', KEYS[1])
if held then
  local ok, l = pcall(cjson.decode, held)
  local lf = ok and type(l) == 'table' and l.fence
  if type(lf) == 'number' then lf = string.format('%d', lf) end
  if lf == ARGV[2] and l.run_id == ARGV[1] then
    redis.call('DEL', KEYS[1])
  end
end
redis.call('DEL', KEYS[3])
return {t[1], t[2], 'written', '', '', claims}
"#;

/// A claim (SPEC 7.5). KEYS: run, claim (`P:claim:<job>:<key>`), the run's claims
/// (`P:claims:<run id>`). ARGV: run id, fence, output key, the prefix of slot keys
/// (`P:slot:`), retention ms.
///
/// The run is found by its lease (the run key names it): a run whose lease is gone, or whose
/// slot's hash names another run or fence, is refused. Else `SET NX` of the claim key
/// decides: `claimed` (the key joins the run's claims, with the time, for the ledger apart
/// its finish writes) or `already`. One script: nothing runs between the check and the set.
pub(super) const CLAIM: &str = r#"
local t = redis.call('TIME')
local lk = redis.call('GET', KEYS[1])
local held = lk and redis.call('GET', lk)
local ok, l = pcall(cjson.decode, held or '')
if not (ok and type(l) == 'table' and l.run_id == ARGV[1]) then return {t[1], t[2], 'refused'} end
local slot = ARGV[4] .. tostring(l.job) .. ':' .. tostring(l.scheduled_at)
local s = redis.call('HMGET', slot, 'run_id', 'fence')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] then return {t[1], t[2], 'refused'} end
local at = t[1] .. string.format('%06d', tonumber(t[2]))
local v = cjson.encode({run_id = ARGV[1], fence = ARGV[2], at = at, scheduled_at = l.scheduled_at})
if not redis.call('SET', KEYS[2], v, 'NX', 'PX', ARGV[5]) then return {t[1], t[2], 'already'} end
redis.call('HSET', KEYS[3], ARGV[3], at)
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return {t[1], t[2], 'claimed', at}
"#;

/// A run's claims: KEYS: the run's claims. Key and time pairs.
pub(super) const CLAIMED: &str = r#"
local t = redis.call('TIME')
return {t[1], t[2], redis.call('HGETALL', KEYS[1])}
"#;

/// `store migrate`: KEYS: epoch. ARGV: what writes it. Writes the epoch when there is none.
pub(super) const MIGRATE: &str = r#"
local t = redis.call('TIME')
local e = redis.call('GET', KEYS[1])
if e then return {'present', e} end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. t[1])
return {'written', ARGV[1] .. ' ' .. t[1]}
"#;

/// `store repair`, one job's counter: KEYS: fence. ARGV: the highest fence known. Raises
/// the counter to it (never lowers it); answers the counter.
pub(super) const RAISE: &str = r#"
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[1])
if want > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return want
end
return cur
"#;

/// `store repair`, one slot: KEYS: slot, job's slots, jobs. ARGV: attempts, state, run id,
/// retention ms, job, scheduled_at, the slot's epoch seconds. A marker already settled
/// (`succeeded`) is kept; otherwise the ledger's state and the larger attempt count win.
pub(super) const RESTORE: &str = r#"
local st = redis.call('HMGET', KEYS[1], 'attempts', 'state')
if st[2] ~= 'succeeded' then
  local used = math.max(tonumber(st[1]) or 0, tonumber(ARGV[1]))
  redis.call('HSET', KEYS[1], 'attempts', used, 'state', ARGV[2], 'run_id', ARGV[3])
  redis.call('HDEL', KEYS[1], 'fence')
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
redis.call('SADD', KEYS[3], ARGV[5])
redis.call('ZADD', KEYS[2], tonumber(ARGV[7]), ARGV[6])
return 1
"#;

/// `live`: KEYS: run. Whether the run's lease key still names it.
pub(super) const LIVE: &str = r#"
local t = redis.call('TIME')
local key = redis.call('GET', KEYS[1])
local live = 0
if key then
  local held = redis.call('GET', key)
  if held then
    local ok, l = pcall(cjson.decode, held)
    if ok and type(l) == 'table' and l.run_id == ARGV[1] then live = 1 end
  end
end
return {t[1], t[2], live}
"#;

/// `held_leases`: KEYS: lease keys (found by `SCAN`). Each one's value and time to live,
/// read with the clock in one atomic step; a key gone since the scan answers nothing.
pub(super) const HELD: &str = r#"
local t = redis.call('TIME')
local out = {t[1], t[2]}
for i, k in ipairs(KEYS) do
  local v = redis.call('GET', k)
  if v then
    table.insert(out, k)
    table.insert(out, v)
    table.insert(out, redis.call('PTTL', k))
  end
end
return out
"#;

/// `unfinished`: KEYS: the job's slots. ARGV: the first slot's epoch seconds, the prefix of
/// the job's slot keys, the prefix of run keys. The slots at or after it that are
/// unfinished (see `unfinished_fn`), with the clock first.
pub(super) const UNFINISHED: &str = concat!(
    unfinished_fn!(),
    r#"
local t = redis.call('TIME')
local out = {t[1], t[2]}
unfinished(KEYS[1], ARGV[1], '+inf', ARGV[2], ARGV[3], out)
return out
"#
);
