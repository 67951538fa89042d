#!/usr/bin/env bash
# Run a command inside one of the chroots tests/chroots/make.sh builds, as if on that system:
#   tests/chroots/run.sh CHROOT_DIR COMMAND...
# The checkout this script is in (and the folders its .ci entries link to), /tmp, /dev and /proc
# are the host's (bind mounts in a private mount namespace, gone when the command ends), so paths
# are the same inside and out, wherever the checkout lies; the working directory is kept.
# offlink runs from the checkout this script is in, with the chroot's Python 3.13 and the
# dependencies make.sh installed (/opt/offlink-venv): `offlink` and `python3` on PATH are those.
set -euo pipefail
root=$(realpath "$1"); shift
repo=$(cd "$(dirname "$0")/../.." && pwd)
[ -f "$root/.offlink-ready" ] || { echo "tests/chroots/run.sh: $root is not ready (tests/chroots/make.sh)" >&2; exit 2; }
# The host folders seen inside: the checkout, and where its .ci links point (a worktree links
# the toolchain sources and suites of another checkout), each once.
shared=$(for d in "$repo" "$repo"/.ci/*; do [ "${d##*/}" = chroots ] || realpath "$d"; done | sort -u |
  awk '{ for (i in seen) if (index($0 "/", seen[i] "/") == 1) next; seen[NR] = $0; print }')
exec unshare --mount --propagation private bash -c '
  set -e
  root=$1 repo=$2 cwd=$3 shared=$4; shift 4
  # The checkout holds the chroots (.ci/chroots): a plain bind, not a recursive one, so the
  # chroot does not appear inside itself.
  while read -r d; do mkdir -p "$root$d"; mount --bind "$d" "$root$d"; done <<< "$shared"
  for d in /tmp /dev; do mkdir -p "$root$d"; mount --rbind "$d" "$root$d"; done
  mount -t proc proc "$root/proc"
  # The `offlink` command inside: the same few bytes for every checkout (PYTHONPATH names the
  # checkout), written once and by rename, as runs of several checkouts share the chroot (a
  # file rewritten in place while another run executes it fails that run: ETXTBSY).
  wrapper=$root/opt/offlink-bin/offlink
  text="#!/bin/sh
exec /opt/offlink-venv/bin/python -m offlink \"\$@\""
  if [ "$(cat "$wrapper" 2>/dev/null)" != "$text" ]; then
    mkdir -p "$root/opt/offlink-bin"
    tmp=$(mktemp "$wrapper.XXXXXX")
    printf "%s\n" "$text" > "$tmp"; chmod 755 "$tmp"; mv -f "$tmp" "$wrapper"
  fi
  exec chroot "$root" /usr/bin/env -C "$cwd" \
    PATH=/opt/offlink-bin:/opt/offlink-venv/bin:/usr/local/bin:/usr/bin:/bin \
    PYTHONPATH="$repo" HOME=/tmp LANG=C.UTF-8 TMPDIR=/tmp "$@"
' _ "$root" "$repo" "$PWD" "$shared" "$@"
