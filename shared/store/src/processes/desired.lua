-- Reads what a process should be doing: its desired-state version and termination, and its open game sessions.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] game-server id.
-- Reply: {version, pstate, term_reason, term_by_ms, term_force, {session id, pb, status}, ...}; version
-- -1 when the process is unknown.
local k = fleet_context()
local key = k.server_prefix .. ARGV[4]
local s = redis.call('HMGET', key, 'ver', 'pstate', 'term_reason', 'term_by_ms', 'term_force')
if not s[2] then return {-1} end
local out = {tonumber(s[1] or '0'), s[2], s[3] or '', s[4] or '0', s[5] or '0'}
for _, sid in ipairs(redis.call('SMEMBERS', key .. ':sessions')) do
  local session = redis.call('HMGET', k.session_prefix .. sid, 'pb', 'status')
  if session[2] == 'ACTIVATING' or session[2] == 'ACTIVE' then
    out[#out + 1] = {sid, session[1], session[2]}
  end
end
return out
