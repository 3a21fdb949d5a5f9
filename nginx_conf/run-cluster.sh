#!/usr/bin/env bash
# make run-cluster: many-edge mode on one machine (docs/scale-out.md). Starts
# three etcd members, two stateless keyauthd and two edges (each an nginx
# over its own LMDB mirror, kept by its own keyauth-syncd, sharing rate limits
# through one redis-server: docs/shared-limits.md), all on loopback,
# seeds etcd once (plan catalog, exchange rate, a demo account) and prints
# README's many-edge walkthrough with this run's ports. Running it again
# reuses the data.
#
# It survives the faults it exists to show: when one part dies (killed by
# the walkthrough, say) it says so and the rest keep running. Ctrl-C (or
# SIGTERM) stops every part, also one started again from another terminal.
#
#   run-cluster.sh              start everything, wait for Ctrl-C
#   run-cluster.sh start PART   start one part again (etcd0..2, redis,
#                               keyauthd0..1, syncd0..1, nginx0..1) while a
#                               run-cluster.sh runs with the same data; it
#                               runs in the background and that
#                               run-cluster.sh stops it with the rest
#
# Each part's pid is in $VAR/run/PART.pid (kill $(cat var-cluster/run/etcd2.pid)).
#
# Environment: KEYAUTH_VAR (var-cluster), KEYAUTH_BASE_PORT (8090): edges on
# BASE and BASE+1, keyauthd on BASE+10 and BASE+11, syncd metrics on BASE+20
# and BASE+21, etcd clients on BASE+30..32 and peers on BASE+40..42, redis
# on BASE+50. `start` takes the ports of the running cluster.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEFAULT_VAR=$ROOT/var-cluster
VAR=$(mkdir -p "${KEYAUTH_VAR:-$DEFAULT_VAR}" && cd "${KEYAUTH_VAR:-$DEFAULT_VAR}" && pwd)
RUN=$VAR/run
PARTS=(etcd0 etcd1 etcd2 redis keyauthd0 keyauthd1 syncd0 syncd1 nginx0 nginx1)
mkdir -p "$VAR/logs" "$RUN"

# A process is one we started while its pid still names it: the start
# time in /proc/PID/stat is the one recorded beside the pid (a pid may be
# reused by the time someone reads a stale file), and it is no zombie.
stat_of() {  # PID: the fields of /proc/PID/stat after "(comm)"
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    printf '%s\n' "${s##*) }"
}
start_time_of() { local f; f=($(stat_of "$1")) || return 1; printf '%s\n' "${f[19]}"; }
running() {  # PART: prints its pid and succeeds while it runs
    local pid want f
    pid=$(cat "$RUN/$1.pid" 2>/dev/null) || return 1
    want=$(cat "$RUN/$1.start" 2>/dev/null) || return 1
    f=($(stat_of "$pid")) || return 1
    [ "${f[0]}" != Z ] && [ "${f[19]}" = "$want" ] || return 1
    printf '%s\n' "$pid"
}

supervisor_running() {
    local pid want
    read -r pid want 2>/dev/null < "$RUN/supervisor" || return 1
    [ "$(start_time_of "$pid" 2>/dev/null)" = "$want" ]
}

wait_port() {
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "nothing listens on 127.0.0.1:$1 (see $VAR/logs/)" >&2
    return 1
}

