#!/usr/bin/env bash
# make run-cluster: many-edge mode on one machine (docs/scale-out.md). Starts
# three etcd members, two stateless keyauthd and two edges (each an nginx
# over its own LMDB mirror, kept by its own keyauth-syncd, sharing rate limits
# through one redis-server: docs/shared-limits.md), all on loopback,
# seeds etcd once (plan catalog, exchange rate, a demo account) and prints
# what to curl. Ctrl-C stops everything. Running it again reuses the data.
#
# Environment: KEYAUTH_VAR (var-cluster), KEYAUTH_BASE_PORT (8090): edges on
# BASE and BASE+1, keyauthd on BASE+10 and BASE+11, syncd metrics on BASE+20
# and BASE+21, etcd clients on BASE+30..32 and peers on BASE+40..42, redis
# on BASE+50.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=${KEYAUTH_BASE_PORT:-8090}
VAR=$(mkdir -p "${KEYAUTH_VAR:-$ROOT/var-cluster}" && cd "${KEYAUTH_VAR:-$ROOT/var-cluster}" && pwd)
mkdir -p "$VAR/logs"

pids=()
stop() {
    trap - INT TERM EXIT
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    echo "stopped"
}
trap stop INT TERM EXIT

wait_port() {
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "nothing listens on 127.0.0.1:$1 (see $VAR/logs/)" >&2
    return 1
}

# etcd: the settings docs/scale-out.md gives for production
cluster=""
for i in 0 1 2; do cluster+="${cluster:+,}m$i=http://127.0.0.1:$((BASE + 40 + i))"; done
endpoints=""
for i in 0 1 2; do
    endpoints+="${endpoints:+,}http://127.0.0.1:$((BASE + 30 + i))"
    etcd --name "m$i" --data-dir "$VAR/etcd$i" \
        --listen-client-urls "http://127.0.0.1:$((BASE + 30 + i))" \
        --advertise-client-urls "http://127.0.0.1:$((BASE + 30 + i))" \
        --listen-peer-urls "http://127.0.0.1:$((BASE + 40 + i))" \
        --initial-advertise-peer-urls "http://127.0.0.1:$((BASE + 40 + i))" \
        --initial-cluster "$cluster" --initial-cluster-state new \
        --auto-compaction-mode=periodic --auto-compaction-retention=24h \
        --quota-backend-bytes=8589934592 --experimental-watch-progress-notify-interval=1s \
        2>>"$VAR/logs/etcd$i.log" &
    pids+=($!)
done
for i in 0 1 2; do wait_port $((BASE + 30 + i)); done

# the edges' shared rate limits: nothing to keep, nothing saved
redis-server --port $((BASE + 50)) --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$VAR" >>"$VAR/logs/redis.log" 2>&1 &
pids+=($!)
wait_port $((BASE + 50))

CTL=("$ROOT/build/keyauthctl" --etcd "$endpoints")
for _ in $(seq 100); do "${CTL[@]}" init >/dev/null 2>&1 && break; sleep 0.2; done
if [ ! -s "$VAR/console-token" ]; then
    echo "seeding etcd ..."
    "${CTL[@]}" plans import "$ROOT/lmdb_schema/plans.json" >/dev/null
    "${CTL[@]}" fx set 83.50 >/dev/null
    made=$("${CTL[@]}" --json account create --name "Demo account" --entitlement 120)
    token=$(printf '%s' "$made" | sed -n 's/.*"consoleToken": *"\([^"]*\)".*/\1/p')
    (umask 077 && printf '%s\n' "$token" > "$VAR/console-token")
fi

for n in 0 1; do
    "$ROOT/build/keyauthd" --etcd "$endpoints" --listen "127.0.0.1:$((BASE + 10 + n))" \
        --trusted-proxy 127.0.0.1 2>>"$VAR/logs/keyauthd$n.log" &
    pids+=($!)
done

for n in 0 1; do
    edge=$VAR/edge$n
    mkdir -p "$edge/logs" "$edge/tmp"
    "$ROOT/build/keyauth-syncd" --etcd "$endpoints" --db "$edge/db" \
        --metrics "127.0.0.1:$((BASE + 20 + n))" 2>>"$edge/logs/syncd.log" &
    pids+=($!)
    for _ in $(seq 300); do [ -e "$edge/db/data.mdb" ] && break; sleep 0.1; done
    user_line="user root root;"
    if [ "$(id -u)" != 0 ]; then user_line=""; fi
    sed -e "s|@SHARED_LIMITS@|keyauth_shared_limits redis://127.0.0.1:$((BASE + 50));|" \
        -e "s|@ROOT@|$ROOT|g" -e "s|@VAR@|$edge|g" -e "s|@PORT@|$((BASE + n))|g" \
        -e "s|@KEYAUTHD_PORT@|$((BASE + 10 + n))|g" -e "s|@USER_LINE@|$user_line|g" \
        "$ROOT/nginx_conf/demo.conf" > "$edge/nginx.conf"
    nginx -p "$edge" -c "$edge/nginx.conf" -e "$edge/logs/error.log" -g 'daemon off;' &
    pids+=($!)
done
for n in 0 1; do wait_port $((BASE + n)); done

cat <<MSG

keyauth many-edge demo, data in $VAR:
  etcd members  $endpoints
  keyauthd      127.0.0.1:$((BASE + 10)), 127.0.0.1:$((BASE + 11)) (each behind one edge's /v1/keys)
  edges (nginx) http://127.0.0.1:$BASE, http://127.0.0.1:$((BASE + 1))
  syncd metrics http://127.0.0.1:$((BASE + 20))/metrics, http://127.0.0.1:$((BASE + 21))/healthz
  redis         127.0.0.1:$((BASE + 50)) (the edges share each key's limit through it)
Logs: $VAR/logs/ and $VAR/edge*/logs/. Ctrl-C stops everything. Try:

  export TOKEN=\$(cat $VAR/console-token)
  curl -s -X POST http://127.0.0.1:$BASE/v1/keys -H "Authorization: Bearer \$TOKEN" \\
       -H 'Content-Type: application/json' \\
       -d '{"name":"demo","scopes":["ip:read"],"rateLimitPerMinute":5}'
  export KEY=ka_...   # the "secret" above, shown once; made through edge 0
  curl -s http://127.0.0.1:$((BASE + 1))/v1/ip/8.8.8.8 -H "Authorization: Bearer \$KEY"   # works on edge 1
  for i in 1 2 3 4 5; do curl -s -o /dev/null -w '%{http_code} ' http://127.0.0.1:$BASE/v1/ip/8.8.8.8 -H "Authorization: Bearer \$KEY"; done
  curl -s -w '%{http_code}\n' http://127.0.0.1:$((BASE + 1))/v1/ip/8.8.8.8 -H "Authorization: Bearer \$KEY"   # 429: one limit for both edges
  curl -s -X POST http://127.0.0.1:$((BASE + 1))/v1/keys/KEY_ID/revoke -H "Authorization: Bearer \$TOKEN"
  curl -s http://127.0.0.1:$BASE/v1/ip/8.8.8.8 -H "Authorization: Bearer \$KEY"   # 401 on edge 0 too
  curl -s http://127.0.0.1:$((BASE + 20))/metrics

MSG

wait -n "${pids[@]}" || true
