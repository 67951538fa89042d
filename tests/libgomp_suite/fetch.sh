#!/usr/bin/env bash
# Fetch a GCC release's own libgomp test suite (libgomp/testsuite) and GCC's licences (COPYING*:
# GPL-3.0 with the runtime exception the tests are under) from Debian's archive: the orig
# tarball of the gcc-N source package the Debian suite's gcc-N is built from.
# Test inputs only, never committed (tests/libgomp_suite/README.md).
#
#     tests/libgomp_suite/fetch.sh [DEST [RELEASE]]   (default .ci/gcc-12-src 12; ignored by git)
#
#   RELEASE  Debian package                 where offlink's tests run it
#   12       gcc-12 12.2.0-14+deb12u1       this machine (Debian 12)
#   13       gcc-13 13.3.0-16               the trixie chroot (tests/chroots)
#   14       gcc-14 14.2.0-19               the trixie chroot
#   15       gcc-15 15.3.0-5                the sid chroot
#   16       gcc-16 16.2.0-4                the sid chroot
#
# DEST/libgomp/testsuite holds the tests afterwards. Idempotent: a complete DEST (its
# .complete stamp) is left alone. The tarball (83-107 MiB) is checked against the sha256 the
# package's .dsc gives (Debian's Sources index), then deleted once unpacked (about 20 s).
set -euo pipefail
dest=${1:-.ci/gcc-12-src}
release=${2:-12}
case $release in
  12) upstream=12.2.0 sha256=b8298be16aeeb96a889c6afed0a8e2241b47452e89cc81fe65ea849d5c740fcb ;;
  13) upstream=13.3.0 sha256=2fde6610c97427ca320113b8ed99d75439c15b7d75d0a5410256a9cf4a8e5402 ;;
  14) upstream=14.2.0 sha256=e162a5ef3f0077ecae598c6556908d2ab80841532df3398072a96a6df6e6aa29 ;;
  15) upstream=15.3.0 sha256=183c7e2323a166ea7838159b75cd1ea6ec3901150c74b2451967b39bc759bf9b ;;
  16) upstream=16.2.0 sha256=1f12db4797c619339c7285ce109b35888cafad2487a388430e62f03b65e9ed64 ;;
  *) echo "offlink: error: no libgomp test suite pinned for GCC $release (12-16)" >&2; exit 2 ;;
esac
url=http://deb.debian.org/debian/pool/main/g/gcc-$release/gcc-${release}_$upstream.orig.tar.gz
[ -f "$dest/.complete" ] && exit 0
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 5 --retry-delay 5 --retry-all-errors -o "$tmp/orig.tar.gz" "$url"
echo "$sha256  $tmp/orig.tar.gz" | sha256sum --check --quiet - \
  || { echo "offlink: error: $url: sha256 differs from the pinned one" >&2; exit 1; }
# The orig tarball holds GCC's own (dfsg) tarball: only its testsuite and licences are written.
tar -xzf "$tmp/orig.tar.gz" -O "gcc-$release-$upstream/gcc-$upstream-dfsg.tar.xz" \
  | tar -xJf - -C "$tmp" --strip-components=1 --wildcards \
      "gcc-$upstream/libgomp/testsuite/*" "gcc-$upstream/COPYING*"
rm "$tmp/orig.tar.gz"
echo "$release $upstream" > "$tmp/.release"
touch "$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
