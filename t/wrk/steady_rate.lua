-- wrk script: measures a key's steady admission rate once its burst is spent,
-- however long spending the burst takes on this machine.
-- usage: wrk ... -s steady_rate.lua URL -- KEY PATH WINDOW_SECONDS
-- Each thread notes the monotonic instant of its first 429 and the instants of
-- the 200s after it, and ends the run WINDOW_SECONDS later (-d is the limit); done() counts the 200s in
-- the window every thread measured (from the latest first 429 to the earliest
-- last answer), so a slow start or a slow thread shortens nothing it counts.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } keyauth_timespec;
int clock_gettime(int clk_id, keyauth_timespec *tp);
int getpid(void);
long syscall(long number, ...);
]]
local CLOCK_MONOTONIC = 1
local SYS_tgkill, SIGINT = 234, 2   -- x86_64
local ts = ffi.new("keyauth_timespec")
local function now()
   ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) / 1e9
end

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function init(args)
   other, first_limited, last_answer = 0, 0, 0
   admitted = {}
   window = tonumber(args[3])
   local headers = { ["Authorization"] = "Bearer " .. args[1] }
   req = wrk.format("GET", args[2], headers)
end

function request()
   return req
end

function response(status, headers, body)
   local t = now()
   last_answer = t
   if status == 429 then
      if first_limited == 0 then first_limited = t end
   elseif status == 200 then
      if first_limited > 0 then admitted[#admitted + 1] = t end
   else
      other = other + 1
   end
   if first_limited > 0 and t - first_limited >= window then
      -- wrk's main thread sleeps out -d unless SIGINT reaches it: end the run
      -- there (its handler stops every thread) instead of waiting for -d
      -- (variadic arguments go as C longs: LuaJIT would pass doubles)
      local pid = ffi.cast("long", ffi.C.getpid())
      ffi.C.syscall(SYS_tgkill, pid, pid, ffi.cast("long", SIGINT))
   end
end

function done(summary, latency, requests)
   local from, to, x = 0, math.huge, 0
   for _, t in ipairs(threads) do
      local first = t:get("first_limited")
      if first == 0 then
         io.write("RESULT burst_unspent\n")
         return
      end
      from = math.max(from, first)
      to = math.min(to, t:get("last_answer"))
      x = x + t:get("other")
   end
   local n = 0
   for _, t in ipairs(threads) do
      for _, at in ipairs(t:get("admitted")) do
         if at >= from and at <= to then n = n + 1 end
      end
   end
   io.write(string.format("RESULT admitted=%d other=%d window_us=%d\n",
                          n, x, math.floor((to - from) * 1e6)))
end
