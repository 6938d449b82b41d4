-- Helpers of the fleet scripts, and of every script that records a fleet event.
--
-- A fleet's record is one hash, k.fleet: cfg (its configuration, the contract's Fleet message as the fleet service
-- encodes it; no script reads it), status, msg (detail of the status), st_ms (when the status last changed), rev
-- (raised by every change of configuration), c_ms, u_ms, ret_ms (how long its events are kept), locs (its
-- locations' names, home first, separated by spaces), lver (the last location version given), mca (its most
-- concurrent game-session activations per instance, 0 for no limit, which its locations' tallies count with: see
-- fleets/tally.lua), multi (1 once a process that hosts more than one game session at a time has registered, 0
-- while none has: a create then looks for no process hosting with room, as there can be none; absent on a fleet an
-- earlier release made until the session sweep tells), and per location the fields l:<location>:<name> (see
-- loc_field): status, msg, st_ms, min, max, desired (instances), cfg (its standby and instance-type viabilities, as
-- the contract's FleetLocation), susp (1 while autoscaling is suspended there), c_ms, ver (raised from lver by every
-- change of its cfg or susp, so that a version is never given twice, even to a location removed and added again),
-- fence (the last lease token of its reconciler, see instances/lib.lua), first_ms (its first launch since it last
-- became DEPLOYING) and seen_ms (when a server last registered there while it was DEPLOYING).
-- Its events are the stream k.events: code, time_ms, message, gone (once an event has been trimmed, see
-- last_trimmed), then those of location, instance_id, game_server_id, game_session_id, prev and new (desired
-- instances) and policy that concern it.

