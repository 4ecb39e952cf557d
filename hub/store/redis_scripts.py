"""The Lua scripts the Redis store (``hub.store.redis``) runs on the server: each is one
atomic step over several keys (the key layout is in that module's docstring).

* ``WRITE``: a write-behind batch, or a part of it, session by session (for each: the writer
  check, the events, the metadata, the snapshot, the trim; one result per session);
  ``MARK_CLEAN``: a clean shutdown of a log's writer;
* ``CLAIM``, ``RENEW``, ``CLAIM_FROM``, ``RELEASE``: a session's owner key (compare and set);
* ``ADD_LINK``, ``REVOKE_LINK``, ``USE_LINK``: a share link's hash and the entry of the
  stream of link changes, written together (``CHANGED``).
"""

from __future__ import annotations

__all__ = [
    "ADD_LINK",
    "CHANGED",
    "CLAIM",
    "CLAIM_FROM",
    "MARK_CLEAN",
    "RELEASE",
    "RENEW",
    "REVOKE_LINK",
    "USE_LINK",
    "WRITE",
]

WRITE = """
local node = ARGV[1]
-- One session's part: KEYS meta, stream, snap from k; its header at ARGV[a] (create, epoch,
-- lineage, last seq, trim below, snapshot, rows) and its rows (5 fields each) after it.
local function write(k, a, rows)
  local meta, stream, snap = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  if ARGV[a] == '1' and redis.call('EXISTS', meta) == 0 then
    redis.call('HSET', meta, 'epoch', ARGV[a + 1], 'lineage', ARGV[a + 2], 'writer', node,
               'clean', '0', 'last_seq', '0')
  end
  local writer = redis.call('HGET', meta, 'writer')
  if not writer then return -1 end
  if writer ~= node then return 0 end
  local last = tonumber(redis.call('HGET', meta, 'last_seq'))
  local first = a + 7
  local stop = first + 5 * rows
  if rows > 0 and tonumber(ARGV[first]) ~= last + 1 then
    -- A retry of a call whose answer was lost (a timeout) finds its events written already.
    if tonumber(ARGV[first]) <= last and tonumber(ARGV[stop - 5]) <= last then return 1 end
    return 0
  end
  for i = first, stop - 1, 5 do
    redis.call('XADD', stream, '0-' .. ARGV[i], 'm', ARGV[i + 1], 'o', ARGV[i + 2],
               'v2', ARGV[i + 3], 'f', ARGV[i + 4])
  end
  redis.call('HSET', meta, 'epoch', ARGV[a + 1], 'lineage', ARGV[a + 2], 'last_seq', ARGV[a + 3],
             'clean', '0')
  if ARGV[a + 5] ~= '' then redis.call('SET', snap, ARGV[a + 5]) end
  if tonumber(ARGV[a + 4]) > 1 then redis.call('XTRIM', stream, 'MINID', '0-' .. ARGV[a + 4]) end
  return 1
end
local results = {}
local a = 2
for k = 1, #KEYS, 3 do
  local rows = tonumber(ARGV[a + 6])
  results[#results + 1] = write(k, a, rows)
  a = a + 7 + 5 * rows
end
return results
"""

RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

# A claim is a renewal of a key nobody holds yet, set first.
CLAIM = (
    """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
"""
    + RENEW
)

CLAIM_FROM = """
if redis.call('GET', KEYS[1]) == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
  return 1
end
return 0
"""

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

MARK_CLEAN = """
if redis.call('HGET', KEYS[1], 'writer') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'clean', '1', 'writer', '')
end
return 1
"""

# KEYS: the link's hash, the changes stream, the change counter, the id set;
# ARGV: the link id, the changes stream's length, then what each script says.
CHANGED = """
local function changed()
  local n = redis.call('INCR', KEYS[3])
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'n', n, 'id', ARGV[1],
             unpack(redis.call('HGETALL', KEYS[1])))
end
"""

ADD_LINK = (
    CHANGED
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[3], 'max', ARGV[4], 'uses', ARGV[6])
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'rat', ARGV[7], 'rby', ARGV[8]) end
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
redis.call('SADD', KEYS[4], ARGV[1])
changed()
return 1
"""
)

REVOKE_LINK = (
    CHANGED
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if redis.call('HEXISTS', KEYS[1], 'rat') == 0 then
  redis.call('HSET', KEYS[1], 'rat', ARGV[3], 'rby', ARGV[4])
  changed()
end
return redis.call('HGETALL', KEYS[1])
"""
)

USE_LINK = (
    CHANGED
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown'} end
local status = 'ok'
local max = redis.call('HGET', KEYS[1], 'max')
if redis.call('HEXISTS', KEYS[1], 'rat') == 1 then
  status = 'revoked'
elseif max and max ~= '' and tonumber(redis.call('HGET', KEYS[1], 'uses')) >= tonumber(max) then
  status = 'used_up'
else
  redis.call('HINCRBY', KEYS[1], 'uses', 1)
  changed()
end
local out = {status}
for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do out[#out + 1] = v end
return out
"""
)
