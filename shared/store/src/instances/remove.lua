-- Forgets an instance nothing of which runs any more (event INSTANCE_TERMINATED). Its processes still registered
-- are declared lost at once rather than when their heartbeats lapse: force-terminated when it was being stopped,
-- crashed otherwise; their game sessions end. When it was not being stopped, each of its processes that exited
-- before registering is recorded crashed too, so that a build that cannot start shows as a crash loop.
-- KEYS: k.claims, k.due, k.ended, k.events, k.fleet, k.hb, k.hosting, k.inst_status, k.pool, k.ready, k.servers,
-- k.sevents, k.term, k.term_due, k.unhealthy, k.utilized. ARGV[1] location, ARGV[2] lease,
-- ARGV[3] instance id, ARGV[4] '1' when it was being stopped, ARGV[5] how long a lost process's record stays ms,
-- readable, ARGV[6] how its processes exited, as the provisioner saw it ('' when it cannot tell).
-- Reply: {REMOVED | GONE | FENCED, now_ms, ''} then {game-server id, replica, version} of each process lost.
local now = now_ms()
local loc, id = ARGV[1], ARGV[3]
if not holds_lease(k, loc, ARGV[2]) then return {'FENCED', int_text(now), ''} end
local vm = k.vm .. id
if redis.call('EXISTS', vm) == 0 then return {'GONE', int_text(now), ''} end
local out = {'REMOVED', int_text(now), ''}
local exited = ''
if ARGV[6] ~= '' then exited = ' (' .. ARGV[6] .. ')' end
local code, message, session_reason = S.SERVER_PROCESS_CRASHED, 'its instance stopped running' .. exited,
  S.SERVER_CRASHED
if ARGV[4] == '1' then
  code, message, session_reason = S.SERVER_PROCESS_FORCE_TERMINATED, 'its instance was stopped', S.FORCE_TERMINATED
end
for _, sid in ipairs(instance_servers(vm)) do
  local pstate = redis.call('HGET', k.gs .. sid, 'pstate')
  if pstate and pstate ~= S.LOST then
    lose(k, sid, now, code, message, S.ERROR, session_reason, tonumber(ARGV[5]))
    told_process(k, out, sid)
  elseif ARGV[4] ~= '1' and redis.call('HEXISTS', vm, 'r:' .. sid) == 0 then
    fleet_event(k, now, S.SERVER_PROCESS_CRASHED, 'exited before registering' .. exited,
      {'location', loc, 'instance_id', id, 'game_server_id', sid})
  end
end
redis.call('HDEL', k.inst_status, id)
forget_instance(k, loc, id)
local why = 'its processes exited' .. exited
if ARGV[4] == '1' then why = 'stopped' end
fleet_event(k, now, S.INSTANCE_TERMINATED, why, {'location', loc, 'instance_id', id})
return out
