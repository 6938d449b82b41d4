-- Stops an instance: TERMINATING, killed at now + ARGV[6] if it still runs. With a termination reason, its running
-- processes are told to end (ProcessEnding due within the grace); an event code names what happened to those of
-- its processes that never registered (SERVER_PROCESS_REGISTER_TIMEOUT).
-- KEYS: k.claims, k.events, k.fleet, k.hosting, k.pool, k.ready, k.term, k.utilized. ARGV[1] location, ARGV[2] lease,
-- ARGV[3] instance id, ARGV[4] termination reason ('' to tell none), ARGV[5] grace ms, ARGV[6] ms until it is killed,
-- ARGV[7] event code for each process not registered ('' for none), ARGV[8] its message.
-- Reply: {STOPPING | GONE | FENCED, now_ms, ''} then {game-server id, replica, version} of each process told.
local now = now_ms()
local loc, id = ARGV[1], ARGV[3]
if not holds_lease(k, loc, ARGV[2]) then return {'FENCED', int_text(now), ''} end
local vm = k.vm .. id
local state = redis.call('HGET', vm, 'state')
if not state then return {'GONE', int_text(now), ''} end
local out = {'STOPPING', int_text(now), ''}
if state == S.TERMINATING then return out end
redis.call('HSET', vm, 'state', S.TERMINATING, 'kill_ms', now + tonumber(ARGV[6]))
tally_instance(k, id)
for _, sid in ipairs(instance_servers(vm)) do
  local pstate = redis.call('HGET', k.gs .. sid, 'pstate')
  if ARGV[4] ~= '' and pstate and pstate ~= S.LOST and pstate ~= S.TERMINATING then
    ask_to_end(k, sid, ARGV[4], now + tonumber(ARGV[5]), '0')
    told_process(k, out, sid)
  end
  if ARGV[7] ~= '' and not redis.call('HGET', vm, 'r:' .. sid) then
    fleet_event(k, now, ARGV[7], ARGV[8], {'location', loc, 'instance_id', id, 'game_server_id', sid})
  end
end
return out
