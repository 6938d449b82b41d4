-- The session service's sweep of one fleet, safe with any number of replicas sweeping: ACTIVATING sessions past
-- their activation deadline end TERMINATED (ACTIVATION_TIMEOUT) and free their server for another; TERMINATING
-- sessions past the grace period end TERMINATED (FORCE_TERMINATED); RESERVED player sessions past their
-- reservation end TIMEDOUT; ended sessions past their retention (and their end event past the events') are deleted
-- with their player sessions; events older than the retention are trimmed; what an earlier release indexed moves
-- into the search index (adopt_indexes); a fleet an earlier release made is told whether a process of it hosts more
-- than one session at a time.
-- KEYS: k.act_due, k.due, k.ended, k.fleet, k.hosting, k.players, k.pool, k.res_due, k.servers, k.sessions,
-- k.sevents, k.sevents_gone, k.term_due.
-- ARGV[1] most items of each kind per sweep, ARGV[2] events retention ms, ARGV[3] most events kept.
-- Reply: {activation timeouts, forced, player timeouts, deleted, then (server id, replica, version) of each
-- server whose desired state changed, so that it is told now rather than at its next heartbeat}.
local now = now_ms()
local limit = tonumber(ARGV[1])
local out = {0, 0, 0, 0}
local function due(deadlines)
  return redis.call('ZRANGEBYSCORE', deadlines, '-inf', now, 'LIMIT', 0, limit)
end
local function release(sid, reason, slot, fields)
  local split = {split_session(fields or redis.call('HGETALL', gkey(k, sid)))}
  local r = split[3]
  local pending = {}
  if end_game_session(k, sid, S.TERMINATED, reason, now, split, pending) then
    out[slot] = out[slot] + 1
    local routing = r.server and release_process(k, r.server, pending)
    if routing then
      out[#out + 1] = r.server
      out[#out + 1] = routing[1] or ''
      out[#out + 1] = tostring(routing[2])
    end
  end
  tally_instances(k, pending)
end
-- A session at a deadline it waited for (in k.due): an ACTIVATING one past its activation deadline ends; an
-- activated one's RESERVED player sessions past theirs time out, and it waits again for the next. Whatever else it
-- is by now (ended, gone), there is nothing to do.
local function at_deadline(sid)
  local all = redis.call('HGETALL', gkey(k, sid))
  local players, r = live_players(k, sid, false, all)
  if r.status == S.ACTIVATING then
    local deadline = tonumber(r.act_by_ms or '0')
    if deadline <= now then return release(sid, S.ACTIVATION_TIMEOUT, 1, all) end
    redis.call('ZADD', k.due, int_text(deadline), sid)
    return
  end
  local seats, timed, next_due = {}, 0, nil
  for _, v in ipairs(players) do
    local deadline = reservation_deadline(v, r.act_ms, r.res_ms)
    if deadline and deadline <= now then
      extend(seats, end_player(k, sid, v, S.TIMEDOUT, now, endpoint_of(r)))
      timed = timed + 1
    elseif deadline then
      next_due = math.min(next_due or deadline, deadline)
    end
  end
  if timed > 0 then
    out[3] = out[3] + timed
    players_left(k, sid, {r.loc, r.inst, r.status, r.cur, r.max, r.accept, r.srv_end, r.tly or false, r.c_ms}, seats,
      timed)
  end
  if next_due then redis.call('ZADD', k.due, next_due, sid) end
end
for _, sid in ipairs(due(k.due)) do
  redis.call('ZREM', k.due, sid)
  at_deadline(sid)
end
for _, sid in ipairs(due(k.term_due)) do
  redis.call('ZREM', k.term_due, sid)
  release(sid, S.FORCE_TERMINATED, 2)
end
-- What an earlier release kept in act_due and res_due is looked at the same way; it listed RESERVED player sessions
-- in res_due, before that, whose game session is looked at instead.
for _, set in ipairs({k.act_due, k.res_due}) do
  for _, member in ipairs(due(set)) do
    redis.call('ZREM', set, member)
    local sid = member
    if string.find(member, '/psess-', 1, true) then sid = session_of(member) or member end
    at_deadline(sid)
  end
end
-- An ended session's end event is read from its record (read_events.lua): a record whose own retention passed before
-- the events' is kept until its end event is past theirs too.
local events_cutoff = now - tonumber(ARGV[2])
for _, sid in ipairs(due(k.ended)) do
  -- One that ended under an earlier release is still a hash: packed first, it goes the same way.
  local players, r = live_players(k, sid, false)
  if r.status then keep_ended(k, sid, r, players) end
  local ended = ended_session(k, sid)
  local record = ended and by_name(ended.fields) or {}
  local end_ms = tonumber(record.end_ms or '0')
  if end_ms >= events_cutoff then
    redis.call('ZADD', k.ended, end_ms + tonumber(ARGV[2]), sid)
  else
    local listed = {}
    for _, p in ipairs(ended and ended.players or {}) do
      local r = by_name(p)
      listed[#listed + 1] = player_entry(r.player, r.c_ms, r.id)
      -- Where an earlier release listed it.
      redis.call('ZREM', k.player .. r.player, listed_player(r.id), r.id)
    end
    in_chunks('ZREM', k.players, listed)
    if record.idem and record.idem ~= '' and redis.call('GET', k.idem .. record.idem) == sid then
      redis.call('DEL', k.idem .. record.idem)
    end
    redis.call('DEL', k.gend .. sid)
    redis.call('ZREM', k.sessions, sid)
    redis.call('ZREM', k.ended, sid)
    out[4] = out[4] + 1
  end
end
trim_events(k.sevents, k.sevents_gone, events_cutoff, tonumber(ARGV[3]))
local fleet = redis.call('HMGET', k.fleet, 'locs', 'multi', 'status')
local locations = {''}
for loc in string.gmatch(fleet[1] or '', '%S+') do locations[#locations + 1] = loc end
-- A fleet an earlier release made is told, once, whether a process of it hosts more than one session at a time
-- (its field multi, see session_refusal); it registered before the field was kept. One told none learns otherwise
-- from a process hosting with room for more: one that registered through an earlier release's replica, which does
-- not tell the fleet, took its first session from the pool.
if fleet[2] == '0' and redis.call('EXISTS', k.hosting) == 1 then
  redis.call('HSET', k.fleet, 'multi', 1)
elseif fleet[3] and not fleet[2] then
  local multi = 0
  for _, id in ipairs(redis.call('ZRANGE', k.servers, 0, -1)) do
    if tonumber(redis.call('HGET', k.gs .. id, 'max_sess') or '1') > 1 then
      multi = 1
      break
    end
  end
  redis.call('HSET', k.fleet, 'multi', multi)
end
adopt_indexes(k, locations, limit)
-- An earlier release also indexed every session under location '*', which no search reads any more.
redis.call('DEL', k.idx .. '*:created', k.idx .. '*:players', k.idx .. '*:max', k.idx .. '*:free')
return out
