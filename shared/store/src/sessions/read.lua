-- Reads game sessions or player sessions of one fleet by id; a player session comes with its game session's
-- location and endpoint.
-- KEYS the records to read. ARGV[1] g (game sessions) | p (player sessions).
-- Reply: per key, in order: {} when unknown; a game session's fields; or {{player session fields}, {loc, ip, dns,
-- port}}.
local out = {}
for _, key in ipairs(KEYS) do
  if ARGV[1] == 'g' then
    out[#out + 1] = redis.call('HGETALL', key)
  else
    local fields = redis.call('HGETALL', key)
    if #fields == 0 then
      out[#out + 1] = {}
    else
      local sid = redis.call('HGET', key, 'gs')
      local s = redis.call('HMGET', gkey(k, sid), 'loc', 'ip', 'dns', 'port')
      out[#out + 1] = {fields, {s[1] or '', s[2] or '', s[3] or '', s[4] or '0'}}
    end
  end
end
return out
