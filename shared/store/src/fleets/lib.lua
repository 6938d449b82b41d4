-- Helpers of the fleet scripts, and of every script that records a fleet event.
--
-- A fleet's record is one hash, k.fleet: cfg (its configuration, the contract's Fleet message as the fleet service
-- encodes it; no script reads it), status, msg (detail of the status), st_ms (when the status last changed), rev
-- (raised by every change of configuration), c_ms, u_ms, locs (its locations' names, home first, separated by
-- spaces), and per location the fields l:<location>:<name> (see loc_field): status, msg, st_ms, min, max,
-- desired (instances), cfg (its standby and instance-type viabilities, as the contract's FleetLocation), susp (1
-- while autoscaling is suspended there), c_ms.
-- Its events are the stream k.events: code, time_ms, message, then those of location, instance_id, game_server_id,
-- game_session_id, prev and new (desired instances) and policy that concern it.

-- Appends a fleet event; `extra` is the flat list of names and values of the fields that concern it.
local function fleet_event(k, now, code, message, extra)
  redis.call('XADD', k.events, 'MAXLEN', '~', 10000, '*', 'code', code, 'time_ms', now, 'message', message,
    unpack(extra or {}))
end

-- The name of a location's field in its fleet's hash.
local function loc_field(loc, name)
  return 'l:' .. loc .. ':' .. name
end

-- The location a request names: itself when the fleet has it, its home location when the name is empty; nil when
-- the fleet has no such location.
local function fleet_location(k, loc)
  local names = redis.call('HGET', k.fleet, 'locs') or ''
  if loc == '' then return string.match(names, '^%S+') end
  for name in string.gmatch(names, '%S+') do
    if name == loc then return name end
  end
  return nil
end
