-- A process is ready (StandingBy): it joins the pool and may be given game sessions or be claimed, at the
-- endpoint it registered or, when it only knows its port now, the one it gives. Its location is then DEPLOYED, and
-- its fleet ACTIVE, if they were not yet.
-- KEYS: k.events, k.fleet, k.pool, k.ready. ARGV[1] game-server id, ARGV[2] registration id, ARGV[3] '1' to move its
-- endpoint to ip ARGV[4], dns ARGV[5], port ARGV[6], with connection info ARGV[7].
-- Reply: {READY | LOST, now_ms, replica, version}. Saying ready again is READY and changes nothing.
local now = now_ms()
local key = k.gs .. ARGV[1]
local state = redis.call('HMGET', key, 'reg', 'pstate', 'istatus')
if state[1] ~= ARGV[2] or state[2] == S.LOST then return {S.LOST, int_text(now), '', '0'} end
if state[2] == S.INITIALIZING then
  if ARGV[3] == '1' then redis.call('HSET', key, 'ip', ARGV[4], 'dns', ARGV[5], 'port', ARGV[6], 'conn', ARGV[7]) end
  redis.call('HSET', key, 'pstate', S.STANDING_BY)
  redis.call('ZREM', k.ready, ARGV[1])
  to_pool(k, k.pool, ARGV[1], state[3], now)
  tally_server(k, ARGV[1])
  -- Its start-up runs from its instance's launch when a reconciler launched it, else from its registration.
  local s = redis.call('HMGET', key, 'loc', 'instance', 'reg_ms')
  local loc = s[1] or ''
  local launched = redis.call('HGET', k.vm .. s[2], 'launch_ms') or s[3]
  add_to_minute(k, loc, {[2] = now - tonumber(launched), [3] = 1}, now)
  location_ready(k, now, loc)
end
return process_reply('READY', now, key)
