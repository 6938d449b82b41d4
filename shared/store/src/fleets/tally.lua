-- Live counts of a fleet's locations, for GetFleetUtilization: part of the fleets area (loaded after its other
-- helpers), below every area whose scripts change a game server, an instance or a game session and keep the
-- counts as they go; the utilization area above them only reads them.
--
-- Each location has counts that the scripts changing states keep true as they go, so that reading them costs the
-- same with 20 servers or 20,000: a string k.counts .. <location> of 64-bit slots (berth_store::keys::counts gives
-- their places, COUNT_SLOT), which a call moves in one BITFIELD, on top of what an earlier release counted in the
-- location's hash k.tally .. <location> (which also keeps the location's mca, below). A record keeps its share of
-- the counts in its field tly: after any change the share is computed afresh and, when it differs from the one
-- kept, the counts that differ move. A change a script forgets to tally thus shows as a count that differs from a
-- recount, never as drift that adds up. A share is a short string, '<instance>|<location>|<what the record is>',
-- rather than a list of counts: building and parsing strings is most of what a tally costs in Lua, and a claim pays
-- for it. Replies and events leave tly out (append_fields, session_event): it is the store's own bookkeeping.
--
-- The counts: gs_launching, gs_available, gs_utilized, gs_draining_available,
-- gs_draining_utilized, gs_terminating, gs_unhealthy (game servers); slots_free, slots_unhealthy (game-session slots
-- free on ready, unclaimed, AVAILABLE processes, healthy or not); i_pending, i_active, i_idle, i_draining,
-- i_terminating, activatable (instances, and the sessions they could begin activating now); s_activating, s_active,
-- p_open, p_other, seats (game sessions, and player slots: see session_counts), players, players_free (player slots
-- as an earlier release counted them); lost (servers gone without being told to end, ever: the
-- autoscaler compares it with what it saw last); mca (the fleet's most concurrent activations per
-- instance, 0 for no limit, written by the fleet scripts, in the hash); hungry (until when, ms, the location is marked
-- as where a placement found no server: see announce_capacity); and per minute of the last hour, a window w<minute
-- mod 60> of the minute, ms to ready summed, processes ready, game sessions created and servers lost to interruptions
-- (WINDOW_SLOTS slots from WINDOW_BASE + its number's; the hash of an earlier release kept it as one field,
-- '<minute>|<…>|<…>|<…>|<…>').
-- FleetIQ servers carry no location: theirs are the counts of location '', which a read adds to the home location.
--
-- Servers and sessions also count in their instance's aggregate, k.itally .. <instance>: loc, n (its servers),
-- ready, busy, free (healthy free slots), ending (its servers told to terminate), draining and spot (servers told
-- their instance is DRAINING or SPOT_TERMINATING), act (its game sessions ACTIVATING), tly, the instance's own
-- share of its location's counts, and vloc, vst, vun and vmca, a copy of its record's loc, state and unreg and of
-- its location's mca (see tally_instance).

-- Whether a game session could take a player now, from its {status, accept, cur, max, srv_end}: the rule of
-- GameSessionRecord::has_available_player_sessions, which the `free` search index follows too.
local function takes_players(status, accept, cur, max, srv_end)
  return status == S.ACTIVE and accept == '1' and srv_end ~= '1' and tonumber(cur) < tonumber(max)
end

local function count(counts, field, n)
  if n ~= 0 then counts[field] = (counts[field] or 0) + n end
end

-- The counts of an instance its share reads as more than zero or not (the others, it reads whole).
local THRESHOLD = {ready = true, busy = true, draining = true, spot = true}

-- Adds `sign` times a share's counts to `moves`, grouped by the place they go ('<instance>|<location>'), through
-- `counts(what, sign, location counts, instance counts)` of the record's kind.
local function add_share(moves, share, sign, counts)
  local bar = string.find(share, '|', 1, true)
  local place_end = string.find(share, '|', bar + 1, true)
  local place = string.sub(share, 1, place_end - 1)
  local move = moves[place]
  if not move then
    move = {string.sub(share, 1, bar - 1), string.sub(share, bar + 1, place_end - 1), {}, {}}
    moves[place] = move
  end
  counts(string.sub(share, place_end + 1), sign, move[3], move[4])
end

