"""The eight tasks, one class each (the table in ``geoanatomy.tasks`` describes them)."""
from __future__ import annotations

import numpy as np

from .base import LevelParamError, Task
from .hashing import stable_seed
from .tokens import TOK, _concat, _const, _digits, _from_digits


def parity_support(length: int, support: int | None = None) -> np.ndarray:
    """The bit positions (k,) whose parity is par's answer, for ``length`` bits.

    ``support`` = None or ``length``: every bit (full parity). Fewer: a fixed subset of
    ``support`` positions (sparse parity, the (n, k)-parity of Barak et al. 2022), drawn once
    from a hash of (length, support) only, so every seed and every run learns the same function.
    """
    n = int(length)
    k = n if support is None else int(support)
    if not 1 <= k <= n:
        raise ValueError(f"par: support {k} must be between 1 and length {n}")
    if k == n:
        return np.arange(n)
    rng = np.random.default_rng(stable_seed("par support", n, k))
    return np.sort(rng.choice(n, size=k, replace=False))


class _Symbols(Task):
    """``length`` symbols drawn uniformly; the prompt is the string itself."""

    level_param = "length"

    def n_in(self, p):
        return int(p["length"])

    def space_log10(self, p):
        return self.n_in(p) * np.log10(self.base)

    def input_space(self, p):
        return self.base ** int(p["length"])

    def draw(self, p, rng, n):
        return rng.integers(0, self.base, size=(n, self.n_in(p)))

    def layout(self, p, x):
        return _concat(_const(len(x), self.token), x, _const(len(x), "="))

    def n_answer(self, p):
        return self.n_in(p)         # copy, reverse, sort: as many answer symbols as inputs


class Copy(_Symbols):
    """``COPY 3 1 4 1 = 3 1 4 1``."""

    name = "copy"
    levels = {"L1": {"length": 4}, "L2": {"length": 8}, "L3": {"length": 16}}

    def answer(self, p, x):
        return np.asarray(x, dtype=np.int64).copy()


class Rev(_Symbols):
    """``REV 3 1 4 1 = 1 4 1 3``."""

    name = "rev"
    levels = {"L1": {"length": 4}, "L2": {"length": 8}, "L3": {"length": 12}}

    def answer(self, p, x):
        return np.asarray(x, dtype=np.int64)[:, ::-1].copy()


class Sort(_Symbols):
    """``SORT 3 1 4 1 = 1 1 3 4``."""

    name = "sort"
    levels = {"L1": {"length": 4}, "L2": {"length": 6}, "L3": {"length": 10}}

    def answer(self, p, x):
        return np.sort(np.asarray(x, dtype=np.int64), axis=1)


class Parity(_Symbols):
    """``PAR 1 0 1 1 0 1 0 = 1``: the parity of ``support`` fixed bits of ``length``
    (``parity_support``); hardness n ** k, the statistical-query cost of finding them."""

    name = "par"
    levels = {"L1": {"length": 7, "support": 1}, "L2": {"length": 7, "support": 2},
              "L3": {"length": 7, "support": 3}}
    optional_params = {"support": "bits that decide the answer (default: all; fewer = sparse parity)"}
    base = 2
    unit = "bits"

    @property
    def hardness_by(self):
        return "length ** support (k relevant bits among n)"

    def n_answer(self, p):
        return 1

    def answer(self, p, x):
        bits = parity_support(self.n_in(p), p.get("support"))
        return np.asarray(x, dtype=np.int64)[:, bits].sum(1, keepdims=True) % 2

    def hardness(self, p):
        v = p[self.level_param]
        return int(v) ** int(p.get("support", v))

    def check_values(self, p):
        want = self.level_param
        if "support" in p and not (isinstance(p["support"], int) and 1 <= p["support"] <= p[want]):
            raise LevelParamError(f"{p['support']!r} must be an integer between 1 and length ({p[want]})",
                                  "support")
        super().check_values(p)

    def spec(self, level, p):
        parity_support(self.n_in(p), p.get("support"))     # a bad support fails here, not at the first answer
        return super().spec(level, p)


class _TwoNumbers(Task):
    """Two ``digits``-digit numbers side by side: 2 x digits input digits, 10^(2 digits)
    inputs, symmetric in the pair (a, b) of width ``digits``."""

    level_param = "digits"

    def n_in(self, p):
        return 2 * int(p["digits"])

    def space_log10(self, p):
        return 2 * int(p["digits"])

    def input_space(self, p):
        return 10 ** (2 * int(p["digits"]))

    def pair_width(self, p):
        return int(p["digits"])


