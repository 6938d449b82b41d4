-- A process's stream closed without ProcessEnding: the process is no longer linked, so that if it stays away past
-- its heartbeat deadline it is declared crashed rather than unhealthy. A stream that a newer one superseded
-- changes nothing.
-- KEYS[1] the process's hash. ARGV[1] registration id, ARGV[2] the stream's attach number.
-- Reply: 1 when the process was unlinked, else 0.
local key = KEYS[1]
local s = redis.call('HMGET', key, 'reg', 'attach', 'pstate')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] or s[3] == S.LOST then return 0 end
redis.call('HSET', key, 'linked', 0)
return 1