-- Adds `n` to count `field` of the counts string `key`, or, `n` a table (n by place), to the window `field` (see
-- add_to_minute). What a function call moves is written once, when it returns (flush_counts): a placement's create
-- moves eight counts of its location, which one BITFIELD writes rather than eight HINCRBY.
local function add_count(key, field, n)
  if n == 0 then return end
  local counts = moved[key]
  if not counts then
    counts = {}
    moved[key] = counts
  end
  local was = counts[field]
  if type(n) ~= 'table' then
    counts[field] = (was or 0) + n
    return
  end
  was = was or {n[1], {}}
  for at, added in pairs(n[2]) do was[2][at] = (was[2][at] or 0) + added end
  counts[field] = was
end

-- A server joined the pool or the hosting set in location `loc`. Where a placement lately found no server (the
-- location's counts hold hungry, the ms until when: mark_hungry in pool/lib.lua), flush_counts announces it on
-- CAPACITY_CHANNEL, so that waiting placements try again at once, and clears the mark. The mark is read in the
-- command that moves the location's counts: a server joining costs no command of its own for a mark mostly not
-- there.
local function announce_capacity(k, loc)
  joined[k.counts .. loc] = fleet_id(k) .. '\n' .. loc
end

-- Writes what add_count gathered, a location's in one BITFIELD that reads nothing first: its counts moved by
-- INCRBY; a window's minute read (GET) before its sums move, the window started afresh should it hold another
-- minute (an hour ago's, or none); the hunger mark read (GET) where a server joined (announce_capacity), announced
-- and cleared unless it lapsed.
local function flush_counts()
  for key in pairs(joined) do moved[key] = moved[key] or {} end
  for key, counts in pairs(moved) do
    local ops, replies, windows = {}, 0, nil
    local announcement = joined[key]
    if announcement then ops[1], ops[2], ops[3], replies = 'GET', 'i64', COUNT_SLOT.hungry, 1 end
    for field, n in pairs(counts) do
      local at = #ops
      if type(n) ~= 'table' then
        if n ~= 0 then
          ops[at + 1], ops[at + 2], ops[at + 3], ops[at + 4] = 'INCRBY', 'i64', COUNT_SLOT[field], int_text(n)
          replies = replies + 1
        end
      else
        local base = WINDOW_BASE + tonumber(string.sub(field, 2)) * WINDOW_SLOTS
        ops[at + 1], ops[at + 2], ops[at + 3] = 'GET', 'i64', WINDOW_SLOT[base]
        replies = replies + 1
        windows = windows or {}
        windows[#windows + 1] = {replies, base, n}
        for place, added in pairs(n[2]) do
          at = #ops
          ops[at + 1], ops[at + 2], ops[at + 3], ops[at + 4] = 'INCRBY', 'i64', WINDOW_SLOT[base + place - 1],
            int_text(added)
          replies = replies + 1
        end
      end
    end
    if replies > 0 then
      local got = redis.call('BITFIELD', key, unpack(ops))
      local again = {}
      if announcement and got[1] > now_ms() then
        redis.call('PUBLISH', CAPACITY_CHANNEL, announcement)
        extend(again, {'SET', 'i64', COUNT_SLOT.hungry, '0'})
      end
      for _, w in ipairs(windows or {}) do
        local at, base, n = w[1], w[2], w[3]
        if got[at] ~= n[1] then
          extend(again, {'SET', 'i64', WINDOW_SLOT[base], int_text(n[1])})
          for place = 2, WINDOW_SLOTS do
            extend(again, {'SET', 'i64', WINDOW_SLOT[base + place - 1], int_text(n[2][place] or 0)})
          end
        end
      end
      if #again > 0 then redis.call('BITFIELD', key, unpack(again)) end
    end
  end
  moved, joined = {}, {}
end

-- Replaces the share `old` kept in field tly of `key` with `share` (either nil: none, the record is new, gone or
-- ended), moving only the counts that differ; `key` nil for a record about to be deleted, which keeps no share.
-- `also`, fields of the record (name, value, ...) its caller changed, are written in the HSET of the share when there
-- is one to write, else in one of their own.
-- Answers how the aggregates of instances move, {instance id = {field = n}}, for tally_instances to write with their
-- shares.
local function move_share(k, key, old, share, counts, also)
  local changed = {}
  also = also or {}
  if old == share or not share then
    if key and #also > 0 then redis.call('HSET', key, unpack(also)) end
    if old == share then return changed end
  end
  local moves = {}
  if old then add_share(moves, old, -1, counts) end
  if share then add_share(moves, share, 1, counts) end
  for _, move in pairs(moves) do
    for field, n in pairs(move[3]) do add_count(k.counts .. move[2], field, n) end
    for field, n in pairs(move[4]) do
      if n ~= 0 then
        changed[move[1]] = changed[move[1]] or {}
        changed[move[1]][field] = n
      end
    end
  end
  if share then
    redis.call('HSET', key, 'tly', share, unpack(also))
  elseif key then
    redis.call('HDEL', key, 'tly')
  end
  return changed
end

-- Adds `added` (n by place: 2 ms to ready, 3 processes ready, 4 sessions created, 5 servers interrupted) to the
-- current minute of a location's last hour, w<minute mod 60> (written with the counts, see add_count).
local function add_to_minute(k, loc, added, now)
  local minute = math.floor(now / 60000)
  add_count(k.counts .. loc, 'w' .. int_text(minute % 60), {minute, added})
end

-- What an instance's share says, '<state><idle 0 | 1><draining 0 | 1><activatable>,<launching>': its state (0
-- pending, 1 active, 2 terminating); idle and draining when active; the sessions it could begin activating now; its
-- launched processes that never registered.
local function instance_counts(what, sign, l)
  local state, comma = string.sub(what, 1, 1), string.find(what, ',', 4, true)
  if state == '0' then
    count(l, 'i_pending', sign)
  elseif state == '2' then
    count(l, 'i_terminating', sign)
  else
    count(l, 'i_active', sign)
    if string.sub(what, 2, 2) == '1' then count(l, 'i_idle', sign) end
    if string.sub(what, 3, 3) == '1' then count(l, 'i_draining', sign) end
    count(l, 'activatable', sign * tonumber(string.sub(what, 4, comma - 1)))
  end
  count(l, 'gs_launching', sign * tonumber(string.sub(what, comma + 1)))
end

-- An instance's share, from its aggregate `a` (HMGET below), `vm`, its record's {loc, state, unreg} (false when
-- a reconciler keeps none), and `limit`, its location's most concurrent activations (mca): terminating when being
-- stopped or interrupted or when every server of it was told to end, else active once a server is ready, else
-- pending.
local function instance_share(id, a, vm, limit)
  local n = tonumber(a[2] or '0')
  if not vm[2] and n <= 0 then return nil end
  local loc = vm[1] or a[1] or ''
  local ready, busy, free = tonumber(a[3] or '0'), tonumber(a[4] or '0'), tonumber(a[5] or '0')
  local what = '0000'
  if vm[2] == S.TERMINATING or tonumber(a[8] or '0') > 0 or (n > 0 and tonumber(a[9] or '0') == n) then
    what = '2000'
  elseif ready > 0 then
    local draining = (vm[2] == S.DRAINING or tonumber(a[7] or '0') > 0) and '1' or '0'
    if free > 0 and limit > 0 then free = math.min(free, math.max(limit - tonumber(a[6] or '0'), 0)) end
    what = '1' .. (busy == 0 and '1' or '0') .. draining .. int_text(free)
  end
  local launching = 0
  if vm[2] and vm[2] ~= S.TERMINATING then launching = tonumber(vm[3] or '0') end
  return id .. '|' .. loc .. '|' .. what .. ',' .. int_text(launching)
end

-- The fields of an instance's aggregate its share is made of, in the order instance_share reads them, then its copy
-- of what the share takes from the instance's record (see tally_instance).
local INSTANCE_TALLIED = {'loc', 'n', 'ready', 'busy', 'free', 'act', 'draining', 'spot', 'ending', 'tly', 'vloc',
  'vst', 'vun', 'vmca'}

-- Brings an instance's share up to date after its aggregate moved by `deltas` ({field = n}, written here with the
-- share; nil when its record or its fleet's activation limit changed: every script that changes either calls this
-- so); its aggregate goes once nothing of it is left. One count it reads as zero or not moving alone is an HINCRBY,
-- whose answer tells whether the share can have changed (most changes of a server, a claim among them, leave it as
-- it was).
-- The aggregate keeps a copy of what the share takes from elsewhere, vloc, vst and vun (its record's loc, state and
-- unreg; vst '' when a reconciler keeps no record) and vmca (its location's mca), read afresh when they changed or
-- the copy is missing, so that the changes of its servers and sessions (a placement's create, activation and end)
-- read one hash. A launched server's registration moves vun with unreg (process_registered).
local function tally_instance(k, id, deltas)
  local key = k.itally .. id
  local changed_record = not deltas
  deltas = deltas or {}
  local only = next(deltas)
  if only and THRESHOLD[only] and next(deltas, only) == nil then
    local n = deltas[only]
    local now = redis.call('HINCRBY', key, only, int_text(n))
    if now ~= 0 and now ~= n then return end
    deltas = {}
  end
  -- Sessions beginning or ending their activation move the share only under an activation limit (instance_share reads
  -- act for nothing else): with none, as for a session's activation, the count is all that moves.
  if only == 'act' and next(deltas, only) == nil and redis.call('HGET', key, 'vmca') == '0' then
    redis.call('HINCRBY', key, 'act', int_text(deltas.act))
    return
  end
  local a = redis.call('HMGET', key, unpack(INSTANCE_TALLIED))
  local also = {}
  for i, field in ipairs(INSTANCE_TALLIED) do
    local n = deltas[field]
    if n and n ~= 0 then
      a[i] = tonumber(a[i] or '0') + n
      also[#also + 1], also[#also + 2] = field, int_text(a[i])
    end
  end
  local vm, limit = {a[11], a[12], a[13]}, a[14]
  if changed_record or not vm[2] or not limit then
    vm = redis.call('HMGET', k.vm .. id, 'loc', 'state', 'unreg')
    limit = redis.call('HGET', k.tally .. (vm[1] or a[1] or ''), 'mca') or 0
    extend(also, {'vloc', vm[1] or '', 'vst', vm[2] or '', 'vun', vm[3] or 0, 'vmca', limit})
  elseif vm[2] == '' then
    vm = {false, false, false}
  end
  local share = instance_share(id, a, vm, tonumber(limit))
  move_share(k, share and key, a[10] or nil, share, instance_counts, also)
  if not share then redis.call('DEL', key) end
end

-- Brings the shares of the instances whose aggregates `changed` moves up to date (see move_share), or, when the
-- caller gathers them to do so once for several changes (`pending`), adds the moves to it: an instance's share is
-- computed from its aggregate as it stands, so once after the last change is as true as once after each.
local function tally_instances(k, changed, pending)
  for id, deltas in pairs(changed) do
    if pending then
      local into = pending[id] or {}
      pending[id] = into
      for field, n in pairs(deltas) do into[field] = (into[field] or 0) + n end
    else
      tally_instance(k, id, deltas)
    end
  end
end

-- A server's state in its share, by number: launching, available, utilized, draining available, draining
-- utilized, terminating.
local SERVER_STATES = {'gs_launching', 'gs_available', 'gs_utilized', 'gs_draining_available', 'gs_draining_utilized',
  'gs_terminating'}

-- What a server's share says, '<state><unhealthy 0 | 1><its instance's status: 0, 1 (DRAINING) or 2
-- (SPOT_TERMINATING)><free game-session slots>'.
local function server_counts(what, sign, l, i)
  local state, unhealthy, istatus = tonumber(string.sub(what, 1, 1)), string.sub(what, 2, 2), string.sub(what, 3, 3)
  local free = sign * tonumber(string.sub(what, 4))
  count(l, SERVER_STATES[state], sign)
  if unhealthy == '1' then
    count(l, 'gs_unhealthy', sign)
    count(l, 'slots_unhealthy', free)
  else
    count(l, 'slots_free', free)
    count(i, 'free', free)
  end
  count(i, 'n', sign)
  if state >= 2 and state <= 5 then count(i, 'ready', sign) end
  if state == 3 or state == 5 then count(i, 'busy', sign) end
  if state == 6 then count(i, 'ending', sign) end
  if istatus == '1' then count(i, 'draining', sign) elseif istatus == '2' then count(i, 'spot', sign) end
end

-- A server's share, from its fields `s` (HMGET below) and `open`, the sessions it hosts (nil: counted here).
local function server_share(key, s, open)
  local state, free = 6, 0
  if s[3] == S.INITIALIZING then
    state = 1
  elseif s[3] ~= S.TERMINATING and s[6] ~= S.SPOT_TERMINATING then
    local claimed = s[4] == S.UTILIZED or s[5]
    state = (claimed or s[3] == S.ACTIVE) and 3 or 2
    if s[6] == S.DRAINING then state = state + 2 end
    if s[8] and not claimed then free = tonumber(s[8]) - (open or redis.call('SCARD', key .. ':sessions')) end
  end
  local istatus = '0'
  if s[6] == S.DRAINING then istatus = '1' elseif s[6] == S.SPOT_TERMINATING then istatus = '2' end
  return s[1] .. '|' .. (s[2] or '') .. '|' .. int_text(state) .. (s[7] == S.UNHEALTHY and '1' or '0') .. istatus ..
    int_text(free)
end

-- The fields of a game server its share is made of, in the order server_share reads them.
local SERVER_TALLIED = {'instance', 'loc', 'pstate', 'util', 'claim_exp_ms', 'istatus', 'health', 'max_sess', 'tly'}

-- Brings a game server's share up to date after a change; `going` when its record is about to be deleted. A caller
-- that holds the server's fields as they are now passes them as `known` (SERVER_TALLIED's, by position) and the
-- sessions it hosts as `open`; `pending` as tally_instances'; `also` as move_share's. A server leaving while its
-- instance is interrupted (SPOT_TERMINATING) counts as an interruption.
local function tally_server(k, id, going, known, open, pending, also)
  local key = k.gs .. id
  local s = known or redis.call('HMGET', key, unpack(SERVER_TALLIED))
  local old = s[9] or nil
  local share = nil
  if not going and s[1] and s[3] ~= S.LOST then share = server_share(key, s, open) end
  if share and not old then
    redis.call('HSETNX', k.itally .. s[1], 'loc', s[2] or '')
  elseif old and not share then
    local loc = s[2] or ''
    if s[6] == S.SPOT_TERMINATING then add_to_minute(k, loc, {[5] = 1}, now_ms()) end
    -- Gone without being told to end (crashed, declared lost, its instance interrupted): a loss, which the
    -- autoscaler answers at once.
    if string.match(old, '^[^|]*|[^|]*|(%d)') ~= '6' or s[6] == S.SPOT_TERMINATING then
      add_count(k.counts .. loc, 'lost', 1)
    end
  end
  tally_instances(k, move_share(k, key, old, share, server_counts, also), pending)
end

-- What a game session's share says, '<state: 1 ACTIVATING, 2 ACTIVE, 3 TERMINATING><player sessions holding
-- slots>;<its seats>': its seats are its maximum players while it takes players but for being full (ACTIVE,
-- accepting, its server not ending), else 0. Its players count in p_open when it has seats, else in p_other, so
-- that a player joining or leaving moves one count, and the location's free player slots are seats - p_open (a
-- full session's seats are all taken). A share written by an earlier release, '<state><players>,<free player
-- slots>', counts in players and players_free, which a reader adds in.
local function session_counts(what, sign, l, i)
  local state = string.sub(what, 1, 1)
  if state == '1' then
    count(l, 's_activating', sign)
    count(i, 'act', sign)
  elseif state == '2' then
    count(l, 's_active', sign)
  end
  local at = string.find(what, ';', 2, true)
  if not at then
    at = string.find(what, ',', 2, true)
    count(l, 'players', sign * tonumber(string.sub(what, 2, at - 1)))
    count(l, 'players_free', sign * tonumber(string.sub(what, at + 1)))
    return
  end
  local players, seats = sign * tonumber(string.sub(what, 2, at - 1)), sign * tonumber(string.sub(what, at + 1))
  if seats ~= 0 then
    count(l, 'p_open', players)
    count(l, 'seats', seats)
  else
    count(l, 'p_other', players)
  end
end

local SESSION_STATES = {[S.ACTIVATING] = 1, [S.ACTIVE] = 2, [S.TERMINATING] = 3}

-- Brings a game session's share up to date. Answers what it read of the session, {loc, inst, status, cur, max,
-- accept, srv_end, tly, c_ms}, for the search indexes that move with the same fields; a caller that holds them as
-- they are now passes them as `known`, and `gone` when the record is about to be deleted; `pending` as
-- tally_instances'; `also` as move_share's; `joined`, when players joining (or leaving: negative) is all that
-- changed, how many.
local function tally_session(k, sid, known, gone, pending, also, joined)
  local key = k.gsess .. sid
  local s = known or redis.call('HMGET', key, 'loc', 'inst', 'status', 'cur', 'max', 'accept', 'srv_end', 'tly', 'c_ms')
  local state = SESSION_STATES[s[3]]
  local share, old = nil, s[8] or nil
  if state then
    local seats = 0
    if s[3] == S.ACTIVE and s[6] == '1' and s[7] ~= '1' then seats = s[5] end
    local head = (s[2] or '') .. '|' .. (s[1] or '') .. '|' .. int_text(state)
    local tail = ';' .. int_text(seats)
    share = head .. int_text(s[4]) .. tail
    -- Players coming or going alone move one count (as session_counts would), without taking both shares apart: a
    -- player's removal, the commonest change of a session, runs 14 % fewer instructions so (replay/icount.sh).
    if joined and old and old == head .. int_text(tonumber(s[4]) - joined) .. tail then
      add_count(k.counts .. (s[1] or ''), tonumber(seats) ~= 0 and 'p_open' or 'p_other', joined)
      redis.call('HSET', key, 'tly', share, unpack(also or {}))
      return s
    end
  end
  tally_instances(k, move_share(k, not gone and key or nil, old, share, session_counts, also), pending)
  return s
end
