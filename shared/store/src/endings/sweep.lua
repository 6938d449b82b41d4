-- The health monitor's sweep of one fleet: processes whose heartbeat, ready or ProcessEnding deadline passed are
-- declared lost. Safe with any number of health replicas sweeping: a process is found late once, then retired.
-- KEYS: k.act_due, k.claims, k.ended, k.events, k.fleet, k.hb, k.hosting, k.pool, k.ready, k.res_due, k.servers,
-- k.sevents, k.term, k.term_due, k.unhealthy, k.utilized. ARGV[1] most processes to act on per deadline, ARGV[2] ms,
-- retention ARGV[3] how long Redis has answered the monitor for this fleet, ms: heartbeat deadlines are swept only
-- once that is a whole heartbeat window of the fleet's (after an outage no heartbeat could be recorded, and silence
-- then is not death).
-- Reply: {processes alive, processes reporting UNHEALTHY, then (game-server id, replica, event code) for each process
-- declared lost, so that the replica holding its stream can tell it}; the counts are taken after the sweep, for
-- the health metrics, so that the monitor needs no second round trip.
local now = now_ms()
local limit, retention = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {'', ''}
-- `why(id)` gives the event code, its message, and the status and reason its game sessions end with.
local function sweep(deadlines, why)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', deadlines, '-inf', now, 'LIMIT', 0, limit)) do
    local replica = redis.call('HGET', k.gs .. id, 'replica')
    if replica then
      local code, message, session_status, session_reason = why(id)
      lose(k, id, now, code, message, session_status, session_reason, retention)
      out[#out + 1] = id
      out[#out + 1] = replica
      out[#out + 1] = code
    else
      -- Its record is gone (deregistered by an operator): nothing is left to declare lost.
      retire(k, id)
    end
  end
end
local set = fleet_settings(k)
if set and tonumber(ARGV[3]) >= set.window_ms then
  -- Silent with its stream open is unhealthy (hung); silent with its stream gone, and not back, is crashed.
  sweep(k.hb, function(id)
    if redis.call('HGET', k.gs .. id, 'linked') == '1' then
      return S.SERVER_PROCESS_TERMINATED_UNHEALTHY, 'no heartbeat within the health window over an open stream',
        S.ERROR, S.SERVER_UNHEALTHY
    end
    return S.SERVER_PROCESS_CRASHED, 'stream gone and no heartbeat within the health window', S.ERROR,
      S.SERVER_CRASHED
  end)
end
sweep(k.ready, function()
  return S.SERVER_PROCESS_READY_TIMEOUT, 'not ready within the ready timeout', S.ERROR, S.SERVER_CRASHED
end)
sweep(k.term, function()
  return S.SERVER_PROCESS_FORCE_TERMINATED, 'no ProcessEnding within the termination grace period', S.TERMINATED,
    S.FORCE_TERMINATED
end)
out[1] = tostring(redis.call('ZCARD', k.hb))
out[2] = tostring(redis.call('SCARD', k.unhealthy))
return out
