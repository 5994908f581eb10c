"""Seeds derived from names: every random stream in cosmosfl is seeded from the run's seed and
a tuple naming what it is for, so what a stream draws never depends on the order in which
things are built (docs/architecture.md, Determinism)."""

from __future__ import annotations

import hashlib


def derive_seed(*parts: int | str) -> int:
    """A stable 63-bit seed from a tuple of ints/strings (independent of PYTHONHASHSEED)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)
