#!/usr/bin/env bash
# Make a local Debian or Ubuntu base image without any image registry.
#
# For machines that cannot reach Docker Hub (CI here; air-gapped labs): build the
# root file system with debootstrap from a Debian mirror and import it as an
# image. The Dockerfile's BASE build argument can then point at it:
#
#     bash scripts/make_base_image.sh                      # -> kit-base/debian:bookworm
#     kit image build --stack cpu --base kit-base/debian:bookworm
#     bash scripts/make_base_image.sh kit-base/ubuntu:18.04 bionic   # the cuda10 stack's OS
#     kit image build --stack cuda10 --base kit-base/ubuntu:18.04
#     bash scripts/make_base_image.sh kit-base/ubuntu:24.04 noble    # the cuda12 stack's OS
#     kit image build --stack cuda12 --base kit-base/ubuntu:24.04
#
# Ubuntu suites (bionic, focal, jammy, noble) come from the Ubuntu archive, with
# main and universe (Python 3.7 is in bionic's universe) and the -updates and
# -security pockets, as in Ubuntu's own images. Where the host has no Ubuntu
# keyring (Debian), debootstrap cannot check the first Release file's signature
# and says so; inside the image apt checks every later download with Ubuntu's keys.
#
# Usage: make_base_image.sh [IMAGE] [SUITE] [MIRROR]
# Skips the work when IMAGE already exists. Needs root (debootstrap) and a
# running Docker engine.
set -euo pipefail

IMAGE="${1:-kit-base/debian:bookworm}"
SUITE="${2:-bookworm}"
case "$SUITE" in
    bionic|focal|jammy|noble) UBUNTU=1; DEFAULT_MIRROR="${UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}" ;;
    *) UBUNTU=0; DEFAULT_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}" ;;
esac
MIRROR="${3:-$DEFAULT_MIRROR}"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "make_base_image: $IMAGE already exists; nothing to do"
    exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq debootstrap >/dev/null
fi

ROOTFS="$(mktemp -d /tmp/kit-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT

# debootstrap names each suite's script after it; Debian 12's debootstrap
# (1.0.128) predates Ubuntu 24.04 "noble", whose script is the one every Ubuntu
# release since 7.10 shares (scripts/gutsy; newer debootstraps link noble to it).
SCRIPT=""
SCRIPTS_DIR="${DEBOOTSTRAP_DIR:-/usr/share/debootstrap}/scripts"
if [ "$UBUNTU" = 1 ] && [ ! -e "$SCRIPTS_DIR/$SUITE" ] && [ -e "$SCRIPTS_DIR/gutsy" ]; then
    SCRIPT="$SCRIPTS_DIR/gutsy"
    echo "make_base_image: this debootstrap has no script for $SUITE; using the shared Ubuntu one ($SCRIPT)"
fi

echo "make_base_image: debootstrap --variant=minbase $SUITE from $MIRROR"
debootstrap --variant=minbase "$SUITE" "$ROOTFS" "$MIRROR" $SCRIPT >"$ROOTFS.log" 2>&1 || {
    echo "make_base_image: debootstrap failed; its log:" >&2
    tail -n 30 "$ROOTFS.log" >&2
    exit 1
}
rm -f "$ROOTFS.log"
if [ "$UBUNTU" = 1 ]; then
    {
        echo "deb $MIRROR $SUITE main universe"
        echo "deb $MIRROR $SUITE-updates main universe"
        echo "deb $MIRROR $SUITE-security main universe"
    } > "$ROOTFS/etc/apt/sources.list"
fi
# Keep the image small and its apt lists fresh-on-demand, like the official images.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*

tar -C "$ROOTFS" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    --message "debootstrap --variant=minbase $SUITE $MIRROR" \
    - "$IMAGE" >/dev/null
echo "make_base_image: imported $IMAGE"
