"""Stable seeds and per-key pseudo-random numbers (independent of Python's salted hash)."""
from __future__ import annotations

import hashlib

import numpy as np


def stable_seed(*parts) -> int:
    """Stable 64-bit seed from mixed parts (strings hashed, not Python's salted hash)."""
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: uint64 (N,) -> well-mixed uint64 (N,) (wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def hash_uniform(keys: np.ndarray, *salt) -> np.ndarray:
    """A fixed pseudo-random number in [0, 1) per int64 key (N,), salted by ``salt``."""
    s = np.uint64(stable_seed(*salt))
    with np.errstate(over="ignore"):
        h = _mix64(_mix64(np.asarray(keys, dtype=np.int64).astype(np.uint64) ^ s) + s)
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)
