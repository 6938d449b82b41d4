-- The process hosting a game session has it ready for players (ActivateGameSession): ACTIVATING → ACTIVE. It
-- enters the search indexes, and the reservation timers of player sessions reserved with it start now. Activating
-- again is ACTIVATED and changes nothing.
-- KEYS: k.act_due, k.due, k.sevents. ARGV[1] game-server id, ARGV[2] game session id.
-- Reply: {ACTIVATED | NOT_FOUND | NOT_YOURS | ENDED, now_ms, session fields...}.
local now = now_ms()
local sid = ARGV[2]
local key = gkey(k, sid)
-- The record whole, in one read: its event and the reply show it. By position in SESSION_RECORD: loc, server, inst,
-- status, c_ms, act_ms, cur, max, accept, srv_end, res_ms, tly. (Its players stay unread: a pass over them in Lua
-- to leave them out would cost Redis more than this read's scan for each field.)
local s = redis.call('HMGET', key, unpack(SESSION_RECORD))
local LOC, SERVER, INST, STATUS, C_MS, ACT_MS, CUR, MAX, ACCEPT, SRV_END, RES_MS, TLY = 3, 4, 5, 9, 11, 13, 15, 16, 17,
  26, 28, 33
if not s[SERVER] then
  local ended = ended_session(k, sid)
  if not ended then return {'NOT_FOUND', int_text(now)} end
  if by_name(ended.fields).server ~= ARGV[1] then return {'NOT_YOURS', int_text(now)} end
  return append_pairs({'ENDED', int_text(now)}, ended.fields)
end
if s[SERVER] ~= ARGV[1] then return {'NOT_YOURS', int_text(now)} end
local outcome = 'ACTIVATED'
if s[STATUS] == S.ACTIVATING then
  -- No player is let in before its session is ACTIVE: every player session holding a slot is RESERVED still, its
  -- deadline this activation's time plus res_ms (reservation_deadline), which the session now waits for as one in
  -- place of its activation. One an earlier release created waits in act_due instead (found by its absence from
  -- due): its entry goes, lest a sweep of that release, still running, time the ACTIVE session out.
  local waited_in_due
  if tonumber(s[CUR]) > 0 then
    waited_in_due = redis.call('ZADD', k.due, int_text(now + tonumber(s[RES_MS])), sid) == 0
  else
    waited_in_due = redis.call('ZREM', k.due, sid) == 1
  end
  if not waited_in_due then redis.call('ZREM', k.act_due, sid) end
  -- Its new status is written with its share, in one HSET.
  index_session(k, sid, {s[LOC], s[INST], S.ACTIVE, s[CUR], s[MAX], s[ACCEPT], s[SRV_END], s[TLY], s[C_MS]},
    {'status', S.ACTIVE, 'act_ms', int_text(now)})
  s[STATUS], s[ACT_MS] = S.ACTIVE, int_text(now)
  local fields = record_fields(s, SESSION_RECORD)
  return append_pairs({outcome, int_text(now)}, session_event(k, S.GAME_SESSION_ACTIVATED, key, now, fields))
elseif s[STATUS] ~= S.ACTIVE then
  outcome = 'ENDED'
end
return append_pairs({outcome, int_text(now)}, record_fields(s, SESSION_RECORD))
