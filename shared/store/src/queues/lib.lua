-- Helpers of the queue and placement scripts. A queue's fixed keys, all in its slot ({q:<name>}), reach a
-- function as KEYS in this order (keys.rs, QueueKeys): record, pending, requests, events, events_gone; the records
-- of its placements and its minutes of metrics are built from the same tag.
--   record        the queue (queues.rs): cfg, rev, c_ms, u_ms; timeout_ms, maxp and ced (its timeout, limit of
--                 PENDING placements and custom event data, read from cfg by the Rust that writes it); psum (the
--                 sum of its PENDING placements' start times, ms, for their average wait)
--   pending       PENDING placement ids by start ms
--   requests      stream of placements for the workers to take (consumer group PLACEMENT_WORKERS): id, dl_ms,
--                 req (the request, as in pl:<id>), tp (the starter's trace context, when it was traced)
--   events        stream of placement events (one per end): type, t, ced, id (the placement's record is joined
--                 when they are read)
--   events_gone   position of the last event trimmed
--   pl:<id>       a PENDING placement: id, queue, req (the request, encoded), digest, status, s_ms, dl_ms, n (attempts
--                 made), why (the furthest any attempt got: the reason should it time out), cands (the last attempt's
--                 candidates)
--   pe:<id>       an ended placement, kept for the retention as one packed value (ENDED): the fields above but why,
--                 and reason, msg, e_ms, and once FULFILLED gsid, fleet, loc, ip, dns, port, placed (the players'
--                 player sessions by their number in the game session, see placements.rs), fco (first choice
--                 outcome), ll and lp (1 | 0: lowest latency, lowest price); cands only until its worker is done
--                 with it
--   m:<minute>    counts of a minute (ms / 60000), kept 25 hours: STARTED and each status but FULFILLED by name;
--                 g:<bucket>|<fco>|<ll>|<lp>|<location> (FULFILLED after a wait in that bucket, with its first choice
--                 outcome, lowest latency and price 1 | 0, and where: berth_domain::placement::metrics reads it, and
--                 the f:<fco>|<ll>|<lp>|<location> and w:<bucket>, or fco:, ll, lp and loc: counts, of earlier
--                 releases)

local PLACEMENT_WORKERS = 'workers'
local MINUTE_KEPT_MS = 25 * 3600 * 1000

local function queue_keys(KEYS)
  local tag = string.match(KEYS[1], '^[^}]*}')
  return {record = KEYS[1], pending = KEYS[2], requests = KEYS[3], events = KEYS[4], events_gone = KEYS[5],
    placement = tag .. ':pl:', ended = tag .. ':pe:', minute = tag .. ':m:', name = string.match(tag, '{q:(.*)}$')}
end

-- Adds one to each of `counters` in the current minute's counts. The minute's hash is given its expiry when a count
-- starts at 1, which every first count of the hash does.
local function count_minute(q, now, counters)
  local key = q.minute .. math.floor(now / 60000)
  local first = false
  for _, name in ipairs(counters) do first = redis.call('HINCRBY', key, name, 1) == 1 or first end
  if first then redis.call('PEXPIRE', key, MINUTE_KEPT_MS) end
end

-- Fields of an ended placement no watcher is shown: its last attempt's candidates (20 bytes a fleet and location,
-- which only its worker reads), and the digest that tells a retried start from another.
local NOT_SHOWN = {cands = true, digest = true}

-- Appends a placement event: its type and time, the queue's custom event data, and the placement's id, whose record
-- a reader joins (read_events.lua). Answers its position in the stream.
local function placement_event(q, id, type, now)
  return redis.call('XADD', q.events, '*', 'type', type, 't', int_text(now), 'ced',
    redis.call('HGET', q.record, 'ced') or '', 'id', id)
end

-- The fields of an ended placement, in the order its packed record keeps them (record_values in keys.lua): cands
-- last, dropped once its worker is done with it. The packed record leaves out what its key and its other fields
-- give: its id and queue, and the fleet its game session's id holds.
local ENDED = {'id', 'queue', 'req', 'digest', 'status', 'reason', 'msg', 's_ms', 'dl_ms', 'e_ms', 'n', 'gsid',
  'fleet', 'loc', 'ip', 'dns', 'port', 'placed', 'fco', 'll', 'lp', 'cands'}

-- An ended placement's fields as HGETALL answers them, or nil when there is none.
local function ended_fields(q, id)
  local packed = redis.call('GET', q.ended .. id)
  if not packed then return nil end
  local values = cmsgpack.unpack(packed)
  values[1], values[2] = values[1] or id, values[2] or q.name
  values[13] = values[13] or fleet_of(values[12]) or false
  return record_fields(values, ENDED)
end

-- A placement's fields as HGETALL answers them, PENDING or ended; {} when there is none.
local function placement_fields(q, id)
  local fields = redis.call('HGETALL', q.placement .. id)
  if #fields == 0 then fields = ended_fields(q, id) or {} end
  return fields
end

-- Ends a PENDING placement: its status, reason and message, `extra` fields (name, value, ...) beside them, its
-- event and its minute's counts. Its record is packed and kept `retention_ms` from now, with its candidates unless
-- its worker is `done` with it. `record`: its fields by name, when the caller has read them. Answers its values as
-- it ended, by position in ENDED (record_fields names them), and its event's position in the stream.
local function end_placement(q, id, status, reason, message, now, retention_ms, extra, done, record)
  local key = q.placement .. id
  record = record or by_name(redis.call('HGETALL', key))
  record.status, record.reason, record.msg, record.e_ms = status, reason, message, int_text(now)
  for i = 1, #extra, 2 do record[extra[i]] = extra[i + 1] end
  if done then record.cands = false end
  local values = record_values(record, ENDED)
  -- Packed without what its key and its other fields give (see ENDED), then answered whole.
  local given = {values[1], values[2], values[13]}
  if values[1] == id then values[1] = false end
  if values[2] == q.name then values[2] = false end
  if values[13] == fleet_of(values[12]) then values[13] = false end
  redis.call('SET', q.ended .. id, cmsgpack.pack(values), 'PX', retention_ms)
  values[1], values[2], values[13] = given[1], given[2], given[3]
  redis.call('DEL', key)
  if redis.call('ZREM', q.pending, id) == 1 then
    redis.call('HINCRBY', q.record, 'psum', -tonumber(record.s_ms))
  end
  local position = placement_event(q, id, status, now)
  local counters = {status}
  if status == S.FULFILLED then
    -- One count for all a fulfilled placement is counted by (berth_domain::placement::metrics reads it): its wait,
    -- in buckets 10 % wide (the middle of one is within 5 % of every wait in it), and how and where it was placed.
    counters = {'g:' .. math.floor(math.log(now - tonumber(record.s_ms) + 1) / math.log(1.1)) .. '|' .. record.fco ..
      '|' .. (record.ll == '1' and '1' or '0') .. '|' .. (record.lp == '1' and '1' or '0') .. '|' .. record.loc}
  end
  count_minute(q, now, counters)
  return values, position
end

-- A worker is done with a request `entry`: it leaves the stream. Answers the number of entries removed (0 when
-- another worker was done with it first).
local function done_with(q, entry)
  redis.call('XACK', q.requests, PLACEMENT_WORKERS, entry)
  return redis.call('XDEL', q.requests, entry)
end

-- An ended placement's candidates (where its worker gave up its last attempt) are nobody's business once its
-- worker is done: its packed record drops them.
local function drop_candidates(q, id)
  local key = q.ended .. id
  local packed = redis.call('GET', key)
  if not packed then return end
  local values = cmsgpack.unpack(packed)
  if not values[#ENDED] then return end
  values[#ENDED] = false
  redis.call('SET', key, cmsgpack.pack(values), 'KEEPTTL')
end

-- The reply of the placement scripts: {outcome, now_ms, detail, placement `fields` (as HGETALL answers them)...}.
local function placement_reply(outcome, now, detail, fields)
  return append_pairs({outcome, int_text(now), int_text(detail or '')}, fields or {})
end
