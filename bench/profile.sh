# Sourced by bench/run.sh when PROFILE=1 (make bench-profile), after its
# nginx instances are up: where a request's worker CPU goes, piece by piece.
# For each configuration below, wrk runs PROFILE_SECONDS (10) while perf
# samples the worker (software clock, 4999 Hz: this VM has no hardware
# counters); each piece's share of the samples times the worker's CPU per
# request over the run (/proc, as run.sh measures it) is its nanoseconds a
# request. Pieces are told apart by function (bench/pieces.awk).

PROFILED=("empty_gif, no auth" "keyauth: key+scope+limit" "nginx map + limit_req"
          "map + limit_req + headers"
          "keyauth, 1k keys, random")
for n in $SCALE_KEYS; do PROFILED+=("keyauth, $n keys, random"); done
PSECS=${PROFILE_SECONDS:-10}

profile_one() { # name -> file of "piece ns"
    local n=$1 w t0 t1 out f=$W/profile-${#PIECES[@]}
    w=$(worker_pid "${PIDF[$n]}")
    t0=$(worker_ticks "${PIDF[$n]}")
    perf record -q -F 4999 -p "$w" -o "$f.data" -- sleep "$PSECS" 2>/dev/null &
    out=$(wrk_at "$n" "$PSECS")
    wait
    t1=$(worker_ticks "${PIDF[$n]}")
    local reqs; reqs=$(awk '/ requests in / {print $1}' <<<"$out")
    local ns=$(( (t1 - t0) * TICK_US * 1000 / reqs ))
    perf report -i "$f.data" --sort dso,sym --stdio 2>/dev/null |
        awk '/^#/ || NF < 3 { next }
             { pct = $1; sub(/%/, "", pct); sym = $0; sub(/^[^\]]*\] /, "", sym); sub(/@plt$/, "", sym)
               printf "%s\t%s\t%s\n", pct, $2, sym }' |
        awk -v ns="$ns" -v scale="$(awk -v ns="$ns" 'BEGIN {print ns / 100}')" -f "$ROOT/bench/pieces.awk" > "$f"
    PIECES+=("$f")
}

PIECES=()
for n in "${PROFILED[@]}"; do echo "profiling: $n ..." >&2; profile_one "$n"; done

echo
echo "keyauth profile — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, wrk -t1 -c$CONNS -d${PSECS}s, perf -F 4999 on the worker"
echo "worker CPU a request, ns, by piece (one run each; the kernel and nginx rows move by several % between runs)"
echo
{
    printf 'piece'; for n in "${PROFILED[@]}"; do printf '\t%s' "$n"; done; echo
    awk -F'\t' '{ v[$1, FILENAME] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
        END { for (i = 1; i <= k; i++) { p = order[i]; printf "%s", p
                  for (j = 1; j < ARGC; j++) printf "\t%.0f", v[p, ARGV[j]]; print "" } }' "${PIECES[@]}"
} | awk -F'\t' '{ line = "|"; for (i = 1; i <= NF; i++) line = line sprintf(i == 1 ? " %-42s |" : " %12s |", $i); print line
                  if (NR == 1) { line = "|"; for (i = 1; i <= NF; i++) line = line (i == 1 ? "--------------------------------------------|" : "-------------:|"); print line } }'
