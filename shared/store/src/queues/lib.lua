-- Helpers of the queue and placement scripts. A queue's fixed keys, all in its slot ({q:<name>}), reach a
-- function as KEYS in this order (keys.rs, QueueKeys): record, pending, requests, events, events_gone; the records
-- of its placements and its minutes of metrics are built from the same tag.
--   record        the queue (queues.rs): cfg, rev, c_ms, u_ms; timeout_ms, maxp and ced (its timeout, limit of
--                 PENDING placements and custom event data, read from cfg by the Rust that writes it); psum (the
--                 sum of its PENDING placements' start times, ms, for their average wait)
--   pending       PENDING placement ids by start ms
--   requests      stream of placements for the workers to take (consumer group PLACEMENT_WORKERS): id, dl_ms
--   events        stream of placement events (one per end): type, t, ced, id (the placement's record is joined
--                 when they are read)
--   events_gone   position of the last event trimmed
--   pl:<id>       a placement: id, queue, req (the request, encoded), digest, status, reason, msg, s_ms, dl_ms, e_ms,
--                 n (attempts made), until it ends why (the furthest any attempt got: the reason should it time
--                 out), until its worker is done with it cands (the last attempt's candidates), and once FULFILLED gsid, fleet, loc, ip, dns, port, placed (JSON
--                 [[player id, player session id], ...]), fco (first choice outcome), ll and lp (1 | 0: lowest
--                 latency, lowest price)
--   m:<minute>    counts of a minute (ms / 60000), kept 25 hours: each status and event type by name, fco:<outcome>,
--                 ll, lp, loc:<location> (FULFILLED there), w:<bucket> (FULFILLED after a wait in that bucket)

local PLACEMENT_WORKERS = 'workers'
local MINUTE_KEPT_MS = 25 * 3600 * 1000

local function queue_keys(KEYS)
  local tag = string.match(KEYS[1], '^[^}]*}')
  return {record = KEYS[1], pending = KEYS[2], requests = KEYS[3], events = KEYS[4], events_gone = KEYS[5],
    placement = tag .. ':pl:', minute = tag .. ':m:'}
end

-- Adds one to each of `counters` in the current minute's counts.
local function count_minute(q, now, counters)
  local key = q.minute .. math.floor(now / 60000)
  for _, name in ipairs(counters) do redis.call('HINCRBY', key, name, 1) end
  redis.call('PEXPIRE', key, MINUTE_KEPT_MS)
end

-- Fields of a placement no watcher is shown: what only the placement's worker reads (its last attempt's candidates, 20 bytes a
-- fleet and location, and its furthest reason), which the placement drops once the worker is done, and the digest
-- that tells a retried start from another.
local NOT_SHOWN = {cands = true, why = true, digest = true}

-- Appends a placement event: its type and time, the queue's custom event data, and the placement's id, whose record
-- a reader joins (read_events.lua).
local function placement_event(q, id, type, now)
  redis.call('XADD', q.events, '*', 'type', type, 't', now, 'ced', redis.call('HGET', q.record, 'ced') or '', 'id', id)
end

-- Ends a PENDING placement: its status, reason and message, `extra` fields (name, value, ...) beside them, its
-- event, its minute's counts, and its record kept `retention_ms` from now.
local function end_placement(q, id, status, reason, message, now, retention_ms, extra)
  local key = q.placement .. id
  redis.call('HSET', key, 'status', status, 'reason', reason, 'msg', message, 'e_ms', now)
  if #extra > 0 then redis.call('HSET', key, unpack(extra)) end
  redis.call('HDEL', key, 'why')
  if redis.call('ZREM', q.pending, id) == 1 then
    redis.call('HINCRBY', q.record, 'psum', -tonumber(redis.call('HGET', key, 's_ms')))
  end
  redis.call('PEXPIRE', key, retention_ms)
  placement_event(q, id, status, now)
  local counters = {status}
  if status == S.FULFILLED then
    local p = redis.call('HMGET', key, 'fco', 'll', 'lp', 'loc', 's_ms')
    counters[#counters + 1] = 'fco:' .. p[1]
    if p[2] == '1' then counters[#counters + 1] = 'll' end
    if p[3] == '1' then counters[#counters + 1] = 'lp' end
    counters[#counters + 1] = 'loc:' .. p[4]
    -- Buckets 10 % wide: the middle of one is within 5 % of every wait in it.
    counters[#counters + 1] = 'w:' .. math.floor(math.log(now - tonumber(p[5]) + 1) / math.log(1.1))
  end
  count_minute(q, now, counters)
end

-- A worker is done with placement `id`'s request `entry`: the entry leaves the stream, and the placement the
-- candidates its worker gave up its last attempt in (which are nobody's business once the worker is done).
local function done_with(q, id, entry)
  redis.call('XACK', q.requests, PLACEMENT_WORKERS, entry)
  redis.call('HDEL', q.placement .. id, 'cands')
  return redis.call('XDEL', q.requests, entry)
end

-- The reply of the placement scripts: {outcome, now_ms, detail, placement fields...}.
local function placement_reply(outcome, now, detail, key)
  local out = {outcome, tostring(now), tostring(detail or '')}
  if key then append_fields(out, key) end
  return out
end
