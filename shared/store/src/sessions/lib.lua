-- Helpers of the session scripts (loaded after the process helpers; the endings area above uses them to end the
-- sessions of processes that end).
--
-- The session keys (named in keys.rs, reached as k.<name>; all in the fleet's slot) and what they hold:
--   gsess:<id>          a game session: id, fleet, loc, server, inst, ip, dns, port, status, reason, c_ms,
--                       act_by_ms (its activation deadline, which a reader shows while it is ACTIVATING), act_ms,
--                       end_ms, cur (player sessions holding a slot), max, accept (1 | 0),
--                       prot (1 | 0), name, props (JSON [[key, value], ...]), data, mm, creator, placement,
--                       term_by_ms (while TERMINATING on request: when it is forced), srv_end (1 once its server
--                       was told to end: it takes no new players and leaves the search indexes),
--                       ret_ms (how long it stays readable once ended: the session service's setting, kept with it
--                       so that the health service's scripts, which end sessions too, honour it), res_ms (the
--                       reservation timeout of its player sessions), idem (its idempotency token), digest (of the
--                       request that created it, to tell a retry from a reuse of the token), notify (the
--                       placement replica to tell when it is activated)
--                       np (how many player sessions it has made: the number of the last, see player_session_id);
--                       and its player sessions: p<n>, the n-th (see player_field), and l:<player id>, the number of
--                       that player's session while it holds a slot ('' once it ended)
--   gsess:<id>:p        its player sessions as the release before kept them, apart from the record: taken over into
--                       the record by the first function that writes them (adopt_players)
--   gend:<id>           an ended game session with its player sessions, in one packed value (see ended_session):
--                       its hashes go when it ends
--   players             every player session of the fleet, as one entry per player session (player_entry), all
--                       scored 0 and read by lex range: a player's sort together, oldest first
--   player:<player id>  the player's session ids by creation ms, as an earlier release listed them (less the
--                       '<fleet id>/' every id of the fleet starts with; whole, in the release before that): read
--                       beside `players` until the sweep deletes them with their sessions
--   sessions            the fleet's game session ids by creation ms
--   due                 sessions by their next deadline: an ACTIVATING one's activation, an activated one's with
--                       RESERVED player sessions the earliest of their reservations (the sweep looks at the session
--                       then, times out what is due and waits for the next), so that activating moves one entry
--   act_due, res_due    the same, as an earlier release kept them apart (and listed RESERVED player session ids in
--                       res_due before that): the sweep drains them
--   term_due            TERMINATING sessions by when they are forced to end
--   hosting             processes hosting sessions with a slot to spare, by when they last took one
--   ended               ended game sessions by when their records expire
--   idem:<token>        game session id created with a client's idempotency token (a placement's attempt names its
--                       session by its token instead, see Attempt::game_session_id; one of an earlier release has
--                       its key); a placement's spent attempts (see attempt_spent)
--   creator:<id>        a creator's game session ids by creation ms
--   search:<loc>        ACTIVE sessions of a location whose server is not ending, by created, players or max, and
--                       `free`: those of them that could take a player now, by created; in one sorted set (see
--                       index_session; a search of every location reads each location's, see
--                       services/session/src/search.rs)
--   idx:<loc>:<index>   the same, as an earlier release kept it in four sets: the sweep moves it into search:<loc>
--                       (adopt_indexes)
--   sevents_gone        position of the last session event trimmed (by retention or the cap)
--   sevents             stream of session events: type, t (ms), kind (g | p | e), then for g the record's fields
--                       but those a reader joins (session_event), for p a player session's with its game session's
--                       loc, ip, dns and port, for e (a game session's end) its id and `with`, the player sessions
--                       that ended with it (see end_event)


-- Fields an ended game session keeps, in the order of its packed record (record_values in keys.lua), and those each
-- of its player sessions keeps in the list that follows them. The packed record leaves out what its key and its other
-- fields give: its id and fleet (the id holds the fleet), the digest when it is the token (as a placement attempt's
-- is), a player session's id when it is numbered (player_session_id), kept as its number.
local SESSION_ENDED = {'id', 'fleet', 'loc', 'server', 'inst', 'ip', 'dns', 'port', 'status', 'reason', 'c_ms',
  'act_ms', 'end_ms', 'cur', 'max', 'accept', 'prot', 'name', 'props', 'data', 'mm', 'creator', 'placement', 'idem',
  'digest', 'srv_end'}
-- Where a packed record keeps its location, server and endpoint.
local E_LOC, E_SERVER, E_IP, E_DNS, E_PORT = 3, 4, 6, 7, 8
local PLAYER_ENDED = {'id', 'player', 'status', 'data', 'c_ms', 'act_ms', 'end_ms'}

-- A live player session is one field of its game session's hash, p<n> for the n-th: msgpack of its values in
-- PLAYER_ENDED's order, its number first and false where it has none, the entry its game session's ended record
-- keeps as it is. Its id follows from the game session's and its number, so no key of its own finds it
-- (player_session_id); while it holds a slot its player's field l:<player id> holds its number, for a reservation
-- to find the player's live one. In the record's own hash, an accept or a removal reads the session and the player
-- in one HMGET and writes both in one HSET; what reads the record alone (session_record) reads the hash whole only
-- when it holds nothing else, and otherwise names its fields (SESSION_RECORD), so that a session that has seen
-- thousands of players costs such a read no more than a new one.
local P_PLAYER, P_STATUS, P_DATA, P_CREATED, P_ACTIVATED, P_ENDED = 2, 3, 4, 5, 6, 7

local function player_field(n)
  return 'p' .. int_text(n)
end

local function seat_field(player)
  return 'l:' .. player
end

-- The fields of a game session's record, all that its hash holds but its players.
local SESSION_RECORD = {'id', 'fleet', 'loc', 'server', 'inst', 'ip', 'dns', 'port', 'status', 'reason', 'c_ms',
  'act_by_ms', 'act_ms', 'end_ms', 'cur', 'max', 'accept', 'prot', 'name', 'props', 'data', 'mm', 'creator',
  'placement', 'term_by_ms', 'srv_end', 'ret_ms', 'res_ms', 'idem', 'digest', 'notify', 'np', 'tly'}

-- SESSION_RECORD as a set, to tell a record's fields from a player's.
local IN_RECORD = {}
for i = 1, #SESSION_RECORD do IN_RECORD[SESSION_RECORD[i]] = true end

-- The record fields of the live game session at `key`, as HGETALL answers them ({} when it is not live), without its
-- players. A hash no bigger than a record is read whole, and kept as read when all it holds are record fields: HMGET
-- of every record field scans the hash once per field (the whole hash for each one a live session lacks), where
-- HGETALL passes over it once (6 against 4.4 µs a session on a bench's snapshot), which a page of search results
-- pays per session. A bigger one, or one with players, names its fields, so that a session that has seen thousands
-- of players costs no more.
local function session_record(key)
  if redis.call('HLEN', key) <= #SESSION_RECORD then
    local all = redis.call('HGETALL', key)
    local only_record = true
    for i = 1, #all, 2 do
      if not IN_RECORD[all[i]] then
        only_record = false
        break
      end
    end
    if only_record then return all end
  end
  return record_fields(redis.call('HMGET', key, unpack(SESSION_RECORD)), SESSION_RECORD)
end

-- A game session's whole hash (HGETALL's `all`) taken apart in one pass (Lua's work per field is most of what reading
-- a record costs, replay/icount.sh shows): its record's fields, its player sessions' values by number, and its
-- record by name. Every record field that starts with p or l goes on with a letter; a player's field (p<n>,
-- l:<player id>) with a digit or ':'.
local function split_session(all)
  local fields, numbered, named, n, p = {}, {}, {}, 0, 0
  for i = 1, #all, 2 do
    local name, value = all[i], all[i + 1]
    local first, second = string.byte(name, 1, 2)
    if (first ~= 112 and first ~= 108) or second > 58 then
      fields[n + 1], fields[n + 2] = name, value
      n = n + 2
      named[name] = value
    elseif first == 112 then
      p = p + 1
      numbered[p] = cmsgpack.unpack(value)
    end
  end
  if p > 1 then table.sort(numbered, function(a, b) return a[1] < b[1] end) end
  return fields, numbered, named
