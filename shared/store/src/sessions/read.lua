-- Reads game sessions or player sessions of one fleet by id, live or ended; a player session comes with its game
-- session's location and endpoint.
-- KEYS[1] the fleet's sessions (for its slot). ARGV[1] g (game sessions) | p (player sessions), then the ids.
-- Reply: per id, in order: {} when unknown; a game session's fields; or {{player session fields}, {loc, ip, dns,
-- port}}.
local out = {}
for i = 2, #ARGV do
  if ARGV[1] == 'g' then
    out[#out + 1] = session_fields(k, ARGV[i])
  else
    local fields, endpoint = player_record(k, ARGV[i])
    out[#out + 1] = fields and {fields, endpoint} or {}
  end
end
return out
