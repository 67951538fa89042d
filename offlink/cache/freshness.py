"""The one freshness rule: when a file's stat stamp may stand for its content.

A stamp (keys.file_stamp: device, inode, size, mtime and ctime) tells one version of a file
from the next without reading it, except within one timestamp tick: a file rewritten in the
tick it was read in can later show the same stamp with other content ("racy git"). So what is
remembered by a stamp (a tool's identity, offlink's code identity, a relink's record of its
inputs, clang's kept linker jobs) is remembered only for files last changed more than SETTLED
seconds before they were read; the others are read again by the next link.
"""

from __future__ import annotations

import os
import time

SETTLED = 2.0  # seconds since a file's last change after which its stamp is trusted


def settled(st: os.stat_result, now_ns: int | None = None) -> bool:
    """Whether the file `st` describes was last changed more than SETTLED seconds before
    `now_ns` (time.time_ns(), by default): its stamp may stand for its content."""
    if now_ns is None:
        now_ns = time.time_ns()
    return now_ns - st.st_ctime_ns > SETTLED * 1e9
