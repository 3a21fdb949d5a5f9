#!/usr/bin/env bash
# make run: seeds var/ once (a demo account, the plan catalog, an exchange
# rate), starts keyauthd and nginx in the foreground and prints what to curl.
# Ctrl-C stops both. Running it again reuses var/.
#
# Environment: KEYAUTH_PORT (8080), KEYAUTHD_PORT (8081), KEYAUTHD_ADMIN_PORT
# (8082), KEYAUTH_VAR (var).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${KEYAUTH_PORT:-8080}
KEYAUTHD_PORT=${KEYAUTHD_PORT:-8081}
ADMIN_PORT=${KEYAUTHD_ADMIN_PORT:-8082}
VAR=$(mkdir -p "${KEYAUTH_VAR:-$ROOT/var}" && cd "${KEYAUTH_VAR:-$ROOT/var}" && pwd)
DB=$VAR/db
# the usage store the workers write (keyauth_usage_db): keyauthd and
# keyauthctl are told where it is
USAGE_DB=$VAR/db.usage
CTL=("$ROOT/build/keyauthctl" --db "$DB" --usage-db "$USAGE_DB")

mkdir -p "$VAR/logs" "$VAR/tmp"

if [ ! -s "$VAR/console-token" ]; then
    echo "seeding $VAR ..."
    "${CTL[@]}" plans import "$ROOT/lmdb_schema/plans.json" >/dev/null
    "${CTL[@]}" fx set 83.50 >/dev/null
    made=$("${CTL[@]}" --json account create --name "Demo account" --entitlement 120)
    token=$(printf '%s' "$made" | sed -n 's/.*"consoleToken": *"\([^"]*\)".*/\1/p')
    (umask 077 && printf '%s\n' "$token" > "$VAR/console-token")
fi
# the admin API's token for the business's own services (one with every
# scope for the demo; give each real service only the scopes it needs)
if [ ! -s "$VAR/admin-token" ]; then
    made=$("${CTL[@]}" --json admin-token create --name demo --scope '*')
    token=$(printf '%s' "$made" | sed -n 's/.*"token": *"\([^"]*\)".*/\1/p')
    (umask 077 && printf '%s\n' "$token" > "$VAR/admin-token")
fi

# Workers run as www-data when it can use the store (read data.mdb, write
# the LMDB lock file), as the documented production setup does: the store
# stays root's to write (2750, data.mdb 0640), its group www-data reads it.
user_line=""
if [ "$(id -u)" = 0 ]; then
    chgrp -R www-data "$DB" 2>/dev/null || true
    # the usage env beside the store, the other way round: the collecting
    # worker (www-data) writes it, keyauthd (root here) reads it as its group
    # (keyauth_usage_db in nginx_conf/README.md)
    install -d -m 2750 "$USAGE_DB" && chown -R "www-data:$(id -g)" "$USAGE_DB" 2>/dev/null || true
    if runuser -u www-data -- test -r "$DB/data.mdb" 2>/dev/null &&
       runuser -u www-data -- test -w "$DB/lock.mdb" 2>/dev/null &&
       runuser -u www-data -- test -w "$USAGE_DB" 2>/dev/null; then
        user_line="user www-data www-data;"
    else
        user_line="user root root;  # www-data cannot reach $DB"
    fi
fi

sed -e "s|@SHARED_LIMITS@||" -e "s|@ROOT@|$ROOT|g" -e "s|@VAR@|$VAR|g" -e "s|@PORT@|$PORT|g" \
    -e "s|@KEYAUTHD_PORT@|$KEYAUTHD_PORT|g" -e "s|@USER_LINE@|$user_line|g" -e "s|@USAGE_DB@|$USAGE_DB|g" \
    "$ROOT/nginx_conf/demo.conf" > "$VAR/nginx.conf"

pids=()
stop() {
    trap - INT TERM EXIT
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    echo "stopped"
}
trap stop INT TERM EXIT

# nginx reaches keyauthd from 127.0.0.1: its X-Real-IP names the client in the audit trail;
# the admin API has its own listener, which nginx never proxies
"$ROOT/build/keyauthd" --db "$DB" --usage-db "$USAGE_DB" --listen "127.0.0.1:$KEYAUTHD_PORT" --trusted-proxy 127.0.0.1 \
    --admin-listen "127.0.0.1:$ADMIN_PORT" 2>>"$VAR/logs/keyauthd.log" &
pids+=($!)
nginx -p "$VAR" -c "$VAR/nginx.conf" -e "$VAR/logs/error.log" -g 'daemon off;' &
pids+=($!)

for _ in $(seq 50); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then break; fi
    sleep 0.1
done

cat <<MSG

keyauth demo: nginx on http://127.0.0.1:$PORT, keyauthd on 127.0.0.1:$KEYAUTHD_PORT
(admin API on 127.0.0.1:$ADMIN_PORT), data in $VAR
Logs: $VAR/logs/. Ctrl-C stops both. Try (the README walks through each step):

  export TOKEN=\$(cat $VAR/console-token)
  curl -s -X POST http://127.0.0.1:$PORT/v1/keys -H "Authorization: Bearer \$TOKEN" \\
       -H 'Content-Type: application/json' \\
       -d '{"name":"demo","scopes":["ip:read"],"rateLimitPerMinute":5}'
  export KEY=ka_...   # the "secret" above, shown once
  curl -s http://127.0.0.1:$PORT/v1/ip/8.8.8.8 -H "Authorization: Bearer \$KEY"
  curl -s http://127.0.0.1:$PORT/api/plans

Or open the developer console page, http://127.0.0.1:$PORT/console/, and sign in
with the console token (cat $VAR/console-token).

Your own services drive keyauth through the admin API (docs/admin-api.md):

  export ADMIN=\$(cat $VAR/admin-token)
  curl -s -X POST http://127.0.0.1:$ADMIN_PORT/v1/admin/accounts -H "Authorization: Bearer \$ADMIN" \\
       -H 'Content-Type: application/json' \\
       -d '{"name":"Acme","externalId":"cus_42","planId":"starter-500"}'
  curl -s "http://127.0.0.1:$ADMIN_PORT/v1/admin/usage/report?from=\$(date -u +%Y-%m-01)&to=\$(date -u +%F)&by=month" \\
       -H "Authorization: Bearer \$ADMIN"

MSG

wait -n "${pids[@]}" || true