class Cmp(_TwoNumbers):
    """``CMP 4 2 , 4 7 = <``; half the time the second number shares a random-length prefix
    with the first (otherwise the first digit decides almost every case)."""

    name = "cmp"
    level_param = "digits"
    levels = {"L1": {"digits": 2}, "L2": {"digits": 4}, "L3": {"digits": 8}}

    def n_answer(self, p):
        return 1

    def draw(self, p, rng, N):
        n = int(p["digits"])
        a = rng.integers(0, 10, size=(N, n))
        b = rng.integers(0, 10, size=(N, n))
        share = rng.random(N) < 0.5
        k = rng.integers(0, n + 1, size=N)          # shared prefix length
        mask = share[:, None] & (np.arange(n)[None, :] < k[:, None])
        b = np.where(mask, a, b)
        return np.concatenate([a, b], axis=1)

    def layout(self, p, x):
        n = int(p["digits"])
        return _concat(_const(len(x), self.token), x[:, :n], _const(len(x), ","), x[:, n:], _const(len(x), "="))

    def answer(self, p, x):
        n = int(p["digits"])
        a, b = _from_digits(x[:, :n]), _from_digits(x[:, n:])
        out = np.where(a < b, TOK["<"], np.where(a > b, TOK[">"], TOK["EQ"]))
        return out[:, None].astype(np.int64)


class Add(_TwoNumbers):
    """``ADD 2 4 + 9 1 = 1 6 0``: 42 + 19 = 61, operands and answer least significant first."""

    name = "add"
    level_param = "digits"
    levels = {"L1": {"digits": 2}, "L2": {"digits": 3}, "L3": {"digits": 4}}

    def n_answer(self, p):
        return int(p["digits"]) + 1

    def draw(self, p, rng, N):
        return rng.integers(0, 10, size=(N, 2 * int(p["digits"])))

    def layout(self, p, x):
        n = int(p["digits"])
        return _concat(_const(len(x), self.token), x[:, :n][:, ::-1], _const(len(x), "+"), x[:, n:][:, ::-1],
                       _const(len(x), "="))

    def answer(self, p, x):
        n = int(p["digits"])
        return _digits(_from_digits(x[:, :n]) + _from_digits(x[:, n:]), n + 1)[:, ::-1].copy()


class Mod(Task):
    """``MOD 3 0 + 0 9 = 0 2`` (p = 37): a, b < p, answer (a + b) mod p, each written in the
    width of p - 1."""

    name = "mod"
    level_param = "modulus"
    levels = {"L1": {"modulus": 37}, "L2": {"modulus": 61}, "L3": {"modulus": 97}}

    @staticmethod
    def _width(p) -> int:
        return len(str(int(p["modulus"]) - 1))

    def n_in(self, p):
        return 2 * self._width(p)

    def n_answer(self, p):
        return self._width(p)

    def space_log10(self, p):
        return 2 * np.log10(int(p["modulus"]))

    def input_space(self, p):
        return int(p["modulus"]) ** 2

    def pair_width(self, p):
        return self._width(p)

    def draw(self, p, rng, N):
        m, w = int(p["modulus"]), self._width(p)
        ab = rng.integers(0, m, size=(N, 2))
        return np.concatenate([_digits(ab[:, 0], w), _digits(ab[:, 1], w)], axis=1)

    def layout(self, p, x):
        w = self._width(p)
        return _concat(_const(len(x), self.token), x[:, :w], _const(len(x), "+"), x[:, w:], _const(len(x), "="))

    def answer(self, p, x):
        m, w = int(p["modulus"]), self._width(p)
        return _digits((_from_digits(x[:, :w]) + _from_digits(x[:, w:])) % m, w)


class Mul(Task):
    """``MUL 7 4 * 8 = 6 7 3``: 47 x 8 = 376, operands and answer least significant first;
    ``digits`` = [digits of a, digits of b]."""

    name = "mul"
    level_param = "digits"
    levels = {"L1": {"digits": [2, 1]}, "L2": {"digits": [3, 1]}, "L3": {"digits": [4, 1]}}

    @staticmethod
    def _widths(p) -> tuple[int, int]:
        da, db = (int(v) for v in p["digits"])
        return da, db

    def n_in(self, p):
        return sum(self._widths(p))

    def n_answer(self, p):
        return sum(self._widths(p))

    def space_log10(self, p):
        return sum(self._widths(p))

    def input_space(self, p):
        return 10 ** sum(int(d) for d in p["digits"])

    def pair_width(self, p):
        da, db = self._widths(p)
        return da if da == db else None

    def check_values(self, p):
        if not isinstance(p["digits"], list):
            raise LevelParamError(f"give [digits_a, digits_b], got {p['digits']!r}", "digits")

    def draw(self, p, rng, N):
        return rng.integers(0, 10, size=(N, self.n_in(p)))

    def layout(self, p, x):
        da, _ = self._widths(p)
        return _concat(_const(len(x), self.token), x[:, :da][:, ::-1], _const(len(x), "*"), x[:, da:][:, ::-1],
                       _const(len(x), "="))

    def answer(self, p, x):
        da, db = self._widths(p)
        return _digits(_from_digits(x[:, :da]) * _from_digits(x[:, da:]), da + db)[:, ::-1].copy()
