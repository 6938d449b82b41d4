-- Registers a process that opened its stream, or resumes one whose stream broke.
-- KEYS: k.events, k.fleet, k.hb, k.inst_status, k.ready, k.servers.
-- ARGV[1] game-server id, ARGV[2] instance id, ARGV[3] new registration id, ARGV[4] registration id to resume
-- ('' for a new registration), ARGV[5] replica id, ARGV[6] the deployment's initial delay ms (the first heartbeat
-- is due that long plus the fleet's heartbeat window after registering), ARGV[7] the process's attempt number for
-- this stream (0: not counted), ARGV[8..] field/value pairs of the registration (conn, data, loc, ip, dns, port,
-- max_sess, max_players, sdkv, labels, ports). The heartbeat window and the ready deadline are the fleet's
-- (fleet_settings).
-- Reply: {REGISTERED | RESUMED | STALE | EXISTS | LOST | UNKNOWN | NO_FLEET | NO_LOCATION | DELETING, now_ms,
-- fields...};
-- REGISTERED's and RESUMED's fields end with the pair 'settings', the fleet's settings the process is told, and
-- RESUMED's with the pair 'superseded', the replica that held the stream it replaces. STALE: the registration took
-- a higher attempt already; this one is a try the process gave up on that reached Redis late (a Redis held past
-- its callers' timeouts runs what waited in any order), and taking it would cut off the newer stream. EXISTS: the
-- id has a live registration (resume it, or wait until it is declared lost). LOST: the registration to resume was
-- declared lost or ended. UNKNOWN: no such registration. NO_FLEET: the fleet does not exist. NO_LOCATION,
-- DELETING: the fleet refuses a new process there (the pair 'detail' says why; event
-- SERVER_PROCESS_REGISTRATION_REJECTED).
local now = now_ms()
local id = ARGV[1]
local key = k.gs .. id
local current = redis.call('HMGET', key, 'reg', 'pstate', 'try')
local attempt = tonumber(ARGV[7])
local set = fleet_settings(k)

-- A reply that tells the process its fleet's settings.
local function told(outcome)
  local out = reply(outcome, now, key)
  out[#out + 1] = 'settings'
  out[#out + 1] = set.text
  return out
end

if ARGV[4] ~= '' then
  if current[1] ~= ARGV[4] then return reply('UNKNOWN', now) end
  if current[2] == S.LOST or not redis.call('ZSCORE', k.hb, id) then return reply(S.LOST, now, key) end
  if not set then return {'NO_FLEET', int_text(now), 'detail', 'no such fleet'} end
  if attempt > 0 then
    -- The same number again is the same try run twice (a client library re-sending after a dropped connection).
    if attempt < tonumber(current[3] or '0') then return reply('STALE', now) end
    redis.call('HSET', key, 'try', attempt)
  end
  local superseded = redis.call('HGET', key, 'replica')
  redis.call('HSET', key, 'replica', ARGV[5], 'linked', 1)
  redis.call('HINCRBY', key, 'attach', 1)
  -- Coming back counts as a heartbeat: the process must not be swept before its first one on the new stream.
  redis.call('ZADD', k.hb, 'XX', now + set.window_ms, id)
  local out = told('RESUMED')
  out[#out + 1] = 'superseded'
  out[#out + 1] = superseded
  return out
end
if redis.call('EXISTS', key) == 1 then
  if current[2] ~= S.LOST then return reply('EXISTS', now, key) end
  redis.call('DEL', key, key .. ':sessions')
end
local loc, max_sess = '', 1
for i = 8, #ARGV, 2 do
  if ARGV[i] == 'loc' then loc = ARGV[i + 1] end
  if ARGV[i] == 'max_sess' then max_sess = tonumber(ARGV[i + 1]) end
end
local refused = refusal(k, loc)
if refused then
  if refused[1] ~= 'NO_FLEET' then
    fleet_event(k, now, S.SERVER_PROCESS_REGISTRATION_REJECTED, refused[2], {'game_server_id', id, 'location', loc,
      'instance_id', ARGV[2]})
  end
  return {refused[1], int_text(now), 'detail', refused[2]}
end
local istatus = redis.call('HGET', k.inst_status, ARGV[2]) or S.ACTIVE
redis.call('HSET', key, 'id', id, 'instance', ARGV[2], 'util', S.AVAILABLE, 'istatus', istatus, 'reg_ms', now,
  'reg', ARGV[3], 'pstate', S.INITIALIZING, 'replica', ARGV[5], 'attach', 1, 'linked', 1, 'ver', 0,
  'health', S.HEALTHY, 'unh', 0, 'try', attempt)
for i = 8, #ARGV, 2 do redis.call('HSET', key, ARGV[i], ARGV[i + 1]) end
redis.call('ZADD', k.servers, 0, id)
-- A fleet's sessions may now pack onto processes hosting others (see session_refusal).
if max_sess > 1 then redis.call('HSET', k.fleet, 'multi', 1) end
redis.call('SADD', k.inst .. ARGV[2], id)
redis.call('ZADD', k.hb, now + tonumber(ARGV[6]) + set.window_ms, id)
redis.call('ZADD', k.ready, now + set.ready_ms, id)
process_registered(k, now, ARGV[2], id, loc)
tally_server(k, id)
return told('REGISTERED')