-- The position of the last event trimmed from the fleet's stream, which its latest event carries in `gone` ('' while
-- none has been). Kept in the events themselves because XINFO's max-deleted-entry-id tells only of XDEL, never of a
-- trim, and a key of its own would have to be declared by every function that records an event.
local function last_trimmed(k)
  local last = redis.call('XREVRANGE', k.events, '+', '-', 'COUNT', 1)[1]
  if not last then return '' end
  local fields = last[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'gone' then return fields[i + 1] end
  end
  return ''
end

-- Appends a fleet event; `extra` is the flat list of names and values of the fields that concern it. Events are
-- kept for the fleet's retention (ret_ms in its record), older ones trimmed here; a fleet whose record is gone
-- keeps its last 10,000. Trims are exact, and the event appended
-- after one carries the last position trimmed (see last_trimmed): a watcher whose position is before it missed an
-- event.
local function fleet_event(k, now, code, message, extra)
  local retention = redis.call('HGET', k.fleet, 'ret_ms')
  local gone = last_trimmed(k)
  if retention then
    local cutoff = now - tonumber(retention)
    local first = redis.call('XRANGE', k.events, '-', '+', 'COUNT', 1)[1]
    -- XREVRANGE walks the whole stream when nothing lies below its end, so it runs only when something does.
    if first and tonumber(string.match(first[1], '^(%d+)')) < cutoff then
      gone = redis.call('XREVRANGE', k.events, '(' .. cutoff .. '-0', '-', 'COUNT', 1)[1][1]
      redis.call('XTRIM', k.events, 'MINID', cutoff)
    end
  elseif redis.call('XLEN', k.events) >= 10000 then
    -- Cut to one more than leaves room for this event first: the oldest left is then the last to go.
    redis.call('XTRIM', k.events, 'MAXLEN', 10000)
    gone = redis.call('XRANGE', k.events, '-', '+', 'COUNT', 1)[1][1]
    redis.call('XTRIM', k.events, 'MAXLEN', 9999)
  end
  local args = {k.events, '*', 'code', code, 'time_ms', now, 'message', message}
  if gone ~= '' then
    args[#args + 1] = 'gone'
    args[#args + 1] = gone
  end
  for _, value in ipairs(extra or {}) do args[#args + 1] = value end
  redis.call('XADD', unpack(args))
end

-- The fleet's settings (its record's field set, written from berth_domain::fleet::settings with its
-- configuration): act_ms (game-session activation), res_ms (player-session reservation), creator_n and creator_ms
-- (the creator limit and its period; 0: none), protect (1 when new sessions are protected), hb_ms (heartbeat
-- period), unhealthy_after (periods a process may be silent or UNHEALTHY), window_ms (their product), ready_ms,
-- grace_ms (from being told to terminate to ProcessEnding), exit_ms (from ProcessEnding to exit), and text, the
-- field as kept (`text`: the field when the caller has read it). nil for a fleet without a record.
local function fleet_settings(k, text)
  text = text or redis.call('HGET', k.fleet, 'set')
  if not text then return nil end
  local n = {}
  for number in string.gmatch(text, '%d+') do n[#n + 1] = tonumber(number) end
  return {act_ms = n[1], res_ms = n[2], creator_n = n[3], creator_ms = n[4], protect = n[5], hb_ms = n[6],
    unhealthy_after = n[7], window_ms = n[6] * n[7], ready_ms = n[8], grace_ms = n[9], exit_ms = n[10], text = text}
end

-- How long a process told to end has for its ProcessEnding: the fleet's termination grace; none once the fleet's
-- record is gone.
local function termination_grace_ms(k)
  local set = fleet_settings(k)
  if set then return set.grace_ms end
  return 0
end

-- The name of a location's field in its fleet's hash.
local function loc_field(loc, name)
  return 'l:' .. loc .. ':' .. name
end

-- Sets a location DEPLOYING (from INITIALIZED or UNHEALTHY) with its event; `why` says what set it going.
local function location_deploying(k, now, loc, why)
  redis.call('HSET', k.fleet, loc_field(loc, 'status'), S.DEPLOYING, loc_field(loc, 'msg'), '',
    loc_field(loc, 'st_ms'), now)
  fleet_event(k, now, S.LOCATION_DEPLOYING, why, {'location', loc})
end

-- The location a request names: itself when the fleet has it, its home location when the name is empty; nil when
-- the fleet has no such location. `names`: the fleet's field locs, when the caller has read it.
local function fleet_location(k, loc, names)
  names = names or redis.call('HGET', k.fleet, 'locs') or ''
  if loc == '' then return string.match(names, '^%S+') end
  for name in string.gmatch(names, '%S+') do
    if name == loc then return name end
  end
  return nil
end

-- Writes a new location from six arguments of `args` from `at` on: its name, minimum, maximum and desired
-- instances, its encoded standby and viabilities, and 1 when it has standby servers. It starts INITIALIZED, or
-- DEPLOYING when given desired instances or standby servers; each step is an event. Answers its name, for the
-- caller to list it.
local function add_location(k, now, args, at)
  local loc = args[at]
  local deploying = tonumber(args[at + 3]) > 0 or args[at + 5] == '1'
  local status = S.INITIALIZED
  if deploying then status = S.DEPLOYING end
  local values = {status = status, msg = '', st_ms = now, min = args[at + 1], max = args[at + 2],
    desired = args[at + 3], cfg = args[at + 4], susp = 0, c_ms = now, ver = redis.call('HINCRBY', k.fleet, 'lver', 1)}
  local fields = {}
  for name, value in pairs(values) do
    fields[#fields + 1] = loc_field(loc, name)
    fields[#fields + 1] = value
  end
  redis.call('HSET', k.fleet, unpack(fields))
  redis.call('HSET', k.tally .. loc, 'mca', redis.call('HGET', k.fleet, 'mca') or 0)
  fleet_event(k, now, S.LOCATION_ADDED, '', {'location', loc})
  if deploying then fleet_event(k, now, S.LOCATION_DEPLOYING, 'given capacity or standby', {'location', loc}) end
  return loc
end

-- Why a fleet refuses a new process in location `loc` ('' for the home location), as {outcome, detail}: NO_FLEET
-- (the fleet does not exist), NO_LOCATION (it has no such location) or DELETING (the fleet, or the location, is being
-- deleted or was); nil when it takes it.
local function refusal(k, loc)
  local status = redis.call('HGET', k.fleet, 'status')
  if not status then return {'NO_FLEET', 'no such fleet'} end
  if status == S.DELETING or status == S.TERMINATED then return {S.DELETING, 'the fleet is ' .. status} end
  local known = fleet_location(k, loc)
  if not known then return {'NO_LOCATION', 'the fleet has no location ' .. loc} end
  if redis.call('HGET', k.fleet, loc_field(known, 'status')) == S.DELETING then
    return {S.DELETING, 'location ' .. known .. ' is DELETING'}
  end
  return nil
end

-- A server became ready in location `loc` of the fleet: the build works there. A location not yet DEPLOYED (nor
-- being deleted) becomes DEPLOYED (event LOCATION_DEPLOYED), and a fleet NEW or ACTIVATING becomes ACTIVE (event
-- FLEET_ACTIVE) with its first deployed location. A fleet without a record has no statuses to move.
local function location_ready(k, now, loc)
  local status = redis.call('HGET', k.fleet, 'status')
  local known = status and fleet_location(k, loc)
  if not known then return end
  local field = loc_field(known, 'status')
  local current = redis.call('HGET', k.fleet, field)
  if current == S.INITIALIZED or current == S.DEPLOYING or current == S.UNHEALTHY then
    redis.call('HSET', k.fleet, field, S.DEPLOYED, loc_field(known, 'msg'), '', loc_field(known, 'st_ms'), now)
    fleet_event(k, now, S.LOCATION_DEPLOYED, 'a server became ready', {'location', known})
  end
  if status == S.NEW or status == S.ACTIVATING then
    redis.call('HSET', k.fleet, 'status', S.ACTIVE, 'msg', '', 'st_ms', now)
    fleet_event(k, now, S.FLEET_ACTIVE, 'a server became ready in ' .. known)
  end
end

-- Why a fleet takes no new game session in location `loc` ('' for any of its locations), as {outcome, detail}:
-- NO_FLEET (it does not exist), NO_LOCATION (it has no such location) or NOT_ACTIVE (the fleet is not ACTIVE, or
-- the location not DEPLOYED); nil when it takes one. With no location named, the sessions go to ready servers, and
-- a server's being ready made its location DEPLOYED: only a location being deleted has none left to host. When it
-- takes one, answers nil, the fleet's settings (fleet_settings), read with the rest in one call, and whether a
-- process of the fleet may host sessions with room for another (its field multi).
local function session_refusal(k, loc)
  local f = redis.call('HMGET', k.fleet, 'status', 'set', 'locs', loc_field(loc, 'status'), 'multi')
  if not f[1] then return {'NO_FLEET', 'no such fleet'} end
  if f[1] ~= S.ACTIVE then return {'NOT_ACTIVE', 'the fleet is ' .. f[1]} end
  if loc ~= '' then
    if not fleet_location(k, loc, f[3] or '') then return {'NO_LOCATION', 'the fleet has no location ' .. loc} end
    if f[4] ~= S.DEPLOYED then return {'NOT_ACTIVE', 'location ' .. loc .. ' is ' .. tostring(f[4])} end
  end
  return nil, fleet_settings(k, f[2]), f[5] ~= '0'
end

-- A process of instance `instance` registered in location `loc` ('' for the home location): the instance's record,
-- when a reconciler keeps one and launched that server, notes when it first registered, and a DEPLOYING location
-- notes that it heard from a server (its first-heartbeat deadline is met).
local function process_registered(k, now, instance, id, loc)
  local vm = k.vm .. instance
  local launched = ' ' .. (redis.call('HGET', vm, 'servers') or '') .. ' '
  if string.find(launched, ' ' .. id .. ' ', 1, true) and redis.call('HSETNX', vm, 'r:' .. id, now) == 1 then
    redis.call('HINCRBY', vm, 'unreg', -1)
    -- The instance's aggregate, once it has one, keeps a copy of unreg for its share (tally_instance).
    local tallied = k.itally .. instance
    if redis.call('HEXISTS', tallied, 'vst') == 1 then redis.call('HINCRBY', tallied, 'vun', -1) end
  end
  local known = redis.call('EXISTS', k.fleet) == 1 and fleet_location(k, loc)
  if known and redis.call('HGET', k.fleet, loc_field(known, 'status')) == S.DEPLOYING then
    redis.call('HSET', k.fleet, loc_field(known, 'seen_ms'), now)
  end
end
