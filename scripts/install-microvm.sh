#!/usr/bin/env bash
# Installs what `warden run --backend microvm` boots: a Debian kernel, unpacked into a
# project-local directory (never the host's /boot), as an uncompressed vmlinux (QEMU's microvm
# machine boots it directly through its PVH entry, skipping decompression) and the few modules
# the guest needs (virtio-mmio, virtio-console, 9p). The host's boot is not touched.
# Idempotent. Directory: $WARDEN_MICROVM_DIR, default /var/lib/warden/microvm.
set -euo pipefail

DIR="${WARDEN_MICROVM_DIR:-/var/lib/warden/microvm}"
# The modules the guest loads, in dependency order (src/sandbox/microvm_init/init.cc loads them so).
MODULES=(drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_mmio
         drivers/char/virtio_console net/9p/9pnet net/9p/9pnet_virtio fs/netfs/netfs
         fs/fscache/fscache fs/9p/9p)

if [ -s "$DIR/vmlinux" ] && [ -s "$DIR/modules/9p.ko" ] && [ -s "$DIR/kernel-release" ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-microvm: $DIR is missing its kernel; run this script as root (or with sudo)" >&2
  exit 1
fi
command -v xz >/dev/null || { echo "install-microvm: needs xz (xz-utils)" >&2; exit 1; }

# The image package the linux-image-amd64 metapackage currently points at.
PKG="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
if [ -z "$PKG" ]; then apt-get update -qq; PKG="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"; fi
[ -n "$PKG" ] || { echo "install-microvm: cannot find the kernel package behind linux-image-amd64" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
chmod 755 "$WORK"
(cd "$WORK" && apt-get download "$PKG" >/dev/null 2>&1) || { echo "install-microvm: apt-get download $PKG failed" >&2; exit 1; }
dpkg-deb -x "$WORK"/*.deb "$WORK/x"
RELEASE="$(ls "$WORK/x/lib/modules")"
VMLINUZ="$WORK/x/boot/vmlinuz-$RELEASE"

# The bzImage carries the kernel as an xz stream: find its magic and unpack it (extract-vmlinux's idea).
OFFSET="$(LC_ALL=C grep -aboP '\xfd7zXZ\x00' "$VMLINUZ" | head -1 | cut -d: -f1)"
[ -n "$OFFSET" ] || { echo "install-microvm: no xz stream in $VMLINUZ" >&2; exit 1; }
tail -c +"$((OFFSET + 1))" "$VMLINUZ" | xz -dc > "$WORK/vmlinux" 2>/dev/null || true
head -c 4 "$WORK/vmlinux" | grep -q ELF || { echo "install-microvm: unpacking the kernel failed" >&2; exit 1; }

mkdir -p "$DIR.new/modules"
mv "$WORK/vmlinux" "$DIR.new/vmlinux"
for m in "${MODULES[@]}"; do cp "$WORK/x/lib/modules/$RELEASE/kernel/$m.ko" "$DIR.new/modules/"; done
cp "$WORK/x/boot/config-$RELEASE" "$DIR.new/config"
echo "$RELEASE" > "$DIR.new/kernel-release"
chmod -R a+rX "$DIR.new"
rm -rf "$DIR"
mv "$DIR.new" "$DIR"
echo "install-microvm: $PKG unpacked into $DIR"
