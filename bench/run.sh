#!/usr/bin/env bash
# make bench: the keyauth edge against its peers, side by side, in one run.
# One nginx (worker_processes 1, pinned to CPU 0) serves most configurations
# on their own ports; the Lua peer and each large store get an nginx of their
# own (also pinned to CPU 0). wrk (1 thread on CPU 1, keep-alive) measures
# each in interleaved rounds, and the nginx worker's CPU time (user + system,
# /proc/PID/stat) over each run gives its CPU per request (every other round
# runs the configurations in reverse order); the table reports the median
# round, and each contract line of DESIGN.md its ratio per round, by CPU per
# request and by req/s: median [min-max]. Then bench/callgrind.sh counts
# instructions. Loopback only.
#
# Environment: ROUNDS (5), SECONDS_PER_RUN (5), CONNECTIONS (32),
# SCALE_KEYS ("1000000 10000000"; empty: none), CALLGRIND (1; 0 skips it),
# PROFILE (set: the per-piece profile of bench/profile.sh instead)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-5}
SECS=${SECONDS_PER_RUN:-5}
CONNS=${CONNECTIONS:-32}
SCALE_KEYS=${SCALE_KEYS-1000000 10000000}
W=$(mktemp -d /tmp/keyauth-bench-XXXXXX)
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$W"' EXIT
CTL="$ROOT/build/keyauthctl"

