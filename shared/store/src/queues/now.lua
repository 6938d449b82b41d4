-- Reads the queues' names with the clock of the node that holds their list, in one atomic step: a queue created
-- later is listed at or after that time.
-- KEYS[1] the list of queues.
-- Reply: {now_ms, queue names}.
return {tostring(now_ms()), redis.call('ZRANGE', KEYS[1], 0, -1)}
