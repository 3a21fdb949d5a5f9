#!/usr/bin/env bash
# make bench: the keyauth edge against its peers, side by side, in one run.
# One nginx (worker_processes 1, pinned to CPU 0) serves every configuration
# on its own port; wrk (1 thread on CPU 1, keep-alive) measures each in
# interleaved rounds; the table reports the median round. Loopback only.
#
# Environment: ROUNDS (3), SECONDS_PER_RUN (5), CONNECTIONS (32), SCALE_KEYS (1000000)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_PER_RUN:-5}
CONNS=${CONNECTIONS:-32}
SCALE_KEYS=${SCALE_KEYS:-1000000}
W=$(mktemp -d /tmp/keyauth-bench-XXXXXX)
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$W"' EXIT
CTL="$ROOT/build/keyauthctl"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
secret() { sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p'; }
account() { "$CTL" --db "$1" --json account create --name bench --entitlement 10000000 --max-keys 100000000 | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p'; }

echo "seeding stores ..." >&2
DB=$W/db; A=$(account "$DB")
KEY=$("$CTL" --db "$DB" --json key create --account "$A" --name fast --scope ip:read --rate 10000000 | secret)
SLOW=$("$CTL" --db "$DB" --json key create --account "$A" --name slow --scope ip:read --rate 1 | secret)
# a well-formed key (valid checksum) that is not in the store: the costly miss
UNKNOWN=$("$CTL" --db "$W/other" --json account create --name x --entitlement 1 >/dev/null; \
          "$CTL" --db "$W/other" --json key create --account "$(account "$W/other")" --name x --scope ip:read --rate 1 | secret)
"$CTL" --db "$DB" plans import "$ROOT/lmdb_schema/plans.json" >/dev/null
"$CTL" --db "$DB" fx set 83.50 >/dev/null
"$CTL" --db "$DB" --json key create --account "$A" --name k1k --scope ip:read --rate 10000000 --count 999 \
    | sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p' > "$W/keys-1k.txt"
echo "$KEY" >> "$W/keys-1k.txt"

DB_BIG=$W/db-big; B=$(account "$DB_BIG")
"$CTL" --db "$DB_BIG" key create --account "$B" --name big --scope ip:read --rate 10000000 --count "$SCALE_KEYS" \
    | sed -n 's/^secret (shown once): //p' | awk 'NR % 20 == 1' > "$W/keys-big.txt"

# nginx's own peer: a map of 1000 static keys + limit_req keyed on the header
{
    echo 'map $http_authorization $native_key {'
    echo '    default "";'
    n=0; while read -r k; do n=$((n+1)); echo "    \"Bearer $k\" k$n;"; done < "$W/keys-1k.txt"
    echo '}'
} > "$W/native-map.conf"

P_RET=$(port); P_KA=$(port); P_NAT=$(port); P_AR=$(port); P_VER=$(port); P_PL=$(port); P_ST=$(port); P_BIG=$(port)
P_NOLIM=$(port); P_GIF=$(port)
mkdir -p "$W/logs" "$W/html"

cat > "$W/nginx.conf" <<CONF
load_module $ROOT/build/ngx_http_keyauth_module.so;
$( [ "$(id -u)" = 0 ] && echo "user root root;" )
worker_processes 1;
worker_cpu_affinity 01;
error_log $W/logs/error.log warn;
pid $W/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $W/tmp;
    proxy_temp_path $W/tmp;
    keyauth_db $DB;
    keyauth_zone rates:16m;
    map_hash_bucket_size 128;
    map_hash_max_size 4096;
    include $W/native-map.conf;
    limit_req_zone \$native_key zone=native:16m rate=10000000r/m;
    upstream verifier { server 127.0.0.1:$P_VER; keepalive 64; }

    server { listen 127.0.0.1:$P_RET;   # baseline
        location / { return 200 "GIF89a-------------------------------------"; } }
    server { listen 127.0.0.1:$P_GIF;   # the same content handler, no auth
        location / { empty_gif; } }
    server { listen 127.0.0.1:$P_KA;    # keyauth: key + scope + rate limit
        location / { keyauth on; keyauth_scope ip:read; empty_gif; } }
    server { listen 127.0.0.1:$P_NAT;   # nginx-native: map + limit_req
        location / { if (\$native_key = "") { return 401; }
                     limit_req zone=native burst=1000000 nodelay; empty_gif; } }
    server { listen 127.0.0.1:$P_AR;    # auth_request to a verifier doing the same LMDB check
        location / { auth_request /_verify; empty_gif; }
        location = /_verify { internal; proxy_pass http://verifier/verify;
            proxy_http_version 1.1; proxy_set_header Connection "";
            proxy_pass_request_body off; proxy_set_header Content-Length ""; } }
    server { listen 127.0.0.1:$P_VER;
        location /verify { keyauth on; keyauth_scope ip:read; empty_gif; } }
    server { listen 127.0.0.1:$P_PL;    # the plan catalog
        location /api/plans { keyauth_plans; } }
    server { listen 127.0.0.1:$P_ST;    # a static file of the same bytes
        root $W/html; location / { default_type application/json; } }
}
CONF
# one keyauth_db per nginx: the big store gets a second nginx of its own
cat > "$W/nginx-big.conf" <<CONF
load_module $ROOT/build/ngx_http_keyauth_module.so;
$( [ "$(id -u)" = 0 ] && echo "user root root;" )
worker_processes 1;
worker_cpu_affinity 01;
error_log $W/logs/error-big.log warn;
pid $W/nginx-big.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $W/tmp;
    keyauth_db $DB_BIG;
    keyauth_zone rates:64m;
    server { listen 127.0.0.1:$P_BIG;
        location / { keyauth on; keyauth_scope ip:read; empty_gif; } }
}
CONF

