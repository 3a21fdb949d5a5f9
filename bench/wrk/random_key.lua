-- wrk script: GET <path> with a key drawn at random from a file of secrets.
-- usage: wrk ... -s random_key.lua URL -- KEYS_FILE PATH
-- Every request is formatted once, in init: per request the client only
-- draws one, so that a large key file costs the client no more than a
-- small one (beyond the cache miss of the draw) and the server is measured.
local requests = {}

function init(args)
   local path = args[2]
   for line in io.lines(args[1]) do
      requests[#requests + 1] = wrk.format("GET", path, { ["Authorization"] = "Bearer " .. line })
   end
   math.randomseed(os.time() + tonumber(tostring(requests):match("0x(%x+)") or "0", 16) % 100000)
end

function request()
   return requests[math.random(#requests)]
end
