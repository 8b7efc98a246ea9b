#!/bin/sh
# Makes a Debian 12 "slim" base image from Debian's own packages, for machines
# that reach Debian's apt archive but no container image registry.
#
#   deploy/make-base.sh [TAG]      (default TAG: localhost/remat/debian:bookworm-slim)
#
# then build with   --build-arg DEBIAN_IMAGE=TAG
# (or tag it docker.io/library/debian:bookworm-slim, the Dockerfiles' default).
#
# No mirror host is named here: mmdebstrap is given this machine's own apt
# sources file, which it copies into the image as it is.  The image is
# minbase without manuals, docs (copyright files kept), info pages and
# locales, and with the apt settings Debian's official images carry, so that
# apt-get in a later layer leaves no package caches behind.
#
# Needs root (or mmdebstrap's unshare mode), mmdebstrap and podman.
# About 2 minutes on an idle machine; the image is about 80 MB.
# An existing TAG is kept unless REMAT_BASE_REBUILD=1.
set -eu
tag=${1:-localhost/remat/debian:bookworm-slim}
podman=${PODMAN:-podman}

if [ "${REMAT_BASE_REBUILD:-0}" != 1 ] && $podman image exists "$tag"; then
    echo "make-base: $tag exists (REMAT_BASE_REBUILD=1 to make it again)"
    exit 0
fi

src=
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    if [ -s "$f" ]; then src=$f; break; fi
done
if [ -z "$src" ]; then
    echo "make-base: no apt sources file (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list)" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/remat-base.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# The apt configuration of Debian's official images: no binary package
# caches, no downloaded .debs kept, no translations.
cat >"$tmp/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
APT::Install-Recommends "false";
EOF

# The merged-usr hooks make /bin, /lib and /sbin links the way debootstrap
# does; without them apt resolves usr-is-merged to usrmerge, which pulls in
# perl (about 50 MB).
mmdebstrap --variant=minbase --format=tar --quiet \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook="cp '$tmp/docker-clean' \"\$1/etc/apt/apt.conf.d/docker-clean\"" \
    --customize-hook='rm -f "$1"/var/cache/apt/*.bin "$1"/var/cache/apt/archives/*.deb' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/log/apt/* "$1"/var/log/dpkg.log' \
    bookworm "$tmp/rootfs.tar" "$src"

$podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    "$tmp/rootfs.tar" "$tag" >/dev/null
echo "make-base: $tag ($($podman image inspect --format '{{.Size}}' "$tag") bytes)"