# and one without keyauth_zone: the same check with no rate limit
sed -e "s|$DB_BIG|$DB|" -e "s|nginx-big.pid|nginx-nolim.pid|" -e "s|error-big.log|error-nolim.log|" \
    -e "s|listen 127.0.0.1:$P_BIG;|listen 127.0.0.1:$P_NOLIM;|" -e "/keyauth_zone/d" \
    "$W/nginx-big.conf" > "$W/nginx-nolim.conf"

nginx -p "$W" -c "$W/nginx.conf" -e "$W/logs/error.log"
nginx -p "$W" -c "$W/nginx-big.conf" -e "$W/logs/error-big.log"
nginx -p "$W" -c "$W/nginx-nolim.conf" -e "$W/logs/error-nolim.log" 2>/dev/null
[ -n "${BENCH_KEEP:-}" ] || trap 'for c in nginx nginx-big nginx-nolim; do nginx -p "$W" -c "$W/$c.conf" -s stop 2>/dev/null || true; done; rm -rf "$W"' EXIT
sleep 0.5
curl -s "http://127.0.0.1:$P_PL/api/plans" > "$W/html/plans.json"

check() { # name expected-status url [curl args]
    local got; got=$(curl -s -o /dev/null -w '%{http_code}' "${@:4}" "$3" 2>/dev/null || true)
    [ "$got" = "$2" ] || { echo "bench: $1 answered $got, not $2" >&2; exit 1; }
}

declare -A URL HDR SCRIPT STATUS
add() { URL[$1]=$2; HDR[$1]=${3:-}; SCRIPT[$1]=${4:-}; STATUS[$1]=${5:-200}; NAMES+=("$1"); }
NAMES=()
add "return 200 (baseline)"       "http://127.0.0.1:$P_RET/v1/ip/8.8.8.8"
add "empty_gif, no auth"           "http://127.0.0.1:$P_GIF/v1/ip/8.8.8.8"
add "keyauth: key+scope+limit"    "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "Authorization: Bearer $KEY"
add "keyauth: key+scope, no limit" "http://127.0.0.1:$P_NOLIM/v1/ip/8.8.8.8" "Authorization: Bearer $KEY"
add "nginx map + limit_req"       "http://127.0.0.1:$P_NAT/v1/ip/8.8.8.8" "Authorization: Bearer $KEY"
add "auth_request to verifier"    "http://127.0.0.1:$P_AR/v1/ip/8.8.8.8"  "Authorization: Bearer $KEY"
add "/api/plans"                  "http://127.0.0.1:$P_PL/api/plans"
add "static file, same bytes"     "http://127.0.0.1:$P_ST/plans.json"
add "keyauth, 1k keys, random"    "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "" "$W/keys-1k.txt"
add "keyauth, ${SCALE_KEYS} keys, random" "http://127.0.0.1:$P_BIG/v1/ip/8.8.8.8" "" "$W/keys-big.txt"
add "unknown key (401)"           "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "Authorization: Bearer $UNKNOWN" "" 401
add "garbage key (401)"           "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "Authorization: Bearer ka_garbage" "" 401
add "over the limit (429)"        "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "Authorization: Bearer $SLOW" "" 429

