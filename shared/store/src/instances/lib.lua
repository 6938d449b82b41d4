-- Helpers of the instance scripts: the instances a fleet's reconcilers run through a provisioner (prepended last).
--
-- An instance's record is the hash k.vm .. <id>: id, loc, type, state (LAUNCHING | RUNNING | DRAINING |
-- TERMINATING), launch_ms (when its launch was recorded), servers (its processes' server ids, space-separated),
-- handle (what the provisioner answered to its launch; '' before), kill_ms (while TERMINATING: when it is killed if
-- it still runs), r:<server id> (when that server first registered; written by attach) and unreg (how many of its
-- servers never registered). The sorted set
-- k.vms .. <location> holds a location's instance ids by launch_ms.
--
-- One reconciler acts for a location at a time: the holder of its lease, k.lease .. <location> = '<holder> <token>',
-- which expires unless renewed. The token is the location's fence counter (l:<location>:fence), raised for every
-- new holder. Every script that changes instances is given the lease its change was decided under and changes
-- nothing unless that is still the live lease, so a holder that stalled past the expiry and resumed cannot act on
-- what a newer holder decided since.

local function holds_lease(k, loc, lease)
  return redis.call('GET', k.lease .. loc) == lease
end

-- The server ids of an instance's record.
local function instance_servers(vm)
  local ids = {}
  for id in string.gmatch(redis.call('HGET', vm, 'servers') or '', '%S+') do ids[#ids + 1] = id end
  return ids
end

-- Forgets an instance: its record and its place in its location.
local function forget_instance(k, loc, id)
  redis.call('DEL', k.vm .. id)
  redis.call('ZREM', k.vms .. loc, id)
  tally_instance(k, id)
end
