#!/usr/bin/env bash
# Fetch GCC 12.2's own libgomp test suite (libgomp/testsuite) and GCC's licences (COPYING*:
# GPL-3.0 with the runtime exception the tests are under) from Debian's archive: the orig
# tarball of the gcc-12 source package Debian 12's gcc-12 (12.2.0-14+deb12u1) is built from.
# Test inputs only, never committed (tests/libgomp_suite/README.md).
#
#     tests/libgomp_suite/fetch.sh [DEST]      (default .ci/gcc-12-src; ignored by git)
#
# DEST/libgomp/testsuite holds the tests afterwards. Idempotent: a complete DEST (its
# .complete stamp) is left alone. The tarball (83 MiB) is checked against the sha256 that
# Debian's gcc-12_12.2.0-14+deb12u1.dsc gives, then deleted once unpacked (about 20 s).
set -euo pipefail
dest=${1:-.ci/gcc-12-src}
url=http://deb.debian.org/debian/pool/main/g/gcc-12/gcc-12_12.2.0.orig.tar.gz
sha256=b8298be16aeeb96a889c6afed0a8e2241b47452e89cc81fe65ea849d5c740fcb
[ -f "$dest/.complete" ] && exit 0
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 5 --retry-delay 5 --retry-all-errors -o "$tmp/orig.tar.gz" "$url"
echo "$sha256  $tmp/orig.tar.gz" | sha256sum --check --quiet - \
  || { echo "offlink: error: $url: sha256 differs from the pinned one" >&2; exit 1; }
# The orig tarball holds GCC's own (dfsg) tarball: only its testsuite and licences are written.
tar -xzf "$tmp/orig.tar.gz" -O gcc-12-12.2.0/gcc-12.2.0-dfsg.tar.xz \
  | tar -xJf - -C "$tmp" --strip-components=1 --wildcards \
      'gcc-12.2.0/libgomp/testsuite/*' 'gcc-12.2.0/COPYING*'
rm "$tmp/orig.tar.gz"
touch "$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
