-- Reads game sessions or player sessions of one fleet by id; a player session comes with its game session's
-- location and endpoint.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] g (game sessions) | p (player sessions), ARGV[5..] ids.
-- Reply: per id, in order: {} when unknown; a game session's fields; or {{player session fields}, {loc, ip, dns,
-- port}}.
local k = fleet_context(KEYS, ARGV)
local out = {}
for i = 5, #ARGV do
  if ARGV[4] == 'g' then
    out[#out + 1] = redis.call('HGETALL', gkey(k, ARGV[i]))
  else
    local fields = redis.call('HGETALL', pkey(k, ARGV[i]))
    if #fields == 0 then
      out[#out + 1] = {}
    else
      local sid = redis.call('HGET', pkey(k, ARGV[i]), 'gs')
      local s = redis.call('HMGET', gkey(k, sid), 'loc', 'ip', 'dns', 'port')
      out[#out + 1] = {fields, {s[1] or '', s[2] or '', s[3] or '', s[4] or '0'}}
    end
  end
end
return out