# part PART: sets CMD (its command line), LOG and PORT (where it listens)
part() {
    local n
    endpoints=""
    cluster=""
    for n in 0 1 2; do
        endpoints+="${endpoints:+,}http://127.0.0.1:$((BASE + 30 + n))"
        cluster+="${cluster:+,}m$n=http://127.0.0.1:$((BASE + 40 + n))"
    done
    case $1 in
    etcd[012])
        n=${1#etcd}
        # the settings docs/scale-out.md gives for production
        CMD=(etcd --name "m$n" --data-dir "$VAR/etcd$n"
             --listen-client-urls "http://127.0.0.1:$((BASE + 30 + n))"
             --advertise-client-urls "http://127.0.0.1:$((BASE + 30 + n))"
             --listen-peer-urls "http://127.0.0.1:$((BASE + 40 + n))"
             --initial-advertise-peer-urls "http://127.0.0.1:$((BASE + 40 + n))"
             --initial-cluster "$cluster" --initial-cluster-state new
             --auto-compaction-mode=periodic --auto-compaction-retention=24h
             --quota-backend-bytes=8589934592 --experimental-watch-progress-notify-interval=1s)
        LOG=$VAR/logs/etcd$n.log PORT=$((BASE + 30 + n)) ;;
    redis)
        # the edges' shared rate limits: nothing to keep, nothing saved
        CMD=(redis-server --port $((BASE + 50)) --bind 127.0.0.1 --save '' --appendonly no --dir "$VAR")
        LOG=$VAR/logs/redis.log PORT=$((BASE + 50)) ;;
    keyauthd[01])
        n=${1#keyauthd}
        CMD=("$ROOT/build/keyauthd" --etcd "$endpoints" --listen "127.0.0.1:$((BASE + 10 + n))"
             --trusted-proxy 127.0.0.1)
        LOG=$VAR/logs/keyauthd$n.log PORT=$((BASE + 10 + n)) ;;
    syncd[01])
        n=${1#syncd}
        CMD=("$ROOT/build/keyauth-syncd" --etcd "$endpoints" --db "$VAR/edge$n/db"
             --usage-db "$VAR/edge$n/db.usage" --metrics "127.0.0.1:$((BASE + 20 + n))")
        LOG=$VAR/edge$n/logs/syncd.log PORT=$((BASE + 20 + n)) ;;
    nginx[01])
        n=${1#nginx}
        CMD=(nginx -p "$VAR/edge$n" -c "$VAR/edge$n/nginx.conf" -e "$VAR/edge$n/logs/error.log"
             -g 'daemon off;')
        LOG=$VAR/edge$n/logs/error.log PORT=$((BASE + n)) ;;
    *)
        echo "no part $1 (${PARTS[*]})" >&2
        return 2 ;;
    esac
}

# launch PART [detached]: starts it in the background, its pid in $RUN
launch() {
    part "$1"
    if [ "${2:-}" = detached ]; then
        setsid "${CMD[@]}" </dev/null >>"$LOG" 2>&1 &
    else
        "${CMD[@]}" </dev/null >>"$LOG" 2>&1 &
    fi
    local pid=$!
    # (a part that could not even start has no start time: it is reported
    # as exited like any other)
    start_time_of "$pid" > "$RUN/$1.start" || echo - > "$RUN/$1.start"
    echo "$pid" > "$RUN/$1.pid"
    LAUNCHED=$pid
}

if [ "${1:-}" = start ]; then
    name=${2:?usage: run-cluster.sh start PART (${PARTS[*]})}
    case " ${PARTS[*]} " in *" $name "*) ;; *) echo "no part $name (${PARTS[*]})" >&2; exit 2 ;; esac
    supervisor_running ||
        { echo "no run-cluster.sh runs with $VAR: start the cluster first (make run-cluster)" >&2; exit 1; }
    BASE=$(cat "$RUN/base-port")
    if pid=$(running "$name"); then echo "$name runs already (pid $pid)"; exit 0; fi
    launch "$name" detached
    wait_port "$PORT"
    echo "$name started again (pid $LAUNCHED, log $LOG)"
    exit 0
