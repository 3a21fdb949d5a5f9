#!/usr/bin/env bash
# Instructions per request, counted by callgrind (repeatable, unlike time):
# nginx runs as one process under valgrind; a keep-alive client sends N1, then
# (in a second run) N2 requests; (Ir(N2) - Ir(N1)) / (N2 - N1) cancels start-up
# and shutdown. Compares `return 200` with a keyauth location (key + scope +
# rate limit + empty_gif) and a plain empty_gif location, with one key and
# with 1,000 keys in turn (each request then misses the worker's per-snapshot
# cache of recent keys and reads LMDB, the cost of a cold key); then refused keys
# (unknown, revoked, wrong checksum) against the same keyauth location, to
# show how much the work differs between them (timing side channel).
# With redis-server installed, the keyauth location once more with
# keyauth_shared_limits to a redis-server of its own: nginx runs with
# master_process off here, so the exchange with Redis (every 250 ms, on the
# same event loop) runs in the counted process and its instructions are in
# the count, spread over the requests that ran meanwhile. Valgrind slows the
# requests but not the timer, so an exchange is spread over far fewer
# requests than at full speed; the line says how many exchanges each run had.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N1=${N1:-500}
N2=${N2:-2500}
W=$(mktemp -d /tmp/keyauth-cg-XXXXXX)
RPID=
trap '[ -z "$RPID" ] || { kill "$RPID" 2>/dev/null; wait "$RPID" 2>/dev/null; }; rm -rf "$W"' EXIT
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
CTL="$ROOT/build/keyauthctl"
A=$("$CTL" --db "$W/db" --json account create --name cg --entitlement 10000000 --max-keys 100000000 | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
new_key() { # db account -> key id and secret
    "$CTL" --db "$1" --json key create --account "$2" --name cg --scope ip:read --rate 10000000 |
        perl -MJSON::PP -0777 -ne '$k = decode_json($_); print "$k->{id} $k->{secret}\n"'
}
read -r _ KEY < <(new_key "$W/db" "$A")
"$CTL" --db "$W/db" --json key create --account "$A" --name cg --scope ip:read --rate 10000000 --count 999 |
    sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p' > "$W/keys-1k.txt"
echo "$KEY" >> "$W/keys-1k.txt"
# a key under two quotas, its own credits and its account's month, far from used up
QA=$("$CTL" --db "$W/db" --json account create --name cgq --entitlement 10000000 --max-keys 10 | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
"$CTL" --db "$W/db" account update "$QA" --quota 100000000000/month >/dev/null
QKEY=$("$CTL" --db "$W/db" --json key create --account "$QA" --name cgq --scope ip:read --rate 10000000 \
       --quota 100000000000/total | sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p')
# a key limited to 32 CIDRs, the client's (127.0.0.1) the last of them: the
# most an allowedIps check can cost
IPS=()
for i in $(seq 0 30); do IPS+=(--allow-ip "10.$i.0.0/16"); done
IPKEY=$("$CTL" --db "$W/db" --json key create --account "$A" --name cgip --scope ip:read --rate 10000000 \
        "${IPS[@]}" --allow-ip 127.0.0.0/8 | sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p')
# a key with meta on an account with meta, for the who-is-calling variables
MA=$("$CTL" --db "$W/db" --json account create --name cgm --entitlement 10000000 --max-keys 10 \
     --meta '{"tenant":"acme","crm":"C-17"}' | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
MKEY=$("$CTL" --db "$W/db" --json key create --account "$MA" --name "billing service" --scope ip:read --rate 10000000 \
       --meta '{"env":"prod","team":"billing"}' | sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p')
read -r REVOKED_ID REVOKED < <(new_key "$W/db" "$A")
"$CTL" --db "$W/db" key revoke "$REVOKED_ID" >/dev/null
# well-formed, but made in another store
OTHER=$("$CTL" --db "$W/other" --json account create --name x --entitlement 10 | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
read -r _ UNKNOWN < <(new_key "$W/other" "$OTHER")
# the last checksum character changed
last=${KEY: -1}
BADSUM=${KEY:0:${#KEY}-1}$([ "$last" = A ] && echo B || echo A)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$W/logs"

conf() { # location body [access_log line] [keyauth_db line]
    local log=${2:-access_log off;} db=${3-keyauth_db $W/db;}
    cat > "$W/nginx.conf" <<CONF
load_module $ROOT/build/ngx_http_keyauth_module.so;
${MAIN_EXTRA:-}
daemon off;
master_process off;
error_log $W/logs/error.log warn;
pid $W/nginx.pid;
events { worker_connections 64; }
http {
    $log
    keepalive_requests 1000000;
    $db
    keyauth_zone rates:1m;
    ${HTTP_EXTRA:-}
    server { listen 127.0.0.1:$PORT; location / { $1 } }
}
CONF
}

count() { # requests key -> total instructions
    local n=$1 key=$2 out="$W/cg.out"
    valgrind --tool=callgrind ${CG_ARGS:-} --callgrind-out-file="$out" \
        nginx -p "$W" -c "$W/nginx.conf" -e "$W/logs/error.log" 2>/dev/null &
    local vpid=$!
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
        sleep 0.1
    done
    perl -MIO::Socket::INET -e '
        my ($port, $n, $key, $verify) = @ARGV;
        my @keys = ($key);
        if ($key =~ /^@(.*)/) { open my $f, "<", $1 or die $!; chomp(@keys = <$f>); }
        my $s = IO::Socket::INET->new("127.0.0.1:$port") or die $!;
        for my $i (1 .. $n) {
            my $k = $keys[$i % @keys];
            if ($verify) {  # the same check asked of keyauth_verify
                my $b = qq({"key":"$k","scopes":["ip:read"]});
                print $s "POST /v1/verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       . "Content-Length: " . length($b) . "\r\n\r\n$b";
            } else {
                print $s "GET /v1/ip/8.8.8.8 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $k\r\n\r\n";
            }
            my $head = "";
            while ($head !~ /\r\n\r\n/) { sysread($s, $head, 4096, length $head) or die "eof" }
            my ($len) = $head =~ /Content-Length: (\d+)/i;
            my $body = substr($head, index($head, "\r\n\r\n") + 4);
            while (length $body < $len) { sysread($s, $body, 4096, length $body) or die "eof" }
        }' "$PORT" "$n" "$key" "${VERIFY:-}"
    # the sharing row: how many exchanges ran in this run (one request more
    # in each run, which the difference cancels)
    [ -z "${STATUS_PORT:-}" ] || curl -s "http://127.0.0.1:$STATUS_PORT/" |
        awk '/^keyauth_shared_limits_exchanges_total / {print $2}' > "$W/exchanges.$n"
    kill -QUIT "$vpid"
    # a graceful stop that hangs (seen once) must not hang the script
    for _ in $(seq 300); do kill -0 "$vpid" 2>/dev/null || break; sleep 0.1; done
    kill -TERM "$vpid" 2>/dev/null || true
    wait "$vpid" || true
    [ -n "${CG_KEEP:-}" ] && cp "$out" "$CG_KEEP.$n"
    callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

per_request() { # location [key] [access_log line] [keyauth_db line]
    conf "$1" "${3:-}" "${4-keyauth_db $W/db;}"
    local a b key=${2:-$KEY}
    a=$(count "$N1" "$key")
    b=$(count "$N2" "$key")
    echo $(( (b - a) / (N2 - N1) ))
}

# Where the data misses are, by piece (bench/pieces.awk), with callgrind's
# simulation of this machine's caches: with CACHE_KEYS set (make
# bench-profile sets 1000000), the keyauth location with 1,000 keys in turn,
# then with every request a key of its own from a CACHE_KEYS-key store (its
# key slot, rate slot and usage slot never touched before, as when keys are
# drawn at random from a large store). Valgrind sees no kernel: the kernel's
# use of the caches between requests, which evicts more, is not in these
# counts, so they are a floor. Last-level misses (DLmr + DLmw) and first-
# level misses (D1mr + D1mw) a request. CACHE_ONLY set: only these.
if [ -n "${CACHE_KEYS:-}" ]; then
    B=$("$CTL" --db "$W/big" --map-size $(( CACHE_KEYS / 256 > 4096 ? CACHE_KEYS / 256 : 4096 )) --json \
        account create --name cg --entitlement 10000000 --max-keys 100000000 | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
    "$CTL" --db "$W/big" key create --account "$B" --name cg --scope ip:read --rate 10000000 \
        --count "$CACHE_KEYS" | sed -n 's/^secret (shown once): //p' > "$W/keys-all.txt"
    head -n "$N2" "$W/keys-all.txt" > "$W/keys-big.txt"
    misses() { # key-file db events -> "piece<TAB>misses a request"
        conf 'keyauth on; keyauth_scope ip:read; empty_gif;' "" "keyauth_db $2;"
        CG_ARGS="--cache-sim=yes" CG_KEEP="$W/cache" count "$N1" "@$1" >/dev/null
        CG_ARGS="--cache-sim=yes" CG_KEEP="$W/cache" count "$N2" "@$1" >/dev/null
        for n in "$N2" "$N1"; do
            callgrind_annotate --auto=no --show="$3" --threshold=100 "$W/cache.$n" 2>/dev/null |
                awk -v sign=$([ "$n" = "$N2" ] && echo 1 || echo -1) '
                    / \[.*\]$|:/ && $1 ~ /^[0-9,.]+$/ {
                        a = 0; i = 1
                        while ($i ~ /^([0-9,]+|\.)$/ || $i ~ /^\(/) { if ($i !~ /^\(/) { v = $i; gsub(",", "", v); a += v + 0 } i++ }
                        where = $i; for (j = i + 1; j <= NF; j++) where = where " " $j
                        obj = ""; if (match(where, / \[[^]]*\]$/)) { obj = substr(where, RSTART + 2, RLENGTH - 3); where = substr(where, 1, RSTART - 1) }
                        file = where; sub(/:.*/, "", file); fn = where; sub(/^[^:]*:/, "", fn)
                        if (obj == "") obj = file ~ /src\/(core\/|ngx_http_keyauth)/ ? "ngx_http_keyauth_module.so" : file
                        sub(/.*\//, "", obj)
                        printf "%s\t%s\t%s\n", sign * a, obj, fn
                    }'
        done | awk -v scale="$(awk -v a="$N1" -v b="$N2" 'BEGIN {print 1 / (b - a)}')" -f "$ROOT/bench/pieces.awk"
    }
    for ev in "DLmr,DLmw" "D1mr,D1mw"; do
        misses "$W/keys-1k.txt" "$W/db" "$ev" > "$W/m-small"
        misses "$W/keys-big.txt" "$W/big" "$ev" > "$W/m-big"
        echo "data cache misses a request ($ev, callgrind --cache-sim=yes, N=$N2-$N1), by piece:"
        printf '  %-34s %14s %14s\n' piece "1k keys" "$CACHE_KEYS keys"
        paste "$W/m-small" "$W/m-big" | awk -F'\t' '$2 != 0 || $4 != 0 { printf "  %-34s %14.2f %14.2f\n", $1, $2, $4 }'
    done
fi
[ -z "${CACHE_ONLY:-}" ] || exit 0

ret=$(per_request 'return 200 "GIF89a-------------------------------------";')
gif=$(per_request 'empty_gif;')
ka=$(per_request 'keyauth on; keyauth_scope ip:read; empty_gif;')
# The same location with keyauth_shared_limits (see the top): a Redis of its
# own on a free port, as t/lib/RedisServer.pm starts one, killed on EXIT.
if command -v redis-server >/dev/null; then
    RPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$W" \
        --daemonize no > "$W/logs/redis.log" 2>&1 &
    RPID=$!
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$RPORT") 2>/dev/null && break
        sleep 0.1
    done
    STATUS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    HTTP_EXTRA="keyauth_shared_limits redis://127.0.0.1:$RPORT;
    server { listen 127.0.0.1:$STATUS_PORT; location / { keyauth_status; } }"
    shared=$(per_request 'keyauth on; keyauth_scope ip:read; empty_gif;')
    HTTP_EXTRA= STATUS_PORT=
    kill "$RPID" 2>/dev/null; wait "$RPID" 2>/dev/null || true; RPID=
fi
echo "instructions per request (callgrind, N=$N2-$N1 keep-alive requests):"
echo "  return 200:                     $ret"
echo "  empty_gif:                      $gif"
echo "  keyauth + scope + limit + gif:  $ka"
echo "  added by keyauth:               $((ka - gif)) ($(awk -v a="$ka" -v b="$gif" 'BEGIN {printf "%.1f", 100 * (a - b) / b}')% over empty_gif; contract: at most 5000)"
if [ -n "${shared:-}" ]; then
    echo "  the same, sharing on:           $shared ($((shared - ka)) against sharing off; keyauth_shared_limits interval=250ms,"
    echo "                                  master_process off: the exchanges with Redis ran in this process and are included,"
    echo "                                  spread over the requests at valgrind's speed: $(cat "$W/exchanges.$N1") exchanges in the"
    echo "                                  $N1-request run, $(cat "$W/exchanges.$N2") in the $N2-request run)"
else
    echo "  the same, sharing on:           not counted (redis-server is not installed)"
fi
quota=$(per_request 'keyauth on; keyauth_scope ip:read; empty_gif;' "$QKEY")
echo "  the same, a key under 2 quotas: $quota ($((quota - ka)) for the quota check and charge: $(awk -v a="$quota" -v b="$ka" 'BEGIN {printf "%.3f", a / b}')x; the contract's 1.03x is by worker CPU, bench/run.sh)"
ips=$(per_request 'keyauth on; keyauth_scope ip:read; empty_gif;' "$IPKEY")
echo "  the same, a 32-entry allowedIps: $ips ($((ips - ka)) for the check, the client's CIDR the last: $(awk -v a="$ips" -v b="$ka" 'BEGIN {printf "%.3f", a / b}')x; DESIGN: at most 1.02x)"
# the variables read the key's and account's records on first use: what
# that costs when a configuration uses them (unused, they cost nothing)
WHO='add_header X-Plan $keyauth_plan_id; add_header X-Name $keyauth_key_name; add_header X-Meta $keyauth_key_meta; add_header X-Account-Meta $keyauth_account_meta;'
who=$(per_request "keyauth on; keyauth_scope ip:read; $WHO empty_gif;" "$MKEY")
whoplain=$(per_request "keyauth on; keyauth_scope ip:read; add_header X-Account \$keyauth_account_id; empty_gif;" "$MKEY")
echo "  the same, the 4 who-is-calling variables in add_header: $who ($((who - whoplain)) against one \$keyauth_account_id header)"
cold=$(per_request 'keyauth on; keyauth_scope ip:read; empty_gif;' "@$W/keys-1k.txt")
echo "  the same, 1,000 keys in turn:   $cold ($((cold - gif)) added: every key read from LMDB)"
# The same check asked of the verify API (POST {"key", "scopes": ["ip:read"]},
# a 200 JSON answer): the whole request against the access phase's whole
# request (DESIGN: at most 1.3x the access phase's CPU a check)
verify=$(VERIFY=1 per_request 'keyauth_verify;')
echo "  keyauth_verify, the same check: $verify ($(awk -v a="$verify" -v b="$ka" 'BEGIN {printf "%.2f", a / b}')x the access phase's request; contract: at most 1.3x)"

# The peers doing the same job, counted the same way (bench/run.sh has the
# same two configurations): throughput tells little once wrk is the
# bottleneck, instructions still do.
HTTP_EXTRA="map_hash_bucket_size 128;
    map \$http_authorization \$native_key { default \"\"; \"Bearer $KEY\" k1; }
    limit_req_zone \$native_key zone=native:1m rate=10000000r/m;"
native=$(per_request 'if ($native_key = "") { return 401; } limit_req zone=native burst=1000000 nodelay; empty_gif;')
HTTP_EXTRA=
if [ -e /usr/lib/nginx/modules/ngx_http_lua_module.so ]; then
    MAIN_EXTRA="load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;"
    HTTP_EXTRA="lua_shared_dict api_keys 1m; lua_shared_dict rate_counters 1m;
    init_by_lua_block { ngx.shared.api_keys:set(\"$KEY\", \"ip:read 10000000\") }"
    lua=$(per_request "access_by_lua_file $ROOT/bench/lua_peer.lua; empty_gif;")
    MAIN_EXTRA= HTTP_EXTRA=
fi
echo "the peers, instructions per request, and theirs / keyauth's (over 1: keyauth does less):"
echo "  nginx map + limit_req + gif:    $native ($(awk -v a="$ka" -v b="$native" 'BEGIN {printf "%.2f", b / a}'))"
[ -n "${lua:-}" ] && echo "  Lua peer (Kong-style) + gif:    $lua ($(awk -v a="$ka" -v b="$lua" 'BEGIN {printf "%.2f", b / a}'))"

kloc='keyauth on; keyauth_scope ip:read; empty_gif;'
unknown=$(per_request "$kloc" "$UNKNOWN")
revoked=$(per_request "$kloc" "$REVOKED")
badsum=$(per_request "$kloc" "$BADSUM")
echo "refused keys (401 INVALID_API_KEY), instructions per request:"
echo "  unknown key:                    $unknown"
echo "  revoked key:                    $revoked ($((revoked - unknown)) more than unknown)"
echo "  wrong checksum:                 $badsum ($((badsum - unknown)) against unknown)"

# The module masks secrets in every access-log line when keyauth_db is set:
# the same empty_gif location with nginx's "combined" log, with and without
# keyauth_db, shows what the masking costs a logged request.
log_line="access_log $W/logs/access.log combined;"
plain_log=$(per_request 'empty_gif;' "$KEY" "$log_line" '')
masked_log=$(per_request 'empty_gif;' "$KEY" "$log_line")
echo "access log (combined), instructions per request:"
echo "  empty_gif, logged:              $plain_log ($((plain_log - gif)) for the line)"
echo "  empty_gif, logged and masked:   $masked_log ($((masked_log - plain_log)) for the masking)"