# a free loopback port, never one this run has handed out already (the
# kernel may offer a port again once its probe socket is closed)
port() {
    local p
    while :; do
        p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        grep -qx "$p" "$W/ports" 2>/dev/null || { echo "$p" >> "$W/ports"; echo "$p"; return; }
    done
}
secret() { sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p'; }
account() { "$CTL" --db "$1" ${2:+--map-size "$2"} --json account create --name bench --entitlement 10000000 --max-keys 100000000 | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p'; }

echo "seeding stores ..." >&2
DB=$W/db; A=$(account "$DB")
KEY=$("$CTL" --db "$DB" --json key create --account "$A" --name fast --scope ip:read --rate 10000000 | secret)
SLOW=$("$CTL" --db "$DB" --json key create --account "$A" --name slow --scope ip:read --rate 1 | secret)
# the same check with quotas in force: the key's own (credits) and its
# account's (a month), both far from used up
AQ=$(account "$DB")
"$CTL" --db "$DB" account update "$AQ" --quota 100000000000/month >/dev/null
QKEY=$("$CTL" --db "$DB" --json key create --account "$AQ" --name quota --scope ip:read --rate 10000000 \
       --quota 100000000000/total | secret)
# a key limited to 32 CIDRs, the client's (127.0.0.1) the last: allowedIps' worst case
IPS=(); for i in $(seq 0 30); do IPS+=(--allow-ip "10.$i.0.0/16"); done
IPKEY=$("$CTL" --db "$DB" --json key create --account "$A" --name ips --scope ip:read --rate 10000000 \
        "${IPS[@]}" --allow-ip 127.0.0.0/8 | secret)
# a well-formed key (valid checksum) that is not in the store: the costly miss
UNKNOWN=$("$CTL" --db "$W/other" --json account create --name x --entitlement 1 >/dev/null; \
          "$CTL" --db "$W/other" --json key create --account "$(account "$W/other")" --name x --scope ip:read --rate 1 | secret)
"$CTL" --db "$DB" plans import "$ROOT/lmdb_schema/plans.json" >/dev/null
"$CTL" --db "$DB" fx set 83.50 >/dev/null
"$CTL" --db "$DB" --json key create --account "$A" --name k1k --scope ip:read --rate 10000000 --count 999 \
    | sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p' > "$W/keys-1k.txt"
echo "$KEY" >> "$W/keys-1k.txt"

# The large stores, made as an operator would (keyauthctl --count); their
# bulk creation rate and bytes a key on disk are figures of their own. wrk
# draws uniformly from all of each store's keys (bench/wrk/random_key.lua).
: > "$W/scale.txt"
: > "$W/store-bytes.txt"
for n in $SCALE_KEYS; do
    # a map of 4 KiB a key (the file is sparse): room for the free pages
    # that batches of a million leave behind
    db=$W/db-$n; acc=$(account "$db" $(( n / 256 > 4096 ? n / 256 : 4096 )))
    # in ten commands of n/10 keys, as issue 30's store line counts it: each
    # batch lands on a store nine times its size at most
    echo "creating $n keys in ten commands ..." >&2
    : > "$W/keys-$n.txt"
    t0=$(date +%s.%N)
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        "$CTL" --db "$db" key create --account "$acc" --name big --scope ip:read --rate 10000000 --count $(( n / 10 )) \
            | sed -n 's/^secret (shown once): //p' >> "$W/keys-$n.txt"
    done
    t1=$(date +%s.%N)
    pages=$(mdb_stat -e "$db" | awk '/Number of pages used/ {print $5}')
    free=$(mdb_stat -ef "$db" | awk '/Free pages:/ {print $3}')
    psize=$(mdb_stat -e "$db" | awk '/Page size/ {print $3}')
    awk -v n="$n" -v t="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" -v p="$pages" -v f="$free" -v s="$psize" 'BEGIN {
        printf "%d keys: created in ten commands in %.1f s (%.0f keys/s); %.0f bytes a key on disk (%.0f in tables, %.0f free pages)\n",
               n, t, n / t, p * s / n, (p - f) * s / n, f * s / n }' >> "$W/scale.txt"
    awk -v n="$n" -v p="$pages" -v s="$psize" 'BEGIN { printf "%d %.0f\n", n, p * s / n }' >> "$W/store-bytes.txt"
done

# nginx's own peer: a map of 1000 static keys + limit_req keyed on the header
{
    echo 'map $http_authorization $native_key {'
    echo '    default "";'
    n=0; while read -r k; do n=$((n+1)); echo "    \"Bearer $k\" k$n;"; done < "$W/keys-1k.txt"
    echo '}'
} > "$W/native-map.conf"

P_RET=$(port); P_KA=$(port); P_NAT=$(port); P_AR=$(port); P_VER=$(port); P_PL=$(port); P_ST=$(port)
P_NOLIM=$(port); P_NATH=$(port); P_GIF=$(port); P_LUA=$(port); P_QU=$(port); P_VFY=$(port)
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
    server { listen 127.0.0.1:$P_QU;    # keyauth with a key quota and an account quota
        location / { keyauth on; keyauth_scope ip:read; empty_gif; } }
    server { listen 127.0.0.1:$P_VFY;   # keyauth_verify: the same check, asked by POST
        location = /v1/verify { keyauth_verify; } }
    server { listen 127.0.0.1:$P_NAT;   # nginx-native: map + limit_req
        location / { if (\$native_key = "") { return 401; }
                     limit_req zone=native burst=1000000 nodelay; empty_gif; } }
    server { listen 127.0.0.1:$P_NATH;  # the same, answering with keyauth's two headers
        location / { if (\$native_key = "") { return 401; }
                     add_header RateLimit-Policy '"per-key";q=10000000;w=60';
                     add_header RateLimit '"per-key";r=9999999;t=1';
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
# One keyauth_db per nginx: each large store gets an nginx of its own, and
# so does the same check with no keyauth_zone (no rate limit).
small_nginx() { # name db port [zone line]
    cat > "$W/nginx-$1.conf" <<CONF
load_module $ROOT/build/ngx_http_keyauth_module.so;
$( [ "$(id -u)" = 0 ] && echo "user root root;" )
worker_processes 1;
worker_cpu_affinity 01;
error_log $W/logs/error-$1.log warn;
pid $W/nginx-$1.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $W/tmp;
    keyauth_db $2;
    ${4:-}
    server { listen 127.0.0.1:$3;
        location / { keyauth on; keyauth_scope ip:read; empty_gif; } }
}
CONF
    EXTRA+=("$1")
}
EXTRA=()
declare -A P_SCALE
# each large store's zone holds every key's rate and usage state (96 bytes a
# key, sized at 128): the draw reaches them all
for n in $SCALE_KEYS; do
    P_SCALE[$n]=$(port)
    small_nginx "big-$n" "$W/db-$n" "${P_SCALE[$n]}" "keyauth_zone rates:$(( n * 128 / 1048576 > 64 ? n * 128 / 1048576 : 64 ))m;"
done
small_nginx nolim "$DB" "$P_NOLIM"

# A Kong-style Lua peer (bench/lua_peer.lua): key-auth + rate-limiting with
# the "local" policy, keys in a lua_shared_dict.
cat > "$W/nginx-lua.conf" <<CONF
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
$( [ "$(id -u)" = 0 ] && echo "user root root;" )
worker_processes 1;
worker_cpu_affinity 01;
error_log $W/logs/error-lua.log warn;
pid $W/nginx-lua.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $W/tmp;
    lua_shared_dict api_keys 16m;
    lua_shared_dict rate_counters 16m;
    init_by_lua_block {
        local keys = ngx.shared.api_keys
        for line in io.lines("$W/keys-1k.txt") do keys:set(line, "ip:read 10000000") end
    }
    server { listen 127.0.0.1:$P_LUA;
        location / {
            access_by_lua_file $ROOT/bench/lua_peer.lua;
            empty_gif;
        }
    }
}
CONF
EXTRA+=(lua)

# stopped on every exit, also when one of them fails to start
[ -n "${BENCH_KEEP:-}" ] || trap 'for c in "" "${EXTRA[@]/#/-}"; do nginx -p "$W" -c "$W/nginx$c.conf" -s stop 2>/dev/null || true; done; rm -rf "$W"' EXIT
nginx -p "$W" -c "$W/nginx.conf" -e "$W/logs/error.log"
for c in "${EXTRA[@]}"; do nginx -p "$W" -c "$W/nginx-$c.conf" -e "$W/logs/error-$c.log"; done
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$P_LUA/" && break; sleep 0.1; done
curl -s "http://127.0.0.1:$P_PL/api/plans" > "$W/html/plans.json"

check() { # name expected-status url [curl args]
    local got; got=$(curl -s -o /dev/null -w '%{http_code}' "${@:4}" "$3" 2>/dev/null || true)
    [ "$got" = "$2" ] || { echo "bench: $1 answered $got, not $2" >&2; exit 1; }
}

declare -A URL HDR SCRIPT STATUS PIDF POST
# add NAME URL [HEADER] [KEY FILE] [STATUS]; PIDF: the nginx that serves it
add() { URL[$1]=$2; HDR[$1]=${3:-}; SCRIPT[$1]=${4:-}; STATUS[$1]=${5:-200}; PIDF[$1]=$W/nginx.pid; NAMES+=("$1"); }
NAMES=()
add "return 200 (baseline)"       "http://127.0.0.1:$P_RET/v1/ip/8.8.8.8"
add "empty_gif, no auth"           "http://127.0.0.1:$P_GIF/v1/ip/8.8.8.8"
add "keyauth: key+scope+limit"    "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "Authorization: Bearer $KEY"
# nginx's own peer right after keyauth, so that the pair runs seconds apart
add "nginx map + limit_req"       "http://127.0.0.1:$P_NAT/v1/ip/8.8.8.8" "Authorization: Bearer $KEY"
add "map + limit_req + headers"   "http://127.0.0.1:$P_NATH/v1/ip/8.8.8.8" "Authorization: Bearer $KEY"
add "keyauth + 2 quotas"           "http://127.0.0.1:$P_QU/v1/ip/8.8.8.8"  "Authorization: Bearer $QKEY"
add "keyauth + 32 allowedIps"      "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "Authorization: Bearer $IPKEY"
add "keyauth: key+scope, no limit" "http://127.0.0.1:$P_NOLIM/v1/ip/8.8.8.8" "Authorization: Bearer $KEY"
PIDF["keyauth: key+scope, no limit"]=$W/nginx-nolim.pid
add "Lua peer (Kong-style)"       "http://127.0.0.1:$P_LUA/v1/ip/8.8.8.8" "Authorization: Bearer $KEY"
PIDF["Lua peer (Kong-style)"]=$W/nginx-lua.pid
add "auth_request to verifier"    "http://127.0.0.1:$P_AR/v1/ip/8.8.8.8"  "Authorization: Bearer $KEY"
# the verify API asked for the same check (bench/wrk/verify.lua: POST)
add "keyauth_verify (POST)"       "http://127.0.0.1:$P_VFY/v1/verify"
POST["keyauth_verify (POST)"]=$KEY
add "/api/plans"                  "http://127.0.0.1:$P_PL/api/plans"
add "static file, same bytes"     "http://127.0.0.1:$P_ST/plans.json"
add "keyauth, 1k keys, random"    "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "" "$W/keys-1k.txt"
for n in $SCALE_KEYS; do
    add "keyauth, $n keys, random" "http://127.0.0.1:${P_SCALE[$n]}/v1/ip/8.8.8.8" "" "$W/keys-$n.txt"
    PIDF["keyauth, $n keys, random"]=$W/nginx-big-$n.pid
done
add "unknown key (401)"           "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "Authorization: Bearer $UNKNOWN" "" 401
add "garbage key (401)"           "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "Authorization: Bearer ka_garbage" "" 401
add "over the limit (429)"        "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  "Authorization: Bearer $SLOW" "" 429

curl -s -o /dev/null -H "Authorization: Bearer $SLOW" "http://127.0.0.1:$P_KA/v1/ip/8.8.8.8"  # spend the burst
for n in "${NAMES[@]}"; do
    if [ -n "${POST[$n]:-}" ]; then
        check "$n" 200 "${URL[$n]}" -H 'Content-Type: application/json' \
            --data "{\"key\":\"${POST[$n]}\",\"scopes\":[\"ip:read\"]}"
    elif [ -n "${SCRIPT[$n]}" ]; then
        check "$n" 200 "${URL[$n]}" -H "Authorization: Bearer $(head -1 "${SCRIPT[$n]}")"
    elif [ -n "${HDR[$n]}" ]; then
        check "$n" "${STATUS[$n]}" "${URL[$n]}" -H "${HDR[$n]}"
    else
        check "$n" "${STATUS[$n]}" "${URL[$n]}"
    fi
done
curl -s -o /dev/null -D - -H "Authorization: Bearer $KEY" "http://127.0.0.1:$P_NATH/" | grep -q '^RateLimit: ' \
    || { echo "bench: map + limit_req + headers sent no RateLimit header" >&2; exit 1; }

# The worker's CPU time so far, in clock ticks (utime + stime; with "user",
# utime alone): each nginx has one worker, and only the configuration being
# measured loads it.
worker_pid() { # pid file -> the one worker's pid
    local m w; m=$(cat "$1"); read -r w _ < "/proc/$m/task/$m/children" || true  # no newline at its end
    echo "$w"
}
worker_ticks() { # pid file [user]
    awk -v user="${2:-}" '{print user ? $14 : $14 + $15}' "/proc/$(worker_pid "$1")/stat"
}
TICK_US=$(( 1000000 / $(getconf CLK_TCK) ))

# wrk against one configuration: its key file, header or neither.
wrk_at() { # name seconds [wrk option ...]
    local n=$1 args=(-t1 -c"$CONNS" -d"$2s" "${@:3}")
    local wrk=(taskset -c 1 wrk)  # nginx's worker is pinned to CPU 0
    if [ -n "${POST[$n]:-}" ]; then
        "${wrk[@]}" "${args[@]}" -s "$ROOT/bench/wrk/verify.lua" "${URL[$n]}" -- "${POST[$n]}"
    elif [ -n "${SCRIPT[$n]}" ]; then
        "${wrk[@]}" "${args[@]}" -s "$ROOT/bench/wrk/random_key.lua" "${URL[$n]}" -- "${SCRIPT[$n]}" /v1/ip/8.8.8.8
    elif [ -n "${HDR[$n]}" ]; then
        "${wrk[@]}" "${args[@]}" -H "${HDR[$n]}" "${URL[$n]}"
    else
        "${wrk[@]}" "${args[@]}" "${URL[$n]}"
    fi
}

run_wrk() { # name -> "rps p50 p99 cpu-us-a-request user-cpu-us-a-request"
    local n=$1 out t0 t1 u0 u1
    t0=$(worker_ticks "${PIDF[$n]}"); u0=$(worker_ticks "${PIDF[$n]}" user)
    out=$(wrk_at "$n" "$SECS" --latency)
    t1=$(worker_ticks "${PIDF[$n]}"); u1=$(worker_ticks "${PIDF[$n]}" user)
    if grep -q "Non-2xx" <<<"$out" && [ "${STATUS[$n]}" = 200 ]; then
        echo "bench: $n had non-2xx answers" >&2; exit 1
    fi
    awk -v cpu_us=$(( (t1 - t0) * TICK_US )) -v user_us=$(( (u1 - u0) * TICK_US )) \
        '/Requests\/sec/ {r=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
        / requests in / {n=$1} END {print r, p50, p99, cpu_us / n, user_us / n}' <<<"$out"
}

if [ -n "${PROFILE:-}" ]; then
    . "$ROOT/bench/profile.sh"
    exit 0
fi

# A large store's worker writes the usage of every key it served (its 30 s
# flush: hundreds of thousands of keys after a random-key row) on CPU 0,
# which every worker shares: before each run, wait until those workers are
# idle, so that no configuration is measured beside a flush.
settle() {
    local before after
    for _ in $(seq 120); do
        before=$(for n in $SCALE_KEYS; do worker_ticks "$W/nginx-big-$n.pid"; done)
        sleep 0.3
        after=$(for n in $SCALE_KEYS; do worker_ticks "$W/nginx-big-$n.pid"; done)
        [ "$before" = "$after" ] && return 0
    done
}

declare -A RES
for round in $(seq "$ROUNDS"); do
    echo "round $round/$ROUNDS ..." >&2
    # every other round in reverse order: a drift of the machine's speed
    # during a round weighs on both sides of each pair alike
    order=("${NAMES[@]}")
    if (( round % 2 == 0 )); then
        order=(); for (( i = ${#NAMES[@]} - 1; i >= 0; i-- )); do order+=("${NAMES[$i]}"); done
    fi
    for n in "${order[@]}"; do settle; RES["$n"]+="$(run_wrk "$n");"; done
done

median() { tr ';' '\n' | grep . | sort -n -k1,1 | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}'; }
base=$(median <<<"${RES["return 200 (baseline)"]}" | cut -d' ' -f1)
declare -A MED
for n in "${NAMES[@]}"; do MED[$n]=$(median <<<"${RES[$n]}"); done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo
echo "keyauth bench — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(nginx -v 2>&1 | cut -d/ -f2), wrk -t1 -c$CONNS -d${SECS}s, median of $ROUNDS rounds"
echo
# the median round's CPU per request is the median of its own column
cpu_median() { tr ';' '\n' | grep . | cut -d' ' -f"${1:-4}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '| %-32s | %10s | %8s | %8s | %10s | %11s | %12s |\n' configuration req/s p50 p99 "vs return" "CPU us/req" "user us/req"
printf '|%s|%s|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..34})" "------------" "----------" "----------" "------------" "-------------" "--------------"
for n in "${NAMES[@]}"; do
    read -r rps p50 p99 _ <<<"${MED[$n]}"
    printf '| %-32s | %10.0f | %8s | %8s | %10s | %11.2f | %12.2f |\n' "$n" "$rps" "$p50" "$p99" "$(ratio "$rps" "$base")" \
        "$(cpu_median 4 <<<"${RES[$n]}")" "$(cpu_median 5 <<<"${RES[$n]}")"
done
# A contract line: the ratio of two configurations, round by round (they ran
# side by side in each round): median [min-max] against the floor. By CPU,
# the ratio is b's CPU per request over a's (a's requests per CPU second over
# b's), so that for both measures higher is better and the floors compare.
# By user CPU (utime alone: the worker's own code, without the kernel's
# loopback TCP, which is most of a request and the noisiest part of it): for
# information beside the contract's user + system.
contract() { # measure(rps|cpu|user) label a b floor
    local r col=1 expr='$1 / $2'
    [ "$1" = cpu ] && { col=4; expr='$2 / $1'; }
    [ "$1" = user ] && { col=5; expr='$2 / $1'; }
    r=$(paste -d' ' <(tr ';' '\n' <<<"${RES[$3]}" | grep . | cut -d' ' -f$col) \
                    <(tr ';' '\n' <<<"${RES[$4]}" | grep . | cut -d' ' -f$col) |
        awk "{print $expr}" | sort -g |
        awk '{a[NR]=$1} END {printf "%.2f [%.2f-%.2f]", a[int((NR+1)/2)], a[1], a[NR]}')
    printf '| %-44s | %-18s | %6s | %-4s |\n' "$2" "$r" "$5" "$(verdict "$1" "${r%% *}" "$5")"
}
verdict() { # measure median floor: user CPU, and a floor of "-", are for information
    { [ "$1" = user ] || [ "$3" = - ]; } && { echo "-"; return; }
    awk -v m="$2" -v f="$3" 'BEGIN {print (m >= f) ? "met" : "NOT"}'
}
# DESIGN's Lua line by CPU: keyauth adds at most half the CPU the Lua peer
# adds over the same location without auth, round by round: the peer's added
# CPU over keyauth's, floor 2. A round where keyauth added nothing
# measurable (the rows move by a few % between rounds) counts as 99.
added_contract() { # measure label a b base floor
    local r m=$1 c; shift
    c=$([ "$m" = cpu ] && echo 4 || echo 5)
    r=$(paste -d' ' <(tr ';' '\n' <<<"${RES[$2]}" | grep . | cut -d' ' -f$c) \
                    <(tr ';' '\n' <<<"${RES[$3]}" | grep . | cut -d' ' -f$c) \
                    <(tr ';' '\n' <<<"${RES[$4]}" | grep . | cut -d' ' -f$c) |
        awk '{ a = $1 - $3; b = $2 - $3; print (a <= 0) ? 99 : b / a }' | sort -g |
        awk '{a[NR]=$1} END {printf "%.2f [%.2f-%.2f]", a[int((NR+1)/2)], a[1], a[NR]}')
    printf '| %-44s | %-18s | %6s | %-4s |\n' "$1" "$r" "$5" "$(verdict "$m" "${r%% *}" "$5")"
}
K="keyauth: key+scope+limit"
contracts() { # measure
    contract "$1" "keyauth / same location without auth"  "$K" "empty_gif, no auth" 0.95
    # contract v4: the peer doing the same job byte for byte on the wire
    # (map + limit_req sending keyauth's two RateLimit headers with
    # add_header) at least as cheap as keyauth: ratio >= 1.00; and the bare
    # peer, which sends no headers, within 1.03x: ratio >= 1/1.03
    contract "$1" "keyauth / map + limit_req + its headers"  "$K" "map + limit_req + headers" 1.0
    contract "$1" "keyauth / bare map + limit_req (1.03x)"   "$K" "nginx map + limit_req" 0.97
    if [ "$1" != rps ]; then
        added_contract "$1" "Lua peer's added CPU / keyauth's" \
            "$K" "Lua peer (Kong-style)" "empty_gif, no auth" 2.0
    else
        contract "$1" "keyauth / Lua peer (Kong-style)"  "$K" "Lua peer (Kong-style)" 1.5
    fi
    contract "$1" "keyauth + 2 quotas / keyauth"         "keyauth + 2 quotas" "$K" 0.97
    # DESIGN: a 32-entry allowedIps within 1.02x of a key without lists
    contract "$1" "keyauth / keyauth + 32 allowedIps"    "keyauth + 32 allowedIps" "$K" 0.98
    contract "$1" "keyauth / auth_request"               "$K" "auth_request to verifier" 10
    # DESIGN: keyauth_verify within 1.3x of the access phase's CPU a check,
    # so the access phase's CPU over verify's is at least 1/1.3
    [ "$1" = rps ] || contract "$1" "access phase / keyauth_verify, a check" "keyauth_verify (POST)" "$K" 0.77
    contract "$1" "/api/plans / static file"             "/api/plans" "static file, same bytes" 0.9
    for n in $SCALE_KEYS; do
        floor=$([ "$n" -ge 10000000 ] && echo 0.80 || echo 0.85)
        contract "$1" "$n keys / 1k keys (random keys)" "keyauth, $n keys, random" "keyauth, 1k keys, random" "$floor"
    done
}
for m in cpu user rps; do
    case $m in
        cpu) title='contract line (worker CPU a request ratio)' ;;
        user) title='user CPU a request ratio (information)' ;;
        *) title='contract line (req/s ratio)' ;;
    esac
    echo
    printf '| %-44s | %-18s | %6s | %-4s |\n' "$title" \
        "median [min-max]" "floor" ""
    printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "--------------------" "--------" "------"
    contracts $m
done
# the store line: bytes a key on disk (every page of the file, free ones
# too) of each large store made in ten commands, against the ceiling 500
if [ -s "$W/store-bytes.txt" ]; then
    echo
    printf '| %-44s | %-18s | %6s | %-4s |\n' "contract line (store)" "bytes a key" "ceiling" ""
    printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "--------------------" "--------" "------"
    while read -r n b; do
        printf '| %-44s | %-18s | %6s | %-4s |\n' "store bytes a key, $n keys in ten commands" "$b" 500 \
            "$([ "$b" -le 500 ] && echo met || echo NOT)"
    done < "$W/store-bytes.txt"
fi
echo
cat "$W/scale.txt"

if [ "${CALLGRIND:-1}" != 0 ]; then
    echo
    "$ROOT/bench/callgrind.sh"
fi
