# Lines of "amount<TAB>object<TAB>function" -> "piece<TAB>sum of the
# amounts times scale", one line a piece in request-path order (and ns, when
# given, as a last line). bench/profile.sh feeds it perf's shares of the
# samples, bench/callgrind.sh cache misses. The keyauth pieces follow the
# request path of docs/performance.md; the rest goes by the object it ran in.
function piece(dso, sym) {
    if (dso ~ /kernel/) return "kernel (network, syscalls)"
    if (dso == "nginx") return "nginx"
    if (dso ~ /^libc/) return "libc (nginx's and the module's)"
    if (dso ~ /libcrypto/ || sym ~ /keyauth::sha256/) return "SHA-256 of the key"
    if (dso ~ /vdso/ || sym ~ /clock_gettime|ka_monotonic_ns/) return "clock"
    if (dso ~ /liblmdb/) return sym ~ /mdb_env_info|mdb_txn_re/ ? "snapshot (newest?)" : "LMDB (B-tree reads, usage writes)"
    if (dso !~ /keyauth/) return "other libraries"
    if (sym ~ /usage_flush|UsageEnv|usage_env|collect|encode_bucket|decode_bucket/) return "usage flush (timer, off the request path)"
    if (sym ~ /parse_bearer/) return "Bearer parse"
    if (sym ~ /secret_format_ok|crc32/) return "format + checksum"
    if (sym ~ /EdgeStore::begin|EdgeStore::newest/) return "snapshot (newest?)"
    if (sym ~ /find_key|slots_chunk|slots_header|key_slot|home_slot|SnapshotCache|KeyCache|decode_key/) return "key lookup (hot table)"
    if (sym ~ /[Aa]ccount|entitlement/) return "account"
    if (sym ~ /scope|grants|walk_packed/) return "scopes"
    if (sym ~ /RateSlot|RateTable|gcra|Gcra|admit|claim|count_spent|ka_rate_check|zone_prefetch|rate_limit$/) return "rate limit (GCRA, rate slot)"
    if (sym ~ /UsageSlot|UsageTable|usage_count|anonymous namespace\)::add$/) return "usage count (usage slot)"
    if (sym ~ /[Qq]uota/) return "quota"
    if (sym ~ /header_filter|add_header|rate_headers|rate_send|keyauth_uint/) return "RateLimit headers"
    if (sym ~ /variable/) return "variables"
    if (sym ~ /authenticate/) return "authenticate (the rest)"
    return "glue (handler, ctx, scrub, lock)"
}
BEGIN {
    FS = "\t"
    n = split("Bearer parse|format + checksum|SHA-256 of the key|snapshot (newest?)|key lookup (hot table)|" \
              "LMDB (B-tree reads, usage writes)|account|scopes|quota|rate limit (GCRA, rate slot)|" \
              "usage count (usage slot)|RateLimit headers|variables|clock|authenticate (the rest)|" \
              "usage flush (timer, off the request path)|" \
              "glue (handler, ctx, scrub, lock)|other libraries|libc (nginx's and the module's)|nginx|" \
              "kernel (network, syscalls)", order, "|")
}
{ total[piece($2, $3)] += $1 }
END {
    for (i = 1; i <= n; i++) printf "%s\t%.1f\n", order[i], total[order[i]] * scale
    if (ns != "") printf "%s\t%.1f\n", "worker CPU a request", ns
}
