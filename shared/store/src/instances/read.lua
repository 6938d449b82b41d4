-- Reads what a location's reconciler decides from: the location's deployment times, and each of its instances with
-- what its servers are doing.
-- KEYS: k.fleet. ARGV[1] location.
-- Reply: {now_ms, first launch ms since the location's last change of status ('' for none), last registration ms ('' for none), instances}; each instance
-- {id, type, state, launch_ms, kill_ms, handle, servers}; each server {id, registration ms ('' for none), process
-- state ('' when not registered), game sessions hosted, 1 when claimed or UTILIZED, 1 when one of its game
-- sessions has FULL_PROTECTION}.
local now = now_ms()
local loc = ARGV[1]
local l = redis.call('HMGET', k.fleet, loc_field(loc, 'first_ms'), loc_field(loc, 'seen_ms'), loc_field(loc, 'st_ms'))
-- A first launch before the location's last change of status belongs to an earlier deployment.
local first = l[1]
if first and l[3] and tonumber(first) < tonumber(l[3]) then first = nil end
local out = {int_text(now), first or '', l[2] or '', {}}
for _, id in ipairs(redis.call('ZRANGE', k.vms .. loc, 0, -1)) do
  local vm = k.vm .. id
  local r = redis.call('HMGET', vm, 'type', 'state', 'launch_ms', 'kill_ms', 'handle')
  local servers = {}
  for _, sid in ipairs(instance_servers(vm)) do
    local key = k.gs .. sid
    local s = redis.call('HMGET', key, 'pstate', 'util', 'claim_exp_ms')
    local held, protected = 0, 0
    if s[2] == S.UTILIZED or s[3] then held = 1 end
    local sessions = redis.call('SMEMBERS', key .. ':sessions')
    for _, gid in ipairs(sessions) do
      if redis.call('HGET', k.gsess .. gid, 'prot') == '1' then protected = 1 end
    end
    servers[#servers + 1] = {sid, redis.call('HGET', vm, 'r:' .. sid) or '', s[1] or '', #sessions, held, protected}
  end
  out[4][#out[4] + 1] = {id, r[1] or '', r[2] or '', r[3] or '0', r[4] or '', r[5] or '', servers}
end
return out
