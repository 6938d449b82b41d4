-- A process's stream closed without ProcessEnding: the process is no longer linked, so that if it stays away past
-- its heartbeat deadline it is declared crashed rather than unhealthy. A stream that a newer one superseded
-- changes nothing.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] game-server id, ARGV[5] registration id, ARGV[6] the stream's
-- attach number.
-- Reply: 1 when the process was unlinked, else 0.
local k = fleet_context(KEYS, ARGV)
local key = k.server_prefix .. ARGV[4]
local s = redis.call('HMGET', key, 'reg', 'attach', 'pstate')
if s[1] ~= ARGV[5] or s[2] ~= ARGV[6] or s[3] == 'LOST' then return 0 end
redis.call('HSET', key, 'linked', 0)
return 1
