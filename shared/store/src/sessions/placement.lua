-- A placement's attempt in this fleet, found by the session id its token names (see attempt_spent). A worker that takes a placement over
-- looks the attempt up (LOOK); one that ends a placement otherwise than FULFILLED gives the attempt up (ABANDON): its
-- session ends TERMINATED (PLACEMENT_ABANDONED) with its player sessions, and its server is handed back. Either way
-- an attempt with no session is spent, so that a create of it still on its way creates nothing.
-- KEYS: k.due, k.ended, k.hosting, k.pool, k.sevents, k.term_due. ARGV[1] token, ARGV[2] LOOK |
-- ABANDON, ARGV[3] the attempt's spend key, ARGV[4] its number, ARGV[5] the placement's deadline ms, ARGV[6] the
-- game session id the token names (Attempt::game_session_id).
-- Reply: session_reply's {outcome, now_ms, replica, version, desired state, detail, session fields...}: ABANDONED (no
-- session; the attempt is spent); FOUND (the session as it stands, ended by ABANDON; detail: its RESERVED and ACTIVE
-- players as a JSON list [player id, player session id, ...]; replica and version: where to tell its server when
-- ABANDON changed what it must do).
local now = now_ms()
local sid = ARGV[6]
-- An attempt of an earlier release, whose session has another id, is found through its token's key.
if redis.call('EXISTS', gkey(k, sid), k.gend .. sid) == 0 then sid = redis.call('GET', k.idem .. ARGV[1]) end
if not sid then
  spend_attempt(k, ARGV[3], ARGV[4], ARGV[5], now)
  return session_reply('ABANDONED', now)
end
local key = gkey(k, sid)
local routing, fields
local players = '[]'
if ARGV[2] == 'ABANDON' then
  -- Ended (now or before), it has no player session RESERVED or ACTIVE left.
  local split = {split_session(redis.call('HGETALL', key))}
  fields = end_game_session(k, sid, S.TERMINATED, S.PLACEMENT_ABANDONED, now, split)
  local server = split[3].server
  if fields and server then routing = release_process(k, server) end
else
  local holding = {}
  for _, v in ipairs(live_players(k, sid)) do
    if holds_slot(v) then holding[#holding + 1], holding[#holding + 2] = v[P_PLAYER], player_session_id(sid, v[1]) end
  end
  if #holding > 0 then players = cjson.encode(holding) end
end
return session_reply('FOUND', now, players, routing, fields or session_fields(k, sid))
