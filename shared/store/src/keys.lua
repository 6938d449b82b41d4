-- How a function reaches its fleet's keys (first of the helpers; KEY, the suffix of every key by name, is generated
-- from keys.rs before it, and S, every stored state by name, from the domain's enums).
--
-- Each function sees them as `k`: k.<name> of a fixed key is the one it received in KEYS, in the order its top
-- comment declares them (`-- KEYS: k.pool, k.claims.`); k.<name> of a kind of record (KEY's suffixes ending in
-- ':', such as k.gsess) is the start of such a record's key, built from the hash tag of KEYS[1]. Reaching for a
-- fixed key it did not declare is an error, so no function touches a key its caller did not name.

-- k[0] holds KEYS[1], for the one metatable every function's k shares.
local FLEET = {__index = function(known, name)
  local suffix = KEY[name]
  if not suffix or string.sub(suffix, -1) ~= ':' then error('undeclared key: ' .. tostring(name)) end
  -- Fleet ids hold no braces, so the tag ends at the first.
  local key = string.match(known[0], '^[^}]*}') .. suffix
  rawset(known, name, key)
  return key
end}

local function fleet_keys(KEYS, names)
  local k = {[0] = KEYS[1]}
  for i = 1, #names do k[names[i]] = KEYS[i] end
  return setmetatable(k, FLEET)
end

-- Redis's clock, ms since the epoch: every time a function stores is taken from it, never from a replica's.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Appends the hash at `key` to a reply, as field, value, ..., without the record's share of the live counts (tly,
-- see utilization/tally.lua), which is the store's own bookkeeping.
local function append_fields(out, key)
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    if fields[i] ~= 'tly' then
      out[#out + 1] = fields[i]
      out[#out + 1] = fields[i + 1]
    end
  end
  return out
end
