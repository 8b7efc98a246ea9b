#!/bin/sh
# The routes (api/routes/) use the HTTP layer only through http/http.h:
# the public head of struct rematd_request and the rematd_req_* verbs.  This
# fails when a file there includes http/http_private.h, or names a field of
# the private tail (struct rematd_req in http_private.h) through a request
# it holds, whatever that variable is called.  It then plants such a file in
# a scratch folder and checks that it is caught, so that a check that has
# stopped finding anything fails too.
srcdir=${top_srcdir:-.}
priv="$srcdir/api/http/http_private.h"
status=0

# The private fields: the members of struct rematd_req after "pub".
fields=$(sed -n '/^struct rematd_req {/,/^};/p' "$priv" |
    sed -e 's,/\*.*\*/,,' -e 's/\[[^]]*\]//g' |
    grep ';' | grep -v 'rematd_request pub;' |
    awk '/\(\*/ { sub(/.*\(\*/, ""); sub(/\).*/, ""); print; next }
         { sub(/;.*/, ""); n = split($0, part, ",");
           for (i = 1; i <= n; i++) { k = split(part[i], w, /[ *]+/); print w[k] } }' |
    grep '^[a-z_][a-z_0-9]*$' | sort -u)
n=$(printf '%s\n' $fields | grep -c .)
if [ "$n" -lt 15 ]; then
    echo "check-routes: found only $n private fields in $priv (the parse is broken): $fields"
    exit 1
fi

# check DIR: 0 when no file of DIR reaches into the private tail.
check() {
    bad=0
    for f in "$1"/*.c "$1"/*.h; do
        [ -f "$f" ] || continue
        if grep -n '#[[:space:]]*include[[:space:]]*"\(http/\)\{0,1\}http_private\.h"' "$f"; then
            echo "check-routes: ${f#"$srcdir"/} includes http_private.h"
            bad=1
        fi
        if grep -n 'struct rematd_req\b[^_u]\|req_of(' "$f"; then
            echo "check-routes: ${f#"$srcdir"/} uses the private struct rematd_req"
            bad=1
        fi
        # Every name this file gives a struct rematd_request pointer.
        vars=$(grep -o 'struct rematd_request \*[a-z_][a-z_0-9]*' "$f" | sed 's/.*\*//' | sort -u)
        for v in $vars; do
            for x in $fields; do
                if grep -n "\\b$v->$x\\b" "$f"; then
                    echo "check-routes: ${f#"$srcdir"/} names $v->$x, private to api/http/;" \
                        "add a rematd_req_* verb instead"
                    bad=1
                fi
            done
        done
    done
    return $bad
}

check "$srcdir/api/routes" || status=1

# The check must catch what it is for: a route that reads the pending
# answer, and one that includes the private header.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
printf 'static int f(struct rematd_request *req)\n{\n    return req->pending_status;\n}\n' \
    >"$tmp/a.c"
if check "$tmp" >/dev/null; then
    echo "check-routes: a planted req->pending_status was not caught"
    status=1
fi
printf '#include "http/http_private.h"\n' >"$tmp/a.c"
if check "$tmp" >/dev/null; then
    echo "check-routes: a planted include of http_private.h was not caught"
    status=1
fi

[ $status = 0 ] && echo "check-routes: api/routes/ uses http.h's public head and verbs only" \
    "($n private fields checked)"
exit $status
