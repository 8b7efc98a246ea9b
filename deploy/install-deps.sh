#!/bin/sh
# Installs the Debian 12 packages remat builds, tests and runs with.
# Everything comes from Debian; nothing is downloaded at build or run time.
# REMAT_NO_TORCH=1 skips libtorch-dev (then the worker is not built).
set -e
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential autoconf automake libtool autoconf-archive pkg-config \
    libmicrohttpd-dev libjansson-dev libcmocka-dev libsqlite3-dev libcurl4-openssl-dev \
    python3 python3-jsonschema python3-yaml curl wrk clang clang-format cppcheck libclang-rt-14-dev git ca-certificates \
    librsvg2-bin fonts-dejavu-core libseccomp-dev
# libseccomp-dev: remat-worker's sandbox for uploaded models (docs/security.md).
# librsvg2-bin (rsvg-convert) and a font: the picture tests render every SVG
# remat draws to a PNG and check it (tests/png-check.py).
# The PostgreSQL store: libpq to build it, and a server (PostgreSQL 15) and
# psql for its tests (tests/api/postgresql.sh; skipped without them).
# REMAT_NO_POSTGRESQL=1 leaves them out: rematd then has the SQLite store only.
if [ "${REMAT_NO_POSTGRESQL:-0}" != 1 ]; then
    $SUDO apt-get install -y -qq --no-install-recommends libpq-dev postgresql postgresql-client
fi
if [ "${REMAT_NO_TORCH:-0}" != 1 ]; then
    $SUDO apt-get install -y -qq libtorch-dev
    # The uploaded-model tests script real modules (tests/worker/models-e2e.py)
    # with the PyTorch of the worker's libtorch (1.13).
    # python/'s tests (tests/python.sh) run pytest against the same torch.
    $SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-torchvision \
        python3-pytest
fi
# REMAT_CONTAINERS=1 adds what tests/deploy/podman.py builds and runs the
# images with (rootful podman, runc, mmdebstrap for the local Debian base);
# without them tests/run-all says "containers: skipped".
if [ "${REMAT_CONTAINERS:-0}" = 1 ]; then
    $SUDO apt-get install -y -qq --no-install-recommends podman runc mmdebstrap uidmap podman-compose
fi
