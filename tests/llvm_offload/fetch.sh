#!/usr/bin/env bash
# Fetch LLVM 19.1.7's own offload tests (offload/test) and llvm-project's licence
# (LICENSE.TXT: Apache-2.0 WITH LLVM-exception; offload/ has none of its own in 19.1.7) from Debian's archive: the orig tarball of the
# llvm-toolchain-19 source package that Debian 12's clang-19 (1:19.1.7-3~deb12u1) is built
# from. They are test inputs only, never committed (tests/llvm_offload/README.md).
#
#     tests/llvm_offload/fetch.sh [DEST]      (default .ci/llvm-19-src; ignored by git)
#
# DEST/offload/test/offloading holds the tests afterwards. Idempotent: a complete DEST (its
# .complete stamp) is left alone. The tarball (157 MiB) is checked against the sha256 that
# Debian's signed llvm-toolchain-19_19.1.7-3~deb12u1.dsc gives, then deleted once unpacked.
#
#     tests/llvm_offload/fetch.sh DEST 22     LLVM 22.1.8's (clang-22 22.1.8-1~deb12u1, from
#                                             bookworm-security; the main archive's pool serves
#                                             the tarball, sha256 from that Sources index)
set -euo pipefail
dest=${1:-.ci/llvm-19-src}
case "${2:-19}" in
  19) top=llvm-toolchain-19_19.1.7
      sha256=ae498f3bc58ae2d9f64ef5f0c035c4240152bf015a5b7738b15c22e93bdc97ce;;
  22) top=llvm-toolchain-22_22.1.8
      sha256=b49b9277aef97616320b2da259e1f8174c65b0ce2fbe2e8629644a97693402fe;;
  *) echo "offlink: error: fetch.sh knows LLVM 19 and 22, not '$2'" >&2; exit 1;;
esac
members=("$top/offload/test/*")
[ "${3:-}" = device-runtime ] \
  && members=("$top/openmp/device/*" "$top/offload/include/*" "$top/libc/shared/*")
url=http://deb.debian.org/debian/pool/main/l/${top%%_*}/$top.orig.tar.xz
[ -f "$dest/.complete" ] && exit 0
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 5 --retry-delay 5 --retry-all-errors -o "$tmp/orig.tar.xz" "$url"
echo "$sha256  $tmp/orig.tar.xz" | sha256sum --check --quiet - \
  || { echo "offlink: error: $url: sha256 differs from the pinned one" >&2; exit 1; }
# xz streams cannot be read from the middle: the whole tarball is decompressed once, and
# only the wanted members are written.
tar -xJf "$tmp/orig.tar.xz" -C "$tmp" --strip-components=1 --wildcards \
  "${members[@]}" "$top/LICENSE.TXT"
rm "$tmp/orig.tar.xz"
touch "$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
