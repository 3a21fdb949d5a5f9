#!/usr/bin/env bash
# The layers and which may include which:
#   src/core        (C++ core)      nothing of nginx, nothing of admin/
#   src/*.c         (nginx glue)    over the core's one C header
#   admin/lib       (the store library)  nothing of src/*.c glue, nothing of a program
#   admin/<program> (keyauthd, keyauthctl, ...)  the library, nothing of another program
# and a size line: a source file over MAX_LINES (600) lines must be one concern
# that reads best whole, named with its reason in README.md's table of them
# (a row "| `path` | why |" under "### Files over 600 lines").
# Usage: check_layering.sh DIR (exit 1 listing each violation), or
# check_layering.sh --self-test (builds a tree with one violation of each kind
# and a clean one, and checks that exactly the violations are found).
set -euo pipefail

check() {
    local root=$1 bad=0
    say() { echo "layering: $*"; bad=1; }
    includes() { grep -HnE '^[[:space:]]*#[[:space:]]*include' "$@" 2>/dev/null || true; }
    # headers of a folder, by base name
    headers_of() { find "$1" -maxdepth 1 -name '*.h' -printf '%f\n' 2>/dev/null | sort -u; }

    local core_files
    core_files=$(find "$root/src/core" -name '*.cc' -o -name '*.h' 2>/dev/null | sort)
    if [ -n "$core_files" ]; then
        # each folder's include lines are read once, then searched per header
        local core_includes
        core_includes=$(includes $core_files)
        while IFS= read -r hit; do
            say "src/core includes nginx: ${hit#"$root"/}"
        done < <(grep -E '[<"](ngx_|nginx)' <<< "$core_includes" || true)
        local lib_headers
        lib_headers=$(headers_of "$root/admin/lib")
        for h in $lib_headers; do
            while IFS= read -r hit; do
                say "src/core includes the admin library's $h: ${hit#"$root"/}"
            done < <(grep -E "[<\"/]$h[>\"]" <<< "$core_includes" || true)
        done
    fi

    local admin_files
    admin_files=$(find "$root/admin" -name '*.cc' -o -name '*.h' 2>/dev/null | sort)
    if [ -n "$admin_files" ]; then
        while IFS= read -r hit; do
            say "admin/ includes nginx glue: ${hit#"$root"/}"
        done < <(includes $admin_files | grep -E '[<"/](ngx_|nginx)|\.c[>"]' || true)
    fi

    local programs
    programs=$(find "$root/admin" -mindepth 1 -maxdepth 1 -type d ! -name lib -printf '%f\n' 2>/dev/null | sort)
    local lib_includes q
    lib_includes=$(includes $(find "$root/admin/lib" -name '*.cc' -o -name '*.h' 2>/dev/null | sort))
    declare -A program_includes=()
    for q in $programs; do
        program_includes[$q]=$(includes $(find "$root/admin/$q" -name '*.cc' -o -name '*.h' | sort))
    done
    for p in $programs; do
        local theirs
        theirs=$(headers_of "$root/admin/$p")
        # the library must not reach into this program
        for h in $theirs; do
            while IFS= read -r hit; do
                say "admin/lib includes $p's $h: ${hit#"$root"/}"
            done < <(grep -E "[<\"/]$h[>\"]" <<< "$lib_includes" || true)
        done
        # nor another program
        for q in $programs; do
            [ "$p" = "$q" ] && continue
            for h in $theirs; do
                [ -e "$root/admin/$q/$h" ] && continue  # its own header of that name
                while IFS= read -r hit; do
                    say "admin/$q includes $p's $h: ${hit#"$root"/}"
                done < <(grep -E "[<\"/]$h[>\"]" <<< "${program_includes[$q]}" || true)
            done
        done
    done
    local max=${MAX_LINES:-600} f n
    while IFS= read -r f; do
        n=$(wc -l < "$f")
        [ "$n" -le "$max" ] && continue
        f=${f#"$root"/}
        grep -qF "| \`$f\` |" "$root/README.md" 2>/dev/null && continue
        say "$f has $n lines, over $max, and no row in README.md's \"Files over $max lines\""
    done < <(find "$root" \( -name .git -o -name build -o -name node_modules -o -name vendor \) -prune \
                  -o -type f \( -name '*.c' -o -name '*.cc' -o -name '*.h' -o -name '*.pm' -o -name '*.t' \
                  -o -name '*.sh' -o -name '*.pl' -o -name '*.js' -o -name '*.mjs' -o -name '*.lua' \) -print | sort)
    return $bad
}

self_test() {
    local t
    t=$(mktemp -d)
    trap 'rm -rf "$t"' RETURN
    mkdir -p "$t/src/core" "$t/admin/lib" "$t/admin/progA" "$t/admin/progB"
    echo '#include "core.h"' > "$t/src/core/core.cc"
    echo '#include "lib.h"' > "$t/admin/lib/lib.cc"
    touch "$t/src/core/core.h" "$t/admin/lib/lib.h" "$t/admin/progA/a.h" "$t/admin/progB/b.h"
    printf '#include "lib.h"\n#include "a.h"\n' > "$t/admin/progA/main.cc"
    printf '#include "lib.h"\n#include "b.h"\n' > "$t/admin/progB/main.cc"
    check "$t" >/dev/null || { echo "layering self-test: a clean tree was refused"; check "$t"; return 1; }
    # the size line: a long file is refused until the README names it
    seq 601 > "$t/admin/lib/long.cc"
    if check "$t" >/dev/null; then echo "layering self-test: missed a file over the size line"; return 1; fi
    echo '| `admin/lib/long.cc` | one concern |' > "$t/README.md"
    check "$t" >/dev/null || { echo "layering self-test: a long file named in the README was refused"; return 1; }
    rm "$t/admin/lib/long.cc" "$t/README.md"
    local kind file line
    while IFS='|' read -r kind file line; do
        cp "$t/$file" "$t/$file.orig"
        echo "$line" >> "$t/$file"
        if check "$t" >/dev/null; then
            echo "layering self-test: missed $kind"
            return 1
        fi
        mv "$t/$file.orig" "$t/$file"
    done <<'CASES'
core includes nginx|src/core/core.cc|#include <ngx_core.h>
core includes the admin library|src/core/core.cc|#include "lib.h"
admin includes glue|admin/lib/lib.cc|#include "ngx_http_keyauth_module.h"
admin includes a .c file|admin/progA/main.cc|#include "../../src/x.c"
the library includes a program|admin/lib/lib.cc|#include "a.h"
a program includes another|admin/progB/main.cc|#include "a.h"
a program includes another by path|admin/progB/main.cc|#include "../progA/a.h"
CASES
    echo "layering self-test: every kind of violation is found"
}

if [ "${1:-}" = --self-test ]; then
    self_test
else
    check "${1:-.}" && echo "layering: ok"
fi