end

-- The id of the n-th player session (from 1) of game session `sid`: berth_domain::game_session::player_session_id,
-- whose game session is known from the id alone.
local function player_session_id(sid, n)
  return (string.gsub(sid, '/gsess%-', '/psess-', 1)) .. '-' .. int_text(n)
end

-- The number of player session `psid` in game session `sid` (berth_domain::game_session::player_session_number), or
-- nil when it is not numbered in it.
local function player_number(sid, psid)
  local n = tonumber(string.match(psid, '%-(%d+)$'))
  if n and player_session_id(sid, n) == psid then return n end
  return nil
end

-- A player session id as a player's list holds it, and back: without its fleet, which the list's key names (a
-- one-entry list of the bench's falls a size class with it: 200 → 168 bytes).
local function listed_player(psid)
  return string.match(psid, '^[^/]*/(.*)$') or psid
end

local function player_of_listing(k, member)
  if string.find(member, '/', 1, true) then return member end
  return fleet_id(k) .. '/' .. member
end

-- Zeros to pad a number's text with, by how many it lacks.
local ZEROS = {'0', '00', '000', '0000', '00000', '000000', '0000000', '00000000', '000000000', '0000000000',
  '00000000000', '000000000000'}

-- Integer `n` as text `width` digits wide (string.format or string.rep would cost several times as much: icount.sh).
local function padded(n, width)
  local text = int_text(n)
  local short = width - #text
  if short <= 0 then return text end
  return ZEROS[short] .. text
end

-- A player id's length, four digits wide, formatted once per library load for each length.
local id_lengths = {}
local function id_length(player)
  local n = #player
  local text = id_lengths[n]
  if not text then
    text = padded(n, 4)
    id_lengths[n] = text
  end
  return text
end

-- The digits of a creation ms in a player index entry: fixed, so that lex order is time order (until 2286).
local MS_DIGITS = 13

-- A player session's entry in the fleet's player index (k.players): its player's id after the id's length in bytes
-- (four digits), then its creation ms (MS_DIGITS) and its listed id. The length first keeps each player's
-- entries together and apart from every other's whatever bytes the ids hold, the fixed-width ms orders them oldest
-- first, so one lex range reads a player's page, and a create lists all its players in one ZADD rather than one
-- sorted set per player. Built in one concatenation: each string Lua makes on the way is hashed and collected
-- (icount.sh counted 12,000 instructions a create more with the parts made apart).
local function player_entry(player, c_ms, psid)
  return id_length(player) .. player .. padded(c_ms, MS_DIGITS) .. listed_player(psid)
end

-- Where a player's entries start, and an entry's ms as the index holds them (page.lua reads a player's from there).
local function player_prefix(player)
  return id_length(player) .. player
end

local function padded_ms(ms)
  return padded(ms, MS_DIGITS)
end

-- The game session of player session `psid`, by its id (nil for an id Berth did not issue).
local function session_of(psid)
  local fleet, uuid = string.match(psid, '^([^/]*)/psess%-(.+)%-%d+$')
  return fleet and (fleet .. '/gsess-' .. uuid)
end

-- Whether player session values `v` hold a slot.
local function holds_slot(v)
  return v[P_STATUS] == S.RESERVED or v[P_STATUS] == S.ACTIVE
end

-- A player session's fields, as a reply shows them (by name, flat), from its values `v` in game session `sid`.
local function player_fields(sid, v)
  local values = {v[1], v[2], v[3], v[4], v[5], v[6], v[7]}
  if type(values[1]) == 'number' then values[1] = player_session_id(sid, values[1]) end
  local fields = record_fields(values, PLAYER_ENDED)
  fields[#fields + 1] = 'gs'
  fields[#fields + 1] = sid
  return fields
end

-- Player sessions an earlier release kept one hash each (psess:<id>, listed by creation in gsess:<id>:ps, the live
-- ones by player in gsess:<id>:live): their values by number, what the session's hash takes for them, and the old
-- keys (none when there are none).
local function legacy_players(k, sid)
  local listed = gkey(k, sid) .. ':ps'
  local ids = redis.call('ZRANGE', listed, 0, -1)
  if #ids == 0 then return {}, {}, {} end
  local numbered, fields, gone = {}, {}, {listed, gkey(k, sid) .. ':live'}
  for _, psid in ipairs(ids) do
    local p = redis.call('HMGET', k.psess .. psid, unpack(PLAYER_ENDED))
    local n = player_number(sid, psid)
    if p[2] and n then
      local v = {n, p[2], p[3], p[4] or '', tonumber(p[5]) or 0, tonumber(p[6] or '') or false,
        tonumber(p[7] or '') or false}
      numbered[#numbered + 1] = v
      fields[#fields + 1], fields[#fields + 2] = player_field(n), cmsgpack.pack(v)
      if holds_slot(v) then fields[#fields + 1], fields[#fields + 2] = seat_field(v[P_PLAYER]), n end
    end
    gone[#gone + 1] = k.psess .. psid
  end
  table.sort(numbered, function(a, b) return a[1] < b[1] end)
  return numbered, fields, gone
end

-- The player sessions of game session `sid` that an earlier release kept apart from its record: in a hash of their
-- own (gsess:<id>:p), or before that one hash each (legacy_players). Their values by number, what the session's hash
-- takes for them, and the keys that held them (none when there are none).
local function players_apart(k, sid)
  local apart = gkey(k, sid) .. ':p'
  local fields = redis.call('HGETALL', apart)
  if #fields == 0 then return legacy_players(k, sid) end
  local _, numbered = split_session(fields)
  return numbered, fields, {apart}
end

-- Runs `command` over `values` (after `key`, when one is given) a thousand values at a time: Lua's unpack hands a call
-- at most ~8,000, and the player sessions a game session makes over its life have no bound. A thousand is even, so a
-- HSET's pairs stay whole.
local function in_chunks(command, key, values)
  for first = 1, #values, 1000 do
    local last = math.min(first + 999, #values)
    if key then
      redis.call(command, key, unpack(values, first, last))
    else
      redis.call(command, unpack(values, first, last))
    end
  end
end

-- Moves the player sessions an earlier release kept apart (players_apart) into game session `sid`'s hash, and deletes
-- the old keys, the first time a function that writes finds its players missing. Answers whether there were any.
local function adopt_players(k, sid)
  local _, fields, gone = players_apart(k, sid)
  if #gone == 0 then return false end
  in_chunks('HSET', gkey(k, sid), fields)
  in_chunks('DEL', nil, gone)
  return true
end

-- A live game session's player sessions, their values by number ({} for none), and its record by name ({} when it
-- is not live); `all` its hash as HGETALL answers it, when the caller has read it; `reading` in a function that
-- writes nothing, which reads an earlier release's where it finds them rather than moving them. A session that has
-- made none (np 0) has none kept apart either.
local function live_players(k, sid, reading, all)
  all = all or redis.call('HGETALL', gkey(k, sid))
  local _, numbered, named = split_session(all)
  if #numbered > 0 or named.np == '0' or not named.status then return numbered, named end
  if reading then return (players_apart(k, sid)), named end
  if adopt_players(k, sid) then numbered = select(2, split_session(redis.call('HGETALL', gkey(k, sid)))) end
  return numbered, named
end

-- An ended game session: {fields = its fields, players = each of its player sessions' fields, oldest first} (as
-- HGETALL answers them), or nil when it is not an ended one.
local function ended_session(k, sid)
  local packed = redis.call('GET', k.gend .. sid)
  if not packed then return nil end
  local values = cmsgpack.unpack(packed)
  values[1] = values[1] or sid
  values[2] = values[2] or fleet_of(sid)
  local players = {}
  for i, p in ipairs(values[#SESSION_ENDED + 1]) do players[i] = player_fields(sid, p) end
  local fields = record_fields(values, SESSION_ENDED)
  local record = by_name(fields)
  if not record.digest and record.idem then
    fields[#fields + 1] = 'digest'
    fields[#fields + 1] = record.idem
  end
  return {fields = fields, players = players}
end

-- A game session's record fields, live or ended, as HGETALL answers them ({} when there is none).
local function session_fields(k, sid)
  local fields = session_record(gkey(k, sid))
  if #fields > 0 then return fields end
  local ended = ended_session(k, sid)
  return ended and ended.fields or {}
end

-- A game session's {loc, ip, dns, port} from its fields by name: where its players connect.
local function endpoint_of(s)
  return {s.loc or '', s.ip or '', s.dns or '', s.port or '0'}
end

-- Player session `n` of ended game session `sid` as its packed record keeps it: its values by position
-- (PLAYER_ENDED's) and its game session's (SESSION_ENDED's); nil when there is none. It unpacks the record and
-- builds nothing from it: a call answering one player session needs none of the others' fields.
local function ended_entry(k, sid, n)
  local packed = redis.call('GET', k.gend .. sid)
  if not packed then return nil end
  local values = cmsgpack.unpack(packed)
  -- Numbered entries keep their number; one an earlier release made keeps its id.
  local id = player_session_id(sid, n)
  for _, p in ipairs(values[#SESSION_ENDED + 1]) do
    if p[1] == n or p[1] == id then return p, values end
  end
  return nil
end

-- An ended game session's {loc, ip, dns, port} from its values by position (ended_entry's): where its players
-- connected.
local function ended_endpoint(session)
  return {session[E_LOC] or '', session[E_IP] or '', session[E_DNS] or '', int_text(session[E_PORT] or 0)}
end

-- A player session that ended with its game session, as the game server `server` names it in game session `sid`
-- (accept_player.lua, remove_player.lua): player session `n` of game session `own`, the one its id names. Its values
-- and its game session's {loc, ip, dns, port}; or nil, nil and the outcome, NOT_FOUND or NOT_YOURS (a session of
-- another server), as the two tell them apart for a live one.
local function servers_ended_player(k, server, sid, own, n)
  local v, session = ended_entry(k, own, n)
  if not v then return nil, nil, 'NOT_FOUND' end
  if session[E_SERVER] ~= server then return nil, nil, 'NOT_YOURS' end
  if own ~= sid then return nil, nil, 'NOT_FOUND' end
  return v, ended_endpoint(session)
end

-- Appends player session `v` to a reply `out` as its values by position as stored (its number, or the id of one an
-- earlier release made; player, status, data, c_ms, act_ms, end_ms; false, a null, where it has none), then its
-- reservation deadline `until_ms` (false when none): 8 values, no names and no id to build, decoded by
-- codec::stored_player_sessions.
local function append_player(out, v, until_ms)
  local n = #out
  for i = 1, 7 do out[n + i] = v[i] end
  out[n + 8] = until_ms
  return out
end

-- A reply about player sessions of one game session: {outcome, now_ms, '', loc, ip, dns, port} (its `endpoint`),
-- then the player sessions (append_player).
local function players_reply(outcome, now, endpoint)
  return {outcome, int_text(now), '', endpoint[1] or '', endpoint[2] or '', endpoint[3] or '',
    int_text(endpoint[4] or 0)}
end

-- What accept_player.lua and remove_player.lua answer with a player session, which holds no reservation then.
local function player_reply(outcome, now, endpoint, v)
  return append_player(players_reply(outcome, now, endpoint), v, false)
end

-- The reservation deadline, ms, of a live player session (its values `v`), nil unless it is RESERVED. A reservation
-- runs res_ms (its game session's) from when it was made or, when made before the session was activated, from the
-- activation: the deadline follows from the two sessions' fields (`act_ms` and `res_ms`, the game session's; none
-- while it is ACTIVATING) and is written nowhere.
local function reservation_deadline(v, act_ms, res_ms)
  if v[P_STATUS] ~= S.RESERVED or not (act_ms and res_ms) then return nil end
  return math.max(v[P_CREATED], tonumber(act_ms)) + tonumber(res_ms)
end

-- A live player session's fields (player_fields) with its reservation deadline while it is RESERVED.
local function live_player_fields(sid, v, act_ms, res_ms)
  local fields = player_fields(sid, v)
  local deadline = reservation_deadline(v, act_ms, res_ms)
  if deadline then
    fields[#fields + 1] = 'until_ms'
    fields[#fields + 1] = int_text(deadline)
  end
  return fields
end

-- Live player session `n` of game session `sid`: that session's fields `read` (HMGET's values, in that order; the
-- first one every live session has), read in one HMGET with the player's field (which `read` is given at its end),
-- and the player session's values, nil when the session has no such player. {} and nil when the session is not live
-- (ended or gone). An earlier release's player sessions are taken over, or only read when `reading` (in a function
-- that writes nothing).
local function live_player(k, sid, n, read, reading)
  read[#read + 1] = player_field(n)
  local s = redis.call('HMGET', gkey(k, sid), unpack(read))
  local packed = s[#read]
  s[#read] = nil
  if not s[1] then return s, nil end
  if not packed and reading then
    for _, apart in ipairs((players_apart(k, sid))) do
      if apart[1] == n then return s, apart end
    end
  elseif not packed and adopt_players(k, sid) then
    packed = redis.call('HGET', gkey(k, sid), player_field(n))
  end
  return s, packed and cmsgpack.unpack(packed)
end

-- A player session's fields and its game session's {loc, ip, dns, port}, live or ended; nil when there is none. It
-- writes nothing (read.lua and page.lua read it).
local function player_record(k, psid)
  local sid = session_of(psid)
  local n = sid and player_number(sid, psid)
  if not n then return nil end
  local s, v = live_player(k, sid, n, {'loc', 'ip', 'dns', 'port', 'act_ms', 'res_ms'}, true)
  if s[1] then
    if not v then return nil end
    return live_player_fields(sid, v, s[5], s[6]), {s[1], s[2] or '', s[3] or '', s[4] or '0'}
  end
  local p, session = ended_entry(k, sid, n)
  if not p then return nil end
  return player_fields(sid, p), ended_endpoint(session)
end

-- A placement's attempts in this fleet (placements.rs): attempt n in a location creates its session under token
-- `placement:<id>:<n>:<location>`, and once an attempt is refused, looked up or given up without a session, the
-- spend key `placement:<id>:<location>` holds the highest attempt so spent, until the placement's deadline (after
-- which nothing is created for it anyway). A create of a spent attempt creates nothing.
-- `spent`, the highest attempt spent, when the caller has read it.
local function attempt_spent(k, spend, n, deadline, now, spent)
  return now > tonumber(deadline) or tonumber(spent or redis.call('GET', k.idem .. spend) or '0') >= tonumber(n)
end

local function spend_attempt(k, spend, n, deadline, now, spent)
  local key = k.idem .. spend
  if tonumber(spent or redis.call('GET', key) or '0') < tonumber(n) then
    redis.call('SET', key, n, 'PX', math.max(tonumber(deadline) - now, 0) + 1000)
  end
end

-- Keeps a process in `hosting` while it hosts sessions and has room for another. A caller that holds the process's
-- {pstate, max_sess, loc, sessions it hosts} as they are now passes them as `known`, and the sessions it hosted
-- before the change as `before`: one that hosted none or had no room then was not in `hosting`, and is not looked
-- for there (a process that hosts one session at a time never is).
local function track_room(k, id, known, before)
  local key = k.gs .. id
  local s = known
  if not s then
    s = redis.call('HMGET', key, 'pstate', 'max_sess', 'loc')
    s[4] = redis.call('SCARD', key .. ':sessions')
  end
  local max = tonumber(s[2] or '1')
  if s[1] == S.ACTIVE and s[4] > 0 and s[4] < max then
    if not redis.call('ZSCORE', k.hosting, id) then place(k, k.hosting, k.lhosting, id, now_ms(), s[3]) end
  elseif not before or (before > 0 and before < max) then
    place(k, k.hosting, k.lhosting, id, nil, s[3])
  end
end

-- A location's search index (k.search .. <loc>) is one sorted set that holds each indexed session four times, as a
-- member per order a search reads: its id after the order's prefix (SEARCH_PREFIXES; none for the creation order)
-- scored the order's base + its value (SEARCH_BASES; both generated by berth_store::keys::search_layout, from the
-- layout a search reads by). So that a session entering or leaving the index is one ZADD or one ZREM, not four.
-- `free` is a membership, not a count: a search only ever asks it for sessions with a slot, and a player joining or
-- leaving then moves it only when the session fills or stops being full.

-- Takes a game session out of the search index of its location `loc`.
local function unindex_session(k, sid, loc)
  redis.call('ZREM', k.search .. (loc or ''), sid, SEARCH_PREFIXES.p .. sid, SEARCH_PREFIXES.m .. sid,
    SEARCH_PREFIXES.f .. sid)
end

-- Keeps a game session's place in its location's search index: by created, players and max while ACTIVE and its
-- server is not ending; in `free`, by creation time, while it could take a player. `known` as tally_session's;
-- `also`, fields of the session its caller changed, written with its share (move_share).
local function index_session(k, sid, known, also)
  local t = tally_session(k, sid, known, false, nil, also)
  local status, cur, max, srv_end, c_ms = t[3], t[4], t[5], t[7], t[9]
  if status ~= S.ACTIVE or srv_end == '1' then return unindex_session(k, sid, t[1]) end
  local key = k.search .. (t[1] or '')
  local members = {int_text(SEARCH_BASES.c + c_ms), sid, int_text(SEARCH_BASES.p + cur), SEARCH_PREFIXES.p .. sid,
    int_text(SEARCH_BASES.m + max), SEARCH_PREFIXES.m .. sid}
  if takes_players(status, t[6], cur, max, srv_end) then
    extend(members, {int_text(SEARCH_BASES.f + c_ms), SEARCH_PREFIXES.f .. sid})
  else
    redis.call('ZREM', key, SEARCH_PREFIXES.f .. sid)
  end
  redis.call('ZADD', key, unpack(members))
end

-- Keeps the orders that move with a game session's player count: by players, and `free` when the session filled
-- or stopped being full. `known` is what tally_session reads, for a caller that holds it as it stands now;
-- `was_open` whether the session could take a player before (nil when the caller does not know); `also` fields of
-- the session its caller changed, written with its share (move_share); `joined` as tally_session's.
local function index_counts(k, sid, known, was_open, also, joined)
  local t = tally_session(k, sid, known, false, nil, also, joined)
  local s = {t[3], t[1], t[4], t[5], t[6], t[7], t[9]}
  if s[1] ~= S.ACTIVE or s[6] == '1' then return end
  local open = takes_players(s[1], s[5], s[3], s[4], s[6])
  local key = k.search .. (s[2] or '')
  local members = {int_text(SEARCH_BASES.p + s[3]), SEARCH_PREFIXES.p .. sid}
  if open and open ~= was_open then
    extend(members, {int_text(SEARCH_BASES.f + s[7]), SEARCH_PREFIXES.f .. sid})
  elseif open ~= was_open then
    redis.call('ZREM', key, SEARCH_PREFIXES.f .. sid)
  end
  redis.call('ZADD', key, unpack(members))
end

-- Writes that `left` player sessions of game session `sid` ended (`seats`, what its hash takes for them: end_player's
-- answers) with its lowered count and its share, in one HSET. `known`, its {loc, inst, status, cur, max, accept,
-- srv_end, tly, c_ms} before they left (see index_counts).
local function players_left(k, sid, known, seats, left)
  local was_open = takes_players(known[3], known[6], known[4], known[5], known[7])
  local cur = tonumber(known[4]) - left
  known[4] = cur
  index_counts(k, sid, known, was_open, extend({'cur', int_text(cur)}, seats), -left)
end

-- Moves what an earlier release indexed in four sets per location (idx:<loc>:<created | players | max | free>) into
-- each location's search index, up to `limit` sessions a set per call: each is indexed afresh from its record, so
-- that one which ended or changed since is placed as it stands. `locations`, the fleet's, with '' for the servers
-- that carry none. A replica of the earlier release running beside this one writes the old sets again while it
-- runs; the next call moves those too.
local function adopt_indexes(k, locations, limit)
  local old = {}
  for _, loc in ipairs(locations) do
    for _, name in ipairs({'created', 'players', 'max', 'free'}) do old[#old + 1] = k.idx .. loc .. ':' .. name end
  end
  if redis.call('EXISTS', unpack(old)) == 0 then return end
  local seen = {}
  for _, key in ipairs(old) do
    local sids = redis.call('ZRANGE', key, 0, limit - 1)
    for _, sid in ipairs(sids) do
      if not seen[sid] then
        seen[sid] = true
        index_session(k, sid)
      end
    end
    if #sids > 0 then redis.call('ZREM', key, unpack(sids)) end
  end
end

-- The reply of the scripts that change a game session: {outcome, now_ms, replica, version, desired state or '',
-- detail, session fields...}, with the routing of its process and the session's `fields` (as HGETALL answers them)
-- when they are given. `server` is the process's key, or its {replica, version, desired state (desired_text) when
-- the script knows it whole, or '1' when the Rust side builds it from the reply (create.lua)} when the caller holds
-- them.
local function session_reply(outcome, now, detail, server, fields)
  local out = {outcome, int_text(now), '', '0', '', int_text(detail or '')}
  if type(server) == 'string' then server = redis.call('HMGET', server, 'replica', 'ver') end
  if server then out[3], out[4], out[5] = server[1] or '', int_text(server[2] or '0'), server[3] or '' end
  if fields then append_pairs(out, fields) end
  return out
end

-- A process was told to end: its sessions take no new players and leave the search indexes, though they run
-- until the process ends them.
local function server_ending(k, id)
  for _, sid in ipairs(redis.call('SMEMBERS', k.gs .. id .. ':sessions')) do
    redis.call('HSET', gkey(k, sid), 'srv_end', '1')
    index_session(k, sid)
  end
end

-- Appends a player session's timeout, whose record the caller holds: `fields` its flat name/value list,
-- `endpoint` its game session's {loc, ip, dns, port}.
local function player_event(k, type, fields, endpoint, now)
  local entry = {'type', type, 't', int_text(now), 'kind', 'p'}
  for i = 1, #fields do entry[#entry + 1] = fields[i] end
  for i, name in ipairs({'loc', 'ip', 'dns', 'port'}) do
    entry[#entry + 1] = name
    entry[#entry + 1] = endpoint[i] or ''
  end
  -- The session sweep trims the stream to the retention and the deployment's cap (BERTH_SESSION_EVENTS_MAX).
  redis.call('XADD', k.sevents, '*', unpack(entry))
end

-- A game session's fields written once, at its creation: an event carries the others, and a reader joins these from
-- the record (read_events.lua), live or ended, rather than Redis holding them once per event.
local SESSION_FIXED = {fleet = true, loc = true, server = true, inst = true, ip = true, dns = true, port = true,
  c_ms = true, creator = true, placement = true}
-- Fields an event leaves out: the data and matchmaker data (a watcher reads those apart when it asks for them), and
-- the store's own bookkeeping, which no watcher is shown.
local SESSION_UNSHOWN = {data = true, mm = true, tly = true, idem = true, digest = true, notify = true, res_ms = true,
  ret_ms = true, np = true}

-- Appends a game session's transition to the session event stream with the record at `key` as it is now, but for
-- what no event shows (SESSION_UNSHOWN) and the fields a reader joins (SESSION_FIXED); `fields` the record's, when
-- the caller holds them as they are now. Answers the record's fields, for a reply that shows them.
local function session_event(k, type, key, now, fields)
  fields = fields or session_record(key)
  local entry = {'type', type, 't', int_text(now), 'kind', 'g'}
  local status, deadline
  for i = 1, #fields, 2 do
    local name = fields[i]
    if name == 'act_by_ms' then
      deadline = fields[i + 1]
    elseif not SESSION_UNSHOWN[name] and not SESSION_FIXED[name] then
      if name == 'status' then status = fields[i + 1] end
      entry[#entry + 1] = name
      entry[#entry + 1] = fields[i + 1]
    end
  end
  -- An activated session keeps its activation deadline (activation leaves it), which no longer applies.
  if deadline and status == S.ACTIVATING then
    entry[#entry + 1] = 'act_by_ms'
    entry[#entry + 1] = deadline
  end
  -- The session sweep trims the stream to the retention and the deployment's cap (BERTH_SESSION_EVENTS_MAX).
  redis.call('XADD', k.sevents, '*', unpack(entry))
  return fields
end

-- Appends a game session's end (`type`: TERMINATED or ERROR) to the session event stream. Its record does not change
-- after its end, and is kept (packed, with its player sessions) at least as long as the event: the entry names the
-- session and, in `with`, the numbers of the player sessions that ended with it (their values, `players`), and a
-- reader joins the record (read_events.lua) rather than Redis holding it twice.
local function end_event(k, type, sid, now, players)
  local with = {}
  for i, v in ipairs(players) do with[i] = v[1] end
  redis.call('XADD', k.sevents, '*', 'type', type, 't', int_text(now), 'kind', 'e', 'id', sid, 'with',
    table.concat(with, ' '))
end

-- Ends player session `v` (its values), `status` at `now`, when it holds a slot: whether it did. Its values alone
-- change; a session ending with its players keeps them packed with it (keep_ended), not in its hash.
local function close_player(v, status, now)
  if not holds_slot(v) then return false end
  v[P_STATUS], v[P_ENDED] = status, now
  return true
end

-- Ends player session `v` of game session `sid`, COMPLETED or TIMEDOUT at `now`, when it holds a slot (close_player):
-- answers what its game session's hash takes for it (its field, its seat freed), for the caller to write, or
-- nil when it had ended already. Only a timeout is an event of its own (see SessionEventType in
-- the contract), for which `endpoint` is its game session's {loc, ip, dns, port}.
local function end_player(k, sid, v, status, now, endpoint)
  if not close_player(v, status, now) then return nil end
  if status == S.TIMEDOUT then player_event(k, S.PLAYER_SESSION_TIMED_OUT, player_fields(sid, v), endpoint, now) end
  return {player_field(v[1]), cmsgpack.pack(v), seat_field(v[P_PLAYER]), ''}
end

-- The reason the game sessions of a process told to end (`term_reason`, the process's) end with, however the process
-- then ends: FLEET_DELETED when its fleet or location is being deleted, `otherwise` (TRIGGERED_ON_PROCESS_TERMINATE
-- when it ends as told, FORCE_TERMINATED when it is forced) for any other reason.
local function told_end_reason(term_reason, otherwise)
  if term_reason == S.FLEET_DELETED then return S.FLEET_DELETED end
  return otherwise
end

-- Keeps an ended game session as one packed value (see ended_session): `record` its own fields by name as it ended,
-- `players` its player sessions' values by number; its hash goes, and the players hash an earlier release's replica
-- may still have written beside it.
local function keep_ended(k, sid, record, players)
  if record.digest == record.idem then record.digest = nil end
  local values = record_values(record, SESSION_ENDED)
  if values[1] == sid then values[1] = false end
  if values[2] == fleet_of(sid) then values[2] = false end
  values[#SESSION_ENDED + 1] = players
  redis.call('SET', k.gend .. sid, cmsgpack.pack(values))
  redis.call('DEL', gkey(k, sid), gkey(k, sid) .. ':p')
end

-- Ends a game session (TERMINATED or ERROR, with a reason): its player sessions complete, it leaves the search
-- indexes and every deadline, and it is kept packed until its retention from now has passed. Its hash is read once,
-- with its players, and not written again: keep_ended deletes it (`split`, {split_session(its HGETALL)}, when the
-- caller has read it: its record by name becomes the ended one, and its players' values end with it; `pending` as
-- tally_instances'). Answers the record's fields as it ended, or false when it had ended already.
local function end_game_session(k, sid, status, reason, now, split, pending)
  split = split or {split_session(redis.call('HGETALL', gkey(k, sid)))}
  local fields, players, r = split[1], split[2], split[3]
  if not r.status or r.status == S.TERMINATED or r.status == S.ERROR then return false end
  -- None in its hash: an earlier release's, kept apart, are taken over.
  if #players == 0 and r.np ~= '0' then players = live_players(k, sid) end
  -- Asked to end, it ended as asked, whatever else its server was doing.
  if r.status == S.TERMINATING and reason == S.ENDED_BY_SERVER then reason = S.TRIGGERED_ON_PROCESS_TERMINATE end
  redis.call('SREM', k.gs .. r.server .. ':sessions', sid)
  local completed = {}
  for _, v in ipairs(players) do
    if close_player(v, S.COMPLETED, now) then completed[#completed + 1] = v end
  end
  -- Only an ACTIVATING session waits for its activation, only a TERMINATING one for its forced end, and only one
  -- activated with players can wait for their reservations. (An entry an earlier release left in act_due or res_due
  -- is left to the sweep, which finds the session ended.)
  if r.status == S.ACTIVATING or (r.act_ms and #players > 0) then redis.call('ZREM', k.due, sid) end
  if r.status == S.TERMINATING then redis.call('ZREM', k.term_due, sid) end
  redis.call('ZADD', k.ended, int_text(now + tonumber(r.ret_ms)), sid)
  local cur = tonumber(r.cur) - #completed
  tally_session(k, sid, {r.loc, r.inst, status, cur, r.max, r.accept, r.srv_end, r.tly or false, r.c_ms}, true,
    pending)
  if r.status == S.ACTIVE and r.srv_end ~= '1' then unindex_session(k, sid, r.loc) end
  local changed = {status = status, reason = reason, end_ms = int_text(now), cur = int_text(cur), act_by_ms = false,
    term_by_ms = false, tly = false}
  fields = with_changes(fields, changed)
  for name, value in pairs(changed) do r[name] = value or nil end
  local event = S.GAME_SESSION_TERMINATED
  if status == S.ERROR then event = S.GAME_SESSION_ERROR end
  end_event(k, event, sid, now, completed)
  keep_ended(k, sid, r, players)
  return fields
end

-- Ends every open game session of a process.
local function end_sessions(k, key, status, reason, now)
  for _, sid in ipairs(redis.call('SMEMBERS', key .. ':sessions')) do
    end_game_session(k, sid, status, reason, now)
  end
end

-- What release_process reads of a process: SERVER_TALLIED's fields, then its replica and desired-state version.
local RELEASE_READ = {'instance', 'loc', 'pstate', 'util', 'claim_exp_ms', 'istatus', 'health', 'max_sess', 'tly',
  'replica', 'ver'}
-- RELEASE_READ's fields and the process's termination reason, which ending a session reads with them (spelled out:
-- at load, only the redis API is there).
local ENDING_READ = {'instance', 'loc', 'pstate', 'util', 'claim_exp_ms', 'istatus', 'health', 'max_sess', 'tly',
  'replica', 'ver', 'term_reason'}

-- A process whose game session ended without the process ending: its desired state drops the session (a new
-- version), and with no session left open it is ready for another, back in the pool when it may wait there.
-- Answers its {replica, version, desired state when it hosts no session (desired_text)}; nil when it is unknown.
-- `pending` as tally_instances'; `known` its RELEASE_READ fields, when the caller has read them.
local function release_process(k, id, pending, known)
  local key = k.gs .. id
  local s = known or redis.call('HMGET', key, unpack(RELEASE_READ))
  if not s[3] then return nil end
  local routing = {s[10], tonumber(s[11] or '0') + 1}
  -- Written with its share, in one HSET.
  local changed = {'ver', int_text(routing[2])}
  -- Its caller has just ended one of its sessions: a process that hosts one at a time hosts none now.
  local open = 0
  if tonumber(s[8] or '1') > 1 then open = redis.call('SCARD', key .. ':sessions') end
  if open == 0 and s[3] == S.ACTIVE then
    s[3] = S.STANDING_BY
    changed[3], changed[4] = 'pstate', s[3]
    -- May wait in the pool (poolable): AVAILABLE and not reporting UNHEALTHY.
    if s[4] == S.AVAILABLE and s[7] ~= S.UNHEALTHY then to_pool(k, k.pool, id, s[6], now_ms(), s[2]) end
  end
  track_room(k, id, {s[3], s[8], s[2], open}, open + 1)
  tally_server(k, id, false, s, open, pending, changed)
  -- Ready and hosting nothing, it has nothing else to be told (one told to end is TERMINATING).
  if open == 0 and s[3] == S.STANDING_BY then routing[3] = desired_text(routing[2], s[3], {}) end
  return routing
end
