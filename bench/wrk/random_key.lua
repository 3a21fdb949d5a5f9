-- wrk script: GET <path> with a key drawn at random from a file of secrets.
-- usage: wrk ... -s random_key.lua URL -- KEYS_FILE PATH
local keys, path = {}, "/"

function init(args)
   for line in io.lines(args[1]) do
      keys[#keys + 1] = "Bearer " .. line
   end
   path = args[2]
   math.randomseed(os.time() + tonumber(tostring(keys):match("0x(%x+)") or "0", 16) % 100000)
end

function request()
   return wrk.format("GET", path, { ["Authorization"] = keys[math.random(#keys)] })
end
