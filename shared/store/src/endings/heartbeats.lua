-- Records a batch of heartbeats of one fleet's processes: each pushes its heartbeat deadline out, and records
-- health, game state and player count when they changed. A process that reports UNHEALTHY as many times in a row as
-- its fleet's settings allow is declared lost. A heartbeat from a lost registration, over a stream that a newer one
-- replaced, or of a fleet whose record is gone, changes nothing.
-- The writer's progress is recorded too (k.writers), for the sweep to tell a replica's lateness from its processes'
-- silence.
-- KEYS: k.claims, k.due, k.ended, k.events, k.fleet, k.hb, k.hosting, k.pool, k.ready, k.servers, k.sevents, k.term,
-- k.term_due, k.unhealthy, k.utilized, k.writers. ARGV[1] retention ms of lost records, ARGV[2]
-- the writing replica, ARGV[3] how long, ms, it has written this fleet's heartbeats on time; then per heartbeat six
-- arguments: game-server id, registration id, the stream's attach number, health (HEALTHY | UNHEALTHY), game state,
-- connected players. The heartbeat window and unhealthy threshold are the fleet's (fleet_settings).
-- Reply: one integer per heartbeat, in order: the process's desired-state version, -1 when it is lost, -2 when
-- the stream was superseded; then the fleet's heartbeat period (ms) and unhealthy threshold, for the streams to
-- tell their processes when these changed (both 0 when the fleet's record is gone).
-- The deadlines are pushed out by one ZADD per batch: a redis.call costs more than the reading it saves.
local now = now_ms()
local set = fleet_settings(k)
local out, deadlines = {}, {}
if not set then
  for _ = 4, #ARGV, 6 do out[#out + 1] = -1 end
  out[#out + 1] = 0
  out[#out + 1] = 0
  return out
end
local threshold, retention = set.unhealthy_after, tonumber(ARGV[1])
local due = now + set.window_ms
for i = 4, #ARGV, 6 do
  local id, reg, attach, health, gstate, players = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4],
    ARGV[i + 5]
  local key = k.gs .. id
  local s = redis.call('HMGET', key, 'reg', 'pstate', 'unh', 'ver', 'health', 'gstate', 'players', 'attach')
  if s[1] ~= reg or s[2] == S.LOST then
    out[#out + 1] = -1
  elseif s[8] ~= attach then
    out[#out + 1] = -2
  else
    local unhealthy = 0
    if health == S.UNHEALTHY then unhealthy = tonumber(s[3] or '0') + 1 end
    if unhealthy >= threshold then
      lose(k, id, now, S.SERVER_PROCESS_TERMINATED_UNHEALTHY,
        'reported UNHEALTHY in ' .. unhealthy .. ' heartbeats in a row', S.ERROR, S.SERVER_UNHEALTHY, retention)
      out[#out + 1] = -1
    else
      deadlines[#deadlines + 1] = due
      deadlines[#deadlines + 1] = id
      if tostring(unhealthy) ~= s[3] or health ~= s[5] or gstate ~= s[6] or players ~= s[7] then
        redis.call('HSET', key, 'unh', unhealthy, 'health', health, 'gstate', gstate, 'players', players)
        -- An UNHEALTHY process is given no new game sessions; it may wait in the pool again once healthy.
        if health == S.UNHEALTHY then
          redis.call('SADD', k.unhealthy, id)
          place(k, k.pool, k.lpool, id, nil)
        else
          redis.call('SREM', k.unhealthy, id)
          if poolable(key) and not redis.call('HGET', key, 'claim_exp_ms') and not redis.call('ZSCORE', k.pool, id) then
            to_pool(k, k.pool, id, redis.call('HGET', key, 'istatus'), now)
          end
        end
        if health ~= s[5] then tally_server(k, id) end
      end
      out[#out + 1] = tonumber(s[4] or '0')
    end
  end
end
-- Lua's unpack is bounded by its C stack (LUAI_MAXCSTACK 8000); the writer sends at most 1,000 heartbeats.
if #deadlines > 0 then redis.call('ZADD', k.hb, 'XX', unpack(deadlines)) end
redis.call('HSET', k.writers, ARGV[2], (now - tonumber(ARGV[3])) .. ',' .. now)
out[#out + 1] = set.hb_ms
out[#out + 1] = set.unhealthy_after
return out
