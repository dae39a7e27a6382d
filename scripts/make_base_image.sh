#!/usr/bin/env bash
# Make a local Debian 12 base image without any image registry.
#
# For machines that cannot reach Docker Hub (CI here; air-gapped labs): build the
# root file system with debootstrap from a Debian mirror and import it as an
# image. The Dockerfile's BASE build argument can then point at it:
#
#     bash scripts/make_base_image.sh                      # -> kit-base/debian:bookworm
#     kit image build --stack cpu --base kit-base/debian:bookworm
#
# Usage: make_base_image.sh [IMAGE] [SUITE] [MIRROR]
# Skips the work when IMAGE already exists. Needs root (debootstrap) and a
# running Docker engine.
set -euo pipefail

IMAGE="${1:-kit-base/debian:bookworm}"
SUITE="${2:-bookworm}"
MIRROR="${3:-${DEBIAN_MIRROR:-http://deb.debian.org/debian}}"

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

echo "make_base_image: debootstrap --variant=minbase $SUITE from $MIRROR"
debootstrap --variant=minbase "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 || {
    echo "make_base_image: debootstrap failed; its log:" >&2
    tail -n 30 "$ROOTFS.log" >&2
    exit 1
}
rm -f "$ROOTFS.log"
# Keep the image small and its apt lists fresh-on-demand, like the official images.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*

tar -C "$ROOTFS" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    --message "debootstrap --variant=minbase $SUITE $MIRROR" \
    - "$IMAGE" >/dev/null
echo "make_base_image: imported $IMAGE"
