#!lua name=berth_bench_placement_floor
-- The least one placement's whole life could cost Redis, for the placements scenario's floor: the same 13 function
-- calls as a placement of 4 players measured through the services (start, create with the players' slots, activate,
-- fulfil, 4 accepts, 4 removals, end), each checking what its caller could get wrong, on the layout the issue of the
-- placement core names as the floor: a placement's record is its own idempotency entry, the request travels whole
-- in its stream entry, a game session's players live in its hash, tallies are counters that only go up (one
-- HINCRBY per transition), the server's replica hears of its session by SPUBLISH, and each ended record is
-- compacted into one msgpack value that expires with the retention. Berth's indexes, events other than FULFILLED,
-- limits and compatibility with earlier layouts are left out: this is what the work cannot go below, not a design.
-- Each function reads Redis' clock once, as Berth's do.

local ACTIVATION_MS, RESERVATION_MS = 600000, 60000

-- Whether a player session's values (player, status, created, accepted, ended) hold a slot of its game session.
local function holds_slot(v)
  return v[2] == 'RESERVED' or v[2] == 'ACTIVE'
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- KEYS[1] the placement's record, KEYS[2] the queue's requests. ARGV[1] placement id, ARGV[2] the request (encoded),
-- ARGV[3] timeout ms. Reply: {STARTED, its request's stream entry} | {EXISTING}.
redis.register_function('berth_bench_floor_start', function(keys, args)
  local now = now_ms()
  local deadline = now + tonumber(args[3])
  if not redis.call('SET', keys[1], cmsgpack.pack({'PENDING', now, deadline}), 'NX', 'PX', args[3] + 86400000) then
    return {'EXISTING'}
  end
  return {'STARTED', redis.call('XADD', keys[2], '*', 'id', args[1], 'dl', deadline, 'req', args[2])}
end)

-- KEYS[1] the location's pool, KEYS[2] the game session, KEYS[3] activation deadlines, KEYS[4] the location's
-- tally. ARGV[1] game session id, ARGV[2] placement id, ARGV[3] maximum players, ARGV[4] the placement's deadline
-- ms, then the player ids. Reply: {CREATED, server id, endpoint} | {EXISTING | ABANDONED | NO_SERVER}.
redis.register_function('berth_bench_floor_create', function(keys, args)
  local now = now_ms()
  if now > tonumber(args[4]) then return {'ABANDONED'} end
  if redis.call('EXISTS', keys[2]) == 1 then return {'EXISTING'} end
  local id = redis.call('ZRANGE', keys[1], 0, 0)[1]
  if not id then return {'NO_SERVER'} end
  local server = string.match(keys[1], '^[^}]*}') .. ':gs:' .. id
  local s = redis.call('HMGET', server, 'state', 'health', 'maxp', 'replica', 'ver', 'ip', 'port')
  -- A server in the pool that cannot host this session is taken out of it, and the caller tries again.
  redis.call('ZREM', keys[1], id)
  if s[1] ~= 'READY' or s[2] ~= 'HEALTHY' or tonumber(s[3]) < #args - 4 then return {'NO_SERVER'} end
  local version = tonumber(s[5]) + 1
  redis.call('HSET', server, 'state', 'ACTIVE', 'ver', version)
  local record = {'server', id, 'ver', version, 'status', 'ACTIVATING', 'c_ms', now, 'max', args[3], 'cur', #args - 4,
    'placement', args[2], 'ip', s[6], 'port', s[7]}
  for i = 5, #args do
    record[#record + 1] = 'p' .. (i - 4)
    record[#record + 1] = cmsgpack.pack({args[i], 'RESERVED', now, false, false})
  end
  redis.call('HSET', keys[2], unpack(record))
  redis.call('ZADD', keys[3], now + ACTIVATION_MS, args[1])
  redis.call('HINCRBY', keys[4], 'created', 1)
  redis.call('SPUBLISH', string.match(keys[1], '^[^}]*}') .. ':replica:' .. s[4], args[1])
  return {'CREATED', id, s[6], s[7]}
end)

-- KEYS[1] the game session, KEYS[2] activation deadlines, KEYS[3] reservation deadlines, KEYS[4] the tally. ARGV[1]
-- game session id, ARGV[2] the server asking. Reply: {ACTIVATED | NOT_FOUND | NOT_YOURS | ENDED}.
redis.register_function('berth_bench_floor_activate', function(keys, args)
  local now = now_ms()
  local s = redis.call('HMGET', keys[1], 'server', 'status')
  if not s[1] then return {'NOT_FOUND'} end
  if s[1] ~= args[2] then return {'NOT_YOURS'} end
  if s[2] == 'ACTIVE' then return {'ACTIVATED'} end
  if s[2] ~= 'ACTIVATING' then return {'ENDED'} end
  redis.call('HSET', keys[1], 'status', 'ACTIVE', 'act_ms', now)
  redis.call('ZREM', keys[2], args[1])
  redis.call('ZADD', keys[3], now + RESERVATION_MS, args[1])
  redis.call('HINCRBY', keys[4], 'activated', 1)
  return {'ACTIVATED'}
end)

-- KEYS[1] the placement's record, KEYS[2] the queue's requests, KEYS[3] the queue's events. ARGV[1] placement id,
-- ARGV[2] its request's stream entry, ARGV[3] retention ms, ARGV[4] the request (from its entry), ARGV[5] where it
-- was placed (encoded). Reply: {FULFILLED | NOT_FOUND | ENDED}.
redis.register_function('berth_bench_floor_fulfil', function(keys, args)
  local now = now_ms()
  local packed = redis.call('GET', keys[1])
  if not packed then return {'NOT_FOUND'} end
  local p = cmsgpack.unpack(packed)
  if p[1] ~= 'PENDING' then return {'ENDED'} end
  redis.call('SET', keys[1], cmsgpack.pack({'FULFILLED', p[2], p[3], now, args[4], args[5]}), 'PX', args[3])
  redis.call('XADD', keys[3], '*', 'type', 'FULFILLED', 'id', args[1])
  redis.call('XACK', keys[2], 'workers', args[2])
  redis.call('XDEL', keys[2], args[2])
  return {'FULFILLED'}
end)

-- KEYS[1] the game session. ARGV[1] game session id, ARGV[2] the server asking, ARGV[3] the player session's number.
-- Reply: {ACCEPTED | NOT_FOUND | NOT_YOURS | NOT_ACTIVE | ENDED}.
redis.register_function('berth_bench_floor_accept', function(keys, args)
  local now = now_ms()
  local s = redis.call('HMGET', keys[1], 'server', 'status', 'act_ms', 'p' .. args[3])
  if not s[1] or not s[4] then return {'NOT_FOUND'} end
  if s[1] ~= args[2] then return {'NOT_YOURS'} end
  if s[2] ~= 'ACTIVE' then return {'NOT_ACTIVE'} end
  local v = cmsgpack.unpack(s[4])
  if v[2] == 'ACTIVE' then return {'ACCEPTED'} end
  if v[2] ~= 'RESERVED' or now > tonumber(s[3]) + RESERVATION_MS then return {'ENDED'} end
  v[2], v[4] = 'ACTIVE', now
  redis.call('HSET', keys[1], 'p' .. args[3], cmsgpack.pack(v))
  return {'ACCEPTED'}
end)

-- KEYS[1] the game session, KEYS[2] the tally. ARGV as accept's. Reply: {REMOVED | NOT_FOUND | NOT_YOURS}.
redis.register_function('berth_bench_floor_remove', function(keys, args)
  local now = now_ms()
  local s = redis.call('HMGET', keys[1], 'server', 'cur', 'p' .. args[3])
  if not s[1] or not s[3] then return {'NOT_FOUND'} end
  if s[1] ~= args[2] then return {'NOT_YOURS'} end
  local v = cmsgpack.unpack(s[3])
  if not holds_slot(v) then return {'REMOVED'} end
  v[2], v[5] = 'COMPLETED', now
  redis.call('HSET', keys[1], 'p' .. args[3], cmsgpack.pack(v), 'cur', tonumber(s[2]) - 1)
  redis.call('HINCRBY', keys[2], 'left', 1)
  return {'REMOVED'}
end)

-- KEYS[1] the game session, KEYS[2] its compacted record once ended, KEYS[3] the location's pool, KEYS[4]
-- reservation deadlines, KEYS[5] the tally. ARGV[1] game session id, ARGV[2] the server asking, ARGV[3] retention
-- ms. Reply: {ENDED | NOT_FOUND | NOT_YOURS}.
redis.register_function('berth_bench_floor_end', function(keys, args)
  local now = now_ms()
  local fields = redis.call('HGETALL', keys[1])
  if #fields == 0 then return {'NOT_FOUND'} end
  local r, players = {}, {}
  for i = 1, #fields, 2 do
    local n = string.match(fields[i], '^p(%d+)$')
    if n then players[tonumber(n)] = cmsgpack.unpack(fields[i + 1]) else r[fields[i]] = fields[i + 1] end
  end
  if r.server ~= args[2] then return {'NOT_YOURS'} end
  for _, v in ipairs(players) do
    if holds_slot(v) then v[2], v[5] = 'COMPLETED', now end
  end
  redis.call('SET', keys[2], cmsgpack.pack({r.server, tonumber(r.c_ms), tonumber(r.act_ms or '0'), now, tonumber(r.max),
    r.placement, r.ip, tonumber(r.port), players}), 'PX', args[3])
  redis.call('DEL', keys[1])
  redis.call('ZREM', keys[4], args[1])
  redis.call('ZADD', keys[3], now, r.server)
  redis.call('HSET', string.match(keys[3], '^[^}]*}') .. ':gs:' .. r.server, 'state', 'READY', 'ver', r.ver + 1)
  redis.call('HINCRBY', keys[5], 'ended', 1)
  return {'ENDED'}
end)
