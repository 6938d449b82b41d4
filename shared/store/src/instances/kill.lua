-- A stopping instance still ran at its kill time and is being killed. Each of its processes that had ended by itself
-- (ProcessEnding) yet did not exit is recorded SERVER_PROCESS_FORCE_TERMINATED, once however often the kill is
-- repeated; processes that never ended have their own events when they are declared lost.
-- KEYS: k.events, k.fleet. ARGV[1] location, ARGV[2] lease, ARGV[3] instance id, ARGV[4] the events' message.
-- Reply: {KILLED | GONE | FENCED, now_ms}.
local now = now_ms()
local loc, id = ARGV[1], ARGV[3]
if not holds_lease(k, loc, ARGV[2]) then return {'FENCED', int_text(now)} end
local vm = k.vm .. id
if redis.call('EXISTS', vm) == 0 then return {'GONE', int_text(now)} end
if redis.call('HSETNX', vm, 'killed_ms', now) == 1 then
  for _, sid in ipairs(instance_servers(vm)) do
    -- Registered, and its record gone: it ended by itself, as a lost process's record stays.
    if redis.call('HEXISTS', vm, 'r:' .. sid) == 1 and redis.call('EXISTS', k.gs .. sid) == 0 then
      fleet_event(k, now, S.SERVER_PROCESS_FORCE_TERMINATED, ARGV[4],
        {'location', loc, 'instance_id', id, 'game_server_id', sid})
    end
  end
end
return {'KILLED', int_text(now)}
