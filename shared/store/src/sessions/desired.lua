-- Reads what a process should be doing: its desired-state version and termination, and its open game sessions —
-- ACTIVATING and ACTIVE ones to host, TERMINATING ones to end (with the player sessions reserved in those not yet
-- activated, which the process is handed as it starts them).
-- KEYS[1] the process's hash.
-- Reply: {version, pstate, term_reason, term_by_ms, term_force, {{session fields}, {player session values}...},
-- ...}, a player session's values by position as the session's hash keeps them (no reservation deadline yet:
-- it runs from the activation); version -1 when the process is unknown.
local key = KEYS[1]
local s = redis.call('HMGET', key, 'ver', 'pstate', 'term_reason', 'term_by_ms', 'term_force')
if not s[2] then return {-1} end
local out = {tonumber(s[1] or '0'), s[2], s[3] or '', s[4] or '0', s[5] or '0'}
for _, sid in ipairs(redis.call('SMEMBERS', key .. ':sessions')) do
  -- Its record's fields, however many players it has seen; an ACTIVATING one's players besides.
  local fields = session_record(gkey(k, sid))
  local status = by_name(fields).status
  if status == S.ACTIVATING or status == S.ACTIVE or status == S.TERMINATING then
    local session = {fields}
    if status == S.ACTIVATING then
      for _, v in ipairs(live_players(k, sid, true)) do
        if holds_slot(v) then session[#session + 1] = v end
      end
    end
    out[#out + 1] = session
  end
end
return out
