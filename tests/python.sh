#!/bin/sh
# The remat Python package's tests (tests/python/, pytest) with an
# interpreter that has torch and pytest: $PYTHON, else configure's $PYTHON3, else Debian's
# /usr/bin/python3 (python3-torch, python3-pytest), else python3 on PATH.
# 77 (skipped) when none has both.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
export top_srcdir
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
for py in ${PYTHON:-} ${PYTHON3:-} /usr/bin/python3 python3; do
    if "$py" -c 'import torch, pytest' >/dev/null 2>&1; then
        echo "python-tests: $py, torch $("$py" -c 'import torch; print(torch.__version__)')"
        cd "$top_srcdir/tests/python" || exit 1
        # -p no:cacheprovider: nothing is written into the source tree.
        # nice: torch keeps a core busy for a minute, and the lease tests
        # that make check runs beside it (30 s leases) must not starve.
        nice=$(command -v nice)
        exec ${nice:+$nice -n 10} "$py" -m pytest -q -p no:cacheprovider -rs .
    fi
done
echo "SKIP: no python3 with torch and pytest (python3-torch, python3-pytest)"
exit 77
