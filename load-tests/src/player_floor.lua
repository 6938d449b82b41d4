#!lua name=berth_bench_floor
-- The least a player-session creation could cost Redis, for the sessions scenario's floor: one function that does
-- only what CreatePlayerSession must (write the record, count the player in its game session, schedule the
-- reservation deadline; a reservation is no session event), with none of Berth's checks, indexes or reply.
-- KEYS[1] the player session's hash, KEYS[2] the game session's hash, KEYS[3] the reservation deadlines. ARGV[1]
-- player session id, ARGV[2] player id, ARGV[3] game session id.
-- Reply: the game session's player count.
redis.register_function('berth_bench_player_floor', function(keys, args)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', keys[1], 'id', args[1], 'player', args[2], 'gs', args[3], 'status', 'RESERVED', 'c_ms', now)
  local count = redis.call('HINCRBY', keys[2], 'cur', 1)
  redis.call('ZADD', keys[3], now + 60000, args[1])
  return count
end)
