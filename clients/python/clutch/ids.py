"""Ids as the daemon writes them: a prefix and a ULID (48 bits of milliseconds, 80 random bits, in
Crockford's base32), so they sort by time; and timestamps in RFC 3339 with milliseconds."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid() -> str:
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_ALPHABET[(value >> shift) & 31] for shift in range(125, -1, -5))


def new_id(prefix: str) -> str:
    """`new_id("msg")` → `msg_01J...`; prefixes are msg, run, thr, task."""
    return f"{prefix}_{ulid()}"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
