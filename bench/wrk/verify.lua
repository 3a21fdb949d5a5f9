-- wrk script: POST a keyauth_verify body for one key (the same check as the
-- access phase's row: scope ip:read, cost 1).
-- usage: wrk ... -s verify.lua URL -- SECRET
function init(args)
   local body = '{"key":"' .. args[1] .. '","scopes":["ip:read"]}'
   wrk.method = "POST"
   wrk.body = body
   wrk.headers["Content-Type"] = "application/json"
end