curl -s -o /dev/null -H "Authorization: Bearer $SLOW" "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  # spend the burst
for n in "${NAMES[@]}"; do
    if [ -n "${SCRIPT[$n]}" ]; then
        check "$n" 200 "${URL[$n]}" -H "Authorization: Bearer $(head -1 "${SCRIPT[$n]}")"
    elif [ -n "${HDR[$n]}" ]; then
        check "$n" "${STATUS[$n]}" "${URL[$n]}" -H "${HDR[$n]}"
    else
        check "$n" "${STATUS[$n]}" "${URL[$n]}"
    fi
done

run_wrk() { # name -> "rps p50 p99"
    local n=$1 out args=(-t1 -c"$CONNS" -d"${SECS}s" --latency)
    local wrk=(taskset -c 1 wrk)  # nginx's worker is pinned to CPU 0
    if [ -n "${SCRIPT[$n]}" ]; then
        out=$("${wrk[@]}" "${args[@]}" -s "$ROOT/bench/wrk/random_key.lua" "${URL[$n]}" -- "${SCRIPT[$n]}" /v1/ip/8.8.8.8)
    elif [ -n "${HDR[$n]}" ]; then
        out=$("${wrk[@]}" "${args[@]}" -H "${HDR[$n]}" "${URL[$n]}")
    else
        out=$("${wrk[@]}" "${args[@]}" "${URL[$n]}")
    fi
    if grep -q "Non-2xx" <<<"$out" && [ "${STATUS[$n]}" = 200 ]; then
        echo "bench: $n had non-2xx answers" >&2; exit 1
    fi
    awk '/Requests\/sec/ {r=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {print r, p50, p99}' <<<"$out"
}

declare -A RES
for round in $(seq "$ROUNDS"); do
    echo "round $round/$ROUNDS ..." >&2
    for n in "${NAMES[@]}"; do RES["$n"]+="$(run_wrk "$n");"; done
done

median() { tr ';' '\n' | grep . | sort -n -k1,1 | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}'; }
base=$(median <<<"${RES["return 200 (baseline)"]}" | cut -d' ' -f1)
declare -A MED
for n in "${NAMES[@]}"; do MED[$n]=$(median <<<"${RES[$n]}"); done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo
echo "keyauth bench — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(nginx -v 2>&1 | cut -d/ -f2), wrk -t1 -c$CONNS -d${SECS}s, median of $ROUNDS rounds"
echo
printf '| %-32s | %10s | %8s | %8s | %10s |\n' configuration req/s p50 p99 "vs return"
printf '|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..34})" "------------" "----------" "----------" "------------"
for n in "${NAMES[@]}"; do
    read -r rps p50 p99 <<<"${MED[$n]}"
    printf '| %-32s | %10.0f | %8s | %8s | %10s |\n' "$n" "$rps" "$p50" "$p99" "$(ratio "$rps" "$base")"
done
k=$(cut -d' ' -f1 <<<"${MED["keyauth: key+scope+limit"]}")
echo
echo "keyauth / nginx map+limit_req:   $(ratio "$k" "$(cut -d' ' -f1 <<<"${MED["nginx map + limit_req"]}")")"
echo "keyauth / auth_request:          $(ratio "$k" "$(cut -d' ' -f1 <<<"${MED["auth_request to verifier"]}")")"
echo "/api/plans / static file:        $(ratio "$(cut -d' ' -f1 <<<"${MED["/api/plans"]}")" "$(cut -d' ' -f1 <<<"${MED["static file, same bytes"]}")")"
echo "${SCALE_KEYS} keys / 1k keys:    $(ratio "$(cut -d' ' -f1 <<<"${MED["keyauth, ${SCALE_KEYS} keys, random"]}")" "$(cut -d' ' -f1 <<<"${MED["keyauth, 1k keys, random"]}")")"
