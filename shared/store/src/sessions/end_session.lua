-- A game server ends a game session it hosts (EndGameSession: TERMINATED, ENDED_BY_SERVER, or when it had been
-- asked to end the session or itself TRIGGERED_ON_PROCESS_TERMINATE, FLEET_DELETED when its fleet or location is
-- being deleted) or refuses one it was given (RejectGameSession: an ACTIVATING session becomes ERROR,
-- SERVER_REJECTED). The server is then free for another session.
-- KEYS: k.due, k.ended, k.hosting, k.pool, k.sevents, k.term_due. ARGV[1] game-server id, ARGV[2] game
-- session id, ARGV[3] END | REJECT.
-- Reply: {ENDED | NOT_FOUND | NOT_YOURS | WRONG_STATE, now_ms, '', '0', status, session fields...}, the session as
-- it stands after ENDED, which the server is answered (the server asked, so no routing to tell it by). WRONG_STATE: a reject of a session that is not
-- ACTIVATING (status says what it is).
local now = now_ms()
local id, sid = ARGV[1], ARGV[2]
local live = redis.call('HGETALL', gkey(k, sid))
-- Taken apart once, for the checks here and for end_game_session.
local split = {split_session(live)}
local s = split[3]
local ended = not s.server and ended_session(k, sid)
if ended then s = by_name(ended.fields) end
if not s.server then return session_reply('NOT_FOUND', now) end
if s.server ~= id then return session_reply('NOT_YOURS', now) end
local status, reason = S.TERMINATED, S.ENDED_BY_SERVER
if ARGV[3] == 'REJECT' then
  local retried = s.status == S.ERROR and s.reason == S.SERVER_REJECTED
  if s.status ~= S.ACTIVATING and not retried then return session_reply('WRONG_STATE', now, s.status) end
  status, reason = S.ERROR, S.SERVER_REJECTED
end
if ended then return session_reply('ENDED', now, '', nil, ended.fields) end
-- What release_process reads of the server, and its termination reason, in one read (ending the session changes
-- none of them).
local p = redis.call('HMGET', k.gs .. id, unpack(ENDING_READ))
-- A session asked to end (TERMINATING) ends TRIGGERED_ON_PROCESS_TERMINATE by end_game_session's own rule.
if ARGV[3] ~= 'REJECT' and p[3] == S.TERMINATING then
  reason = told_end_reason(p[#ENDING_READ], S.TRIGGERED_ON_PROCESS_TERMINATE)
end
local pending = {}
local fields = end_game_session(k, sid, status, reason, now, split, pending)
if not fields then return session_reply('ENDED', now, '', nil, live) end
local routing = release_process(k, id, pending, p)
tally_instances(k, pending)
return session_reply('ENDED', now, '', routing, fields)
