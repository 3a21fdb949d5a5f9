-- wrk script: GET <path> with a key drawn uniformly at random from a file of
-- secrets, one per line, all of the same length.
-- usage: wrk ... -s random_key.lua URL -- KEYS_FILE PATH
-- The file is held as one string (10M keys: 420 MB) and every request is the
-- same bytes around the key, split once in init: per request the client
-- draws a line and joins three strings, whatever the number of keys, so the
-- draw covers every key of the store rather than a sample.
local keys, width, count, head, tail

function init(args)
   local f = assert(io.open(args[1], "rb"))
   keys = f:read("*a")
   f:close()
   width = (keys:find("\n", 1, true) or (#keys + 1))  -- a line and its newline
   count = math.floor(#keys / width)
   assert(count > 0 and count * width == #keys, "keys must be lines of one length")
   local marker = "@KEY@"
   local req = wrk.format("GET", args[2], { ["Authorization"] = "Bearer " .. marker })
   local at = req:find(marker, 1, true)
   head, tail = req:sub(1, at - 1), req:sub(at + #marker)
   math.randomseed(os.time())
end

function request()
   local at = math.random(0, count - 1) * width
   return head .. keys:sub(at + 1, at + width - 1) .. tail
end
