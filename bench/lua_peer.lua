-- The Kong-style Lua peer of make bench (key-auth + rate-limiting with the
-- "local" policy): keys in a lua_shared_dict, plain, as Kong's key-auth
-- stores them by default; the scope checked; a counter per key and minute
-- window; the RateLimit headers. Used by bench/run.sh and bench/callgrind.sh.
local h = ngx.var.http_authorization
local key = h and h:match("^%s*[Bb][Ee][Aa][Rr][Ee][Rr]%s+(%S+)%s*$")
if not key then return ngx.exit(401) end
local v = ngx.shared.api_keys:get(key)
if not v then return ngx.exit(401) end
local scopes, limit = v:match("^(%S+) (%d+)$")
if scopes ~= "ip:read" then return ngx.exit(403) end
limit = tonumber(limit)
local now = ngx.now()
local used = ngx.shared.rate_counters:incr(key .. ":" .. math.floor(now / 60), 1, 0, 61)
if used > limit then return ngx.exit(429) end
ngx.header["RateLimit-Policy"] = '"per-key";q=' .. limit .. ';w=60'
ngx.header["RateLimit"] = '"per-key";r=' .. (limit - used) .. ';t=' .. math.ceil(60 - now % 60)
