"""Message signatures: ed25519 over the RFC 8785 (JCS) form of the envelope without `security.auth.sig`,
keys and signatures as base64url without padding (README, "Message signatures"). Needs the `sign` extra
(`cryptography`)."""

from __future__ import annotations

import base64
import copy
import json
from decimal import Decimal
from typing import Any


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def canonical(value: Any) -> str:
    """The JCS form of a JSON value: members sorted by UTF-16 code units, no whitespace, numbers as
    ECMAScript prints doubles, strings with only the escapes JSON requires."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be"))
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canonical(v) for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number(float(value))
    return json.dumps(value, ensure_ascii=False)


def _number(x: float) -> str:
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError("JSON has no NaN or infinity")
    if x == 0:
        return "0"
    if x < 0:
        return "-" + _number(-x)
    _, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    d = "".join(map(str, digits))
    k = len(d)
    n = k + exp
    if k <= n <= 21:
        return d + "0" * (n - k)
    if 0 < n <= 21:
        return d[:n] + "." + d[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + d
    return d[0] + ("." + d[1:] if k > 1 else "") + "e" + ("+" if n > 1 else "-") + str(abs(n - 1))


class Signer:
    """Signs envelopes with one key: `Signer(kid, secret)` where `secret` is the base64url private key
    `clutch keys generate` prints."""

    def __init__(self, kid: str, secret: str):
        try:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ImportError("signing needs the `sign` extra: pip install 'clutch-client[sign]'") from e
        self.kid = kid
        self._key = Ed25519PrivateKey.from_private_bytes(unb64url(secret))

    def sign(self, message: dict) -> dict:
        """A copy of `message` with `security.auth` set; `id` and `ts` must be in it already."""
        signed = copy.deepcopy(message)
        auth = {"scheme": "ed25519", "kid": self.kid}
        signed.setdefault("security", {})["auth"] = auth
        auth["sig"] = b64url(self._key.sign(canonical(signed).encode()))
        return signed
