-- wrk script: sends GET <path> with a Bearer key and counts statuses.
-- usage: wrk ... -s count_status.lua URL -- KEY PATH
local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function init(args)
   ok, limited, other = 0, 0, 0
   local headers = { ["Authorization"] = "Bearer " .. args[1] }
   req = wrk.format("GET", args[2], headers)
end

function request()
   return req
end

function response(status, headers, body)
   if status == 200 then
      ok = ok + 1
   elseif status == 429 then
      limited = limited + 1
   else
      other = other + 1
   end
end

function done(summary, latency, requests)
   local o, l, x = 0, 0, 0
   for _, t in ipairs(threads) do
      o = o + t:get("ok")
      l = l + t:get("limited")
      x = x + t:get("other")
   end
   io.write(string.format("RESULT ok=%d limited=%d other=%d duration_us=%d\n",
                          o, l, x, summary.duration))
end
