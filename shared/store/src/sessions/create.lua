-- Creates a game session on a process of the fleet: the one named, or else one in the location with room for the
-- session's players — first one already hosting sessions with a slot to spare (packing, so that whole instances
-- empty out), then the first ready one of the pool (the claim order: ACTIVE instances first, then the longest
-- idle). The process hosts it from now on (it leaves the pool; its desired state gets a new version), the session
-- is ACTIVATING until the process activates it or its activation deadline passes.
-- KEYS: k.due, k.fleet, k.hosting, k.players, k.pool, k.sessions. ARGV[1] game session id (for a placement's
-- attempt, the one its token names), ARGV[2] game-server id ('' to pick one), ARGV[3] location ('' for any), ARGV[4]
-- maximum players, ARGV[5] retention ms,
-- ARGV[6] idempotency token (''), ARGV[7] digest of the request, ARGV[8] creator id (''), ARGV[9] accept players
-- (1 | 0), ARGV[10] protected (1 | 0; '' for the fleet's default), ARGV[11] name, ARGV[12] properties (JSON),
-- ARGV[13] game session data, ARGV[14] matchmaker data, ARGV[15] placement id, ARGV[16] fleet id; for a placement's
-- attempt (see attempt_spent), ARGV[17] the placement replica to tell when the session is activated, ARGV[18] the
-- attempt's spend key, ARGV[19] its number, ARGV[20] the placement's deadline ms, ARGV[21] the game-server ids its
-- earlier attempts failed on (space-separated: not to be tried again), ARGV[22] '1' when no earlier create of the
-- placement came to this fleet (it waits nowhere here), then per player to reserve a slot for: player id, player
-- data (ARGV[17] to ARGV[22] are '' otherwise), whose player sessions are numbered 1, 2, ... in that order
-- (player_session_id). The
-- activation and reservation deadlines and the creator limit are the fleet's settings (fleet_settings); the
-- players' reservations start when the session is activated.
-- Reply: session_reply's {outcome, now_ms, replica, version, desired state, detail, session fields...}, where the
-- desired state is '1' when the session is the only one its server hosts (the caller knows it whole: the version,
-- ACTIVE, this session and the players reserved with it), else ''. Outcomes:
-- CREATED; EXISTING (the token was used with the same request: the session as it stands); TOKEN_REUSED (used with
-- another request); ABANDONED (the attempt was spent, or its placement's deadline has passed: nothing is created);
-- NO_SERVER (none ready with room, or the named server is unknown or cannot host it: either way the caller looks
-- elsewhere); TOO_SMALL (every ready server looked at takes fewer players than asked); CREATOR_LIMIT (detail: ms when
-- the creator may create again); NO_FLEET, NO_LOCATION, NOT_ACTIVE (the fleet takes no new session there: detail says
-- why).
local now = now_ms()
local sid, named, loc, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local token, creator = ARGV[6], ARGV[8]
local idem = k.idem .. token
local spend = ARGV[18]
-- The highest attempt of the placement spent here, when the first read found none ('0'); else read when needed.
local spent = nil
if token ~= '' then
  -- A placement's attempt names its session by its token (Attempt::game_session_id), so the id finds what an earlier
  -- create of it made; a client's token is found through its key.
  local existing
  if spend ~= '' then
    -- One read answers the common case, an attempt new here: no session under its token and nothing spent.
    if redis.call('EXISTS', gkey(k, sid), k.gend .. sid, k.idem .. spend) == 0 then
      spent = '0'
    elseif redis.call('EXISTS', gkey(k, sid), k.gend .. sid) > 0 then
      existing = sid
    end
  else
    existing = redis.call('GET', idem)
  end
  if existing then
    local fields = session_fields(k, existing)
    if by_name(fields).digest ~= ARGV[7] then return session_reply('TOKEN_REUSED', now) end
    return session_reply('EXISTING', now, nil, nil, fields)
  end
end
if spend ~= '' and attempt_spent(k, spend, ARGV[19], ARGV[20], now, spent) then return session_reply('ABANDONED', now) end
-- A placement's attempt refused here is spent, so that a late retry of it cannot create what the placement has
-- moved on from.
local function refuse(outcome, detail)
  if spend ~= '' then
    spend_attempt(k, spend, ARGV[19], ARGV[20], now, spent)
    -- The placement waits for a server here: the next one to come is announced (see place), and the autoscaler
    -- counts it as demand until the mark lapses (a waiting placement renews it with every attempt).
    if outcome == 'NO_SERVER' and loc ~= '' then
      mark_hungry(k, loc, now)
      redis.call('ZADD', k.wanting .. loc, now + HUNGRY_MS, ARGV[15])
      redis.call('HSETNX', k.wanted .. loc, ARGV[15], now)
      -- Where it waits, for the attempt that places it to clear (below).
      redis.call('SADD', k.waits .. ARGV[15], loc)
      redis.call('PEXPIRE', k.waits .. ARGV[15], math.max(tonumber(ARGV[20]) - now, 0) + 1000)
    end
  end
  return session_reply(outcome, now, detail)
end
local refused, set, packs = session_refusal(k, loc)
if refused then return refuse(refused[1], refused[2]) end
local limit, period = set.creator_n, set.creator_ms
local protected = ARGV[10]
if protected == '' then protected = tostring(set.protect) end
local created_by = k.creator .. creator
if creator ~= '' and limit > 0 then
  redis.call('ZREMRANGEBYSCORE', created_by, '-inf', now - period)
  if redis.call('ZCARD', created_by) >= limit then
    local oldest = redis.call('ZRANGE', created_by, 0, 0, 'WITHSCORES')
    return refuse('CREATOR_LIMIT', tonumber(oldest[2]) + period)
  end
end

-- Whether a process can take a session of `max` players in `loc` now: berth_domain::allocation::fit, the rule's one
-- statement (a table of cases runs against both): ready or hosting, healthy, on an instance that takes work,
-- AVAILABLE and unclaimed (a claim or UTILIZED means another caller placed a game on it). Counts the processes
-- looked at, and those of them that take fewer players than `max`. The one it takes is read once: `server` holds
-- its fields (SERVER_TALLIED's, then those below) and `open` the sessions it hosts.
local avoided = {}
for avoid in string.gmatch(ARGV[21], '%S+') do avoided[avoid] = true end
local looked, too_small = 0, 0
local server, open
local function can_host(id)
  if avoided[id] then return false end
  local s = redis.call('HMGET', k.gs .. id, 'instance', 'loc', 'pstate', 'util', 'claim_exp_ms', 'istatus', 'health',
    'max_sess', 'tly', 'max_players', 'ip', 'dns', 'port', 'replica', 'ver')
  if not HOSTING_STATE[s[3]] then return false end
  looked = looked + 1
  local players = tonumber(s[10] or '0')
  if players < max then too_small = too_small + 1 end
  if (loc ~= '' and s[2] ~= loc) or players < max or s[7] == S.UNHEALTHY then return false end
  if not TIER[s[6]] or s[4] ~= S.AVAILABLE or s[5] then return false end
  -- Only an ACTIVE process hosts sessions (it becomes ACTIVE with its first and STANDING_BY once its last ends), so
  -- a ready one's are not counted.
  local hosted = 0
  if s[3] == S.ACTIVE then hosted = redis.call('SCARD', k.gs .. id .. ':sessions') end
  if hosted >= tonumber(s[8] or '1') then return false end
  server, open = s, hosted
  return true
end

-- The first of up to CANDIDATES_LOOKED members of a sorted set that can host the session; a few hundred are looked
-- at, not the whole fleet. The batches start at one member and grow: the first mostly can.
local function first_host(set, min, max_score)
  local offset, size = 0, 1
  while offset < CANDIDATES_LOOKED do
    size = math.min(size, CANDIDATES_LOOKED - offset)
    local ids = redis.call('ZRANGEBYSCORE', set, min, max_score, 'LIMIT', offset, size)
    for _, candidate in ipairs(ids) do
      if can_host(candidate) then return candidate end
    end
    if #ids < size then return nil end
    offset = offset + size
    size = math.min(size * 4, CANDIDATES_BATCH)
  end
end

local id = named
if id ~= '' then
  if not can_host(id) then return refuse('NO_SERVER') end
else
  -- The pool holds ready processes and FleetIQ servers alike; can_host tells them apart. A location named is looked
  -- for among its own processes, in its mirrors of the two sets, however many the fleet has elsewhere. In a fleet
  -- whose processes each host one session at a time, none is hosting with room: that set is not read.
  local hosting, pool = k.hosting, k.pool
  if loc ~= '' then hosting, pool = k.lhosting .. loc, k.lpool .. loc end
  id = (packs and first_host(hosting, '-inf', '+inf')) or first_host(pool, 0, '(' .. score_str(TIERS * TIER_SPAN))
  -- Waiting would not help when every server looked at takes fewer players than the session asks for.
  if not id and looked > 0 and too_small == looked then return refuse('TOO_SMALL') end
  if not id then return refuse('NO_SERVER') end
end

local server_key = k.gs .. id
local deadline = now + set.act_ms
local players = 0
if #ARGV >= 23 then players = (#ARGV - 22) / 2 end
-- Written whole, with its share of the live counts, in one HSET (tally_session). What a search reads of every
-- candidate comes first, after the share: Redis finds a field of a small hash by scanning it from the start.
local record = {'status', S.ACTIVATING, 'cur', int_text(players), 'max', ARGV[4], 'accept', ARGV[9],
  'c_ms', int_text(now), 'name', ARGV[11], 'props', ARGV[12], 'id', sid, 'fleet', ARGV[16], 'loc', server[2] or '',
  'server', id, 'inst', server[1] or '', 'ip', server[11] or '', 'dns', server[12] or '', 'port', server[13] or '0',
  'reason', '', 'act_by_ms', int_text(deadline), 'prot', protected,
  'data', ARGV[13], 'mm', ARGV[14], 'creator', creator, 'placement', ARGV[15], 'notify', ARGV[17],
  'res_ms', int_text(set.res_ms), 'ret_ms', ARGV[5],
  'idem', token, 'digest', ARGV[7], 'np', int_text(players)}
-- The desired players of a placement, RESERVED with it (their reservation timers start at activation), written with
-- the record in its one HSET; the reply shows the record's first `shown` fields alone.
local shown = #record
local listed = {}
for i = 23, #ARGV, 2 do
  local n = (i - 21) / 2
  local v = {n, ARGV[i], S.RESERVED, ARGV[i + 1], now, false, false}
  record[#record + 1], record[#record + 2] = player_field(n), cmsgpack.pack(v)
  record[#record + 1], record[#record + 2] = seat_field(ARGV[i]), int_text(n)
  listed[#listed + 1], listed[#listed + 2] = '0', player_entry(ARGV[i], now, player_session_id(sid, n))
end
if #listed > 0 then redis.call('ZADD', k.players, unpack(listed)) end
redis.call('SADD', server_key .. ':sessions', sid)
open = open + 1
local routing = {server[14], tonumber(server[15] or '0') + 1}
-- It was in the pool when it hosted nothing, in `hosting` when it had room for one more.
if open == 1 then place(k, k.pool, k.lpool, id, nil, server[2]) end
server[3] = S.ACTIVE
track_room(k, id, {S.ACTIVE, server[8], server[2], open}, open - 1)
local pending = {}
-- Its new state and desired-state version are written with its share, in one HSET.
tally_server(k, id, false, server, open, pending, {'pstate', S.ACTIVE, 'ver', int_text(routing[2])})
tally_session(k, sid, {server[2] or '', server[1] or '', S.ACTIVATING, players, max, ARGV[9], false, false, now}, false,
  pending, record)
for i = #record, shown + 1, -1 do record[i] = nil end
tally_instances(k, pending)
add_to_minute(k, server[2] or '', {[4] = 1}, now)
redis.call('ZADD', k.sessions, int_text(now), sid)
redis.call('ZADD', k.due, int_text(deadline), sid)
-- A client's token lives as long as the session's record: the sweep that expires the record deletes it.
if token ~= '' and spend == '' then redis.call('SET', idem, sid) end
if creator ~= '' and limit > 0 then
  redis.call('ZADD', created_by, now, sid)
  redis.call('PEXPIRE', created_by, period)
end
-- A placement served waits nowhere in this fleet any more.
if spend ~= '' and ARGV[22] ~= '1' then
  local waits = k.waits .. ARGV[15]
  local where = redis.call('SMEMBERS', waits)
  for _, name in ipairs(where) do
    if redis.call('ZREM', k.wanting .. name, ARGV[15]) == 1 then redis.call('HDEL', k.wanted .. name, ARGV[15]) end
  end
  if #where > 0 then redis.call('DEL', waits) end
end
-- The only session it hosts: its whole desired state is known, and goes to its replica with the announcement. The
-- caller builds it from this reply (processes::hosting_only), which holds all of it, rather than Redis writing the
-- record out a second time.
if open == 1 then routing[3] = '1' end
return session_reply('CREATED', now, nil, routing, record)