fi
[ $# = 0 ] || { echo "usage: run-cluster.sh [start PART]" >&2; exit 2; }

BASE=${KEYAUTH_BASE_PORT:-8090}
if supervisor_running; then
    echo "a run-cluster.sh runs already with $VAR" >&2
    exit 1
fi
for name in "${PARTS[@]}"; do
    if pid=$(running "$name"); then
        echo "$name of an earlier run still runs (pid $pid): stop it first" >&2
        exit 1
    fi
done
START_AGAIN=$0
if [ "$VAR" != "$DEFAULT_VAR" ]; then START_AGAIN="KEYAUTH_VAR=$VAR $ROOT/nginx_conf/run-cluster.sh"; fi
echo "$BASE" > "$RUN/base-port"
echo "$$ $(start_time_of $$)" > "$RUN/supervisor"

declare -A names=()
stop() {
    trap - INT TERM EXIT
    local name pid left
    for name in "${PARTS[@]}"; do
        if pid=$(running "$name"); then kill -TERM "$pid" 2>/dev/null || true; fi
    done
    # parts started again by `start` are not our children: wait until each
    # has gone, then reap ours
    for _ in $(seq 150); do
        left=""
        for name in "${PARTS[@]}"; do
            if running "$name" >/dev/null; then left+=" $name"; fi
        done
        [ -z "$left" ] && break
        sleep 0.1
    done
    for name in $left; do
        if pid=$(running "$name"); then
            echo "$name (pid $pid) ignored SIGTERM for 15 s: SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    wait 2>/dev/null || true
    rm -f "$RUN"/*.pid "$RUN"/*.start "$RUN/supervisor"
    echo "stopped"
    exit "${1:-0}"
}
trap 'stop 130' INT
trap 'stop 143' TERM
trap 'stop $?' EXIT

up() {  # PART: launch it as our child
    launch "$1"
    names[$LAUNCHED]=$1
}

for i in 0 1 2; do up "etcd$i"; done
for i in 0 1 2; do part "etcd$i"; wait_port "$PORT"; done
up redis
part redis
wait_port "$PORT"

part etcd0
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

for n in 0 1; do up "keyauthd$n"; done

user_line="user root root;"
if [ "$(id -u)" != 0 ]; then user_line=""; fi
for n in 0 1; do
    edge=$VAR/edge$n
    mkdir -p "$edge/logs" "$edge/tmp"
    up "syncd$n"
    for _ in $(seq 300); do [ -e "$edge/db/data.mdb" ] && break; sleep 0.1; done
    sed -e "s|@SHARED_LIMITS@|keyauth_shared_limits redis://127.0.0.1:$((BASE + 50));|" \
        -e "s|@ROOT@|$ROOT|g" -e "s|@VAR@|$edge|g" -e "s|@PORT@|$((BASE + n))|g" \
        -e "s|@KEYAUTHD_PORT@|$((BASE + 10 + n))|g" -e "s|@USER_LINE@|$user_line|g" \
        -e "s|@USAGE_DB@|$edge/db.usage|g" \
        "$ROOT/nginx_conf/demo.conf" > "$edge/nginx.conf"
    up "nginx$n"
done
for n in 0 1; do part "nginx$n"; wait_port "$PORT"; done
# an edge shares limits from its first exchange with Redis on (it reads the
# stream from its newest entry then): wait for it, so that what the other
# edge spends from here on is counted at both
for n in 0 1; do
    for _ in $(seq 100); do
        grep -q 'sharing rate limits through' "$VAR/edge$n/logs/error.log" 2>/dev/null && break
        sleep 0.1
    done
done

# README's many-edge walkthrough with this run's ports and paths
walkthrough=$(perl -0ne 'print $1 if /<!-- cluster walkthrough:[^\n]*-->\n```sh\n(.*?)```/s' "$ROOT/README.md" |
    BASE=$BASE VAR=$VAR DEFAULT=$DEFAULT_VAR ROOT=$ROOT perl -pe '
        s{127\.0\.0\.1:(\d+)}{"127.0.0.1:" . ($1 >= 8090 && $1 <= 8140 ? $1 - 8090 + $ENV{BASE} : $1)}ge;
        if ($ENV{VAR} ne $ENV{DEFAULT}) {
            s{\bvar-cluster/}{$ENV{VAR}/}g;
            s{\bnginx_conf/run-cluster\.sh}{KEYAUTH_VAR=$ENV{VAR} $ENV{ROOT}/nginx_conf/run-cluster.sh}g;
        }
        s/^(?=.)/  /;')

cat <<MSG

keyauth many-edge demo, data in $VAR:
  etcd members  $endpoints
  keyauthd      127.0.0.1:$((BASE + 10)), 127.0.0.1:$((BASE + 11)) (each behind one edge's /v1/keys)
  edges (nginx) http://127.0.0.1:$BASE, http://127.0.0.1:$((BASE + 1))
  syncd metrics http://127.0.0.1:$((BASE + 20))/metrics, http://127.0.0.1:$((BASE + 21))/healthz
  redis         127.0.0.1:$((BASE + 50)) (the edges share each key's limit through it)
Logs: $VAR/logs/ and $VAR/edge*/logs/; pids: $RUN/. Ctrl-C stops everything.
Try (README.md, "Many edges: make run-cluster"; "#=>" is what it prints, "a moment later" means
once the edges have heard, well within a second):

$walkthrough

MSG

# Wait for Ctrl-C. A part that dies is reported; the rest keep running.
while :; do
    died="" rc=0
    wait -n -p died || rc=$?
    died=${died:-}
    if [ -n "$died" ] && [ -n "${names[$died]:-}" ]; then
        echo "run-cluster: ${names[$died]} (pid $died) exited with status $rc; the rest keep running." \
             "Start it again: $START_AGAIN start ${names[$died]}"
        unset "names[$died]"
    elif [ -z "$died" ]; then
        sleep 1 &
        wait $! || true
    fi
done
