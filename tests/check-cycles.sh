#!/bin/sh
# rematd's link graph has no cycle that spans folders (issue 23): from the
# objects the build links into api/rematd (the Makefile's
# am_api_rematd_OBJECTS, expanded), each object's undefined symbols point at
# the object that defines them (nm); a strongly connected component of that
# graph may sit inside one folder (a backend's files, api/store/sqlite/,
# call each other), never across two.  Prints every cycle; 77 before the
# build or without nm.
builddir=${top_builddir:-.}
if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
command -v nm >/dev/null 2>&1 || { echo "check-cycles: no nm"; exit 77; }
[ -x "$builddir/api/rematd" ] || { echo "check-cycles: api/rematd is not built"; exit 77; }
cd "$builddir" || exit 1
make -pn 2>/dev/null | "$PYTHON" -c '
import os, re, subprocess, sys
db = sys.stdin.read()
var = dict(re.findall(r"^(am__objects_\d+|am_api_rematd_OBJECTS|nodist_api_rematd_OBJECTS) = (.*)$",
                      db, re.M))
def expand(v):
    out = []
    for t in v.split():
        m = re.fullmatch(r"\$\((\w+)\)", t)
        if m and m.group(1) in var:
            out += expand(var[m.group(1)])
        elif t.endswith(".$(OBJEXT)"):
            out.append(t[:-len("$(OBJEXT)")] + "o")
    return out
objs = expand(var.get("am_api_rematd_OBJECTS", "")) + expand(var.get("nodist_api_rematd_OBJECTS", ""))
objs = [o for o in objs if os.path.exists(o)]
if len(objs) < 20:
    print("check-cycles: found %d of rematd objects; the Makefile changed?" % len(objs))
    sys.exit(1)
defs, undefs = {}, {}
for o in objs:
    d, u = set(), set()
    for line in subprocess.run(["nm", o], capture_output=True, text=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDBRC":
            d.add(p[2])
        elif len(p) == 2 and p[0] == "U":
            u.add(p[1])
    defs[o], undefs[o] = d, u
owner = {s: o for o, d in defs.items() for s in d}
g = {o: {owner[s] for s in undefs[o] if s in owner and owner[s] != o} for o in objs}
sys.setrecursionlimit(10000)
index, low, stack, on, comps = {}, {}, [], set(), []
def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in g[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        comps.append(comp)
for v in objs:
    if v not in index:
        visit(v)
bad = 0
for comp in comps:
    if len(comp) < 2:
        continue
    folders = sorted({os.path.dirname(o) for o in comp})
    print("%s: a cycle of %d objects in %s" % ("check-cycles" if len(folders) == 1 else "FAIL",
                                               len(comp), ", ".join(folders)))
    bad += len(folders) > 1
print("check-cycles: %d objects, %d cycles across folders" % (len(objs), bad))
sys.exit(1 if bad else 0)
'
