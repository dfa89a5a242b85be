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


# ------------------------------------------------------------------ the known transitions
def grok_symbols(token: str = "GROK") -> np.ndarray:
    """The token ids grok writes its residues with, residue r as ``grok_symbols()[r]``: every id
    of the 32-token vocabulary except ``=`` and grok's own task token (30 symbols), each residue
    one opaque token as in the grokking literature (Power et al. 2022). Written in digits, as
    ``mod`` does, (a + b) mod p is learned digit-wise and generalises with the training set
    (measured at nano: 30% of p = 97, weight decay 1.0, held-out accuracy 0.93 by step 400,
    beside 0.94 on the training set), so there is no delay to study."""
    from .tokens import VOCAB
    return np.array([i for i, t in enumerate(VOCAB) if t not in ("=", token)], dtype=np.int64)


class Grok(Task):
    """``GROK a b = c``: c = (a + b) mod p, each residue one token (``grok_symbols``), learned
    from a *fixed* training set: a seeded-hash share ``train_frac`` of all p^2 ordered pairs
    (the rest held out, so the split is part of the task: ``heldout_frac`` = 1 - train_frac),
    the regime where a network fits its training set long before it generalises (grokking:
    Power et al. 2022; Nanda et al. 2023). Smaller training fractions are harder (the delay
    grows); weight decay is the training setting the delay depends on (config/known.yaml)."""

    name = "grok"
    level_param = "train_frac"
    levels = {"L1": {"train_frac": 0.7}, "L2": {"train_frac": 0.6}, "L3": {"train_frac": 0.5}}
    optional_params = {"modulus": "p (default 29, the largest prime the 30 symbols hold)"}
    unit = "residues"
    DEFAULT_MODULUS = 29
    MIN_TRAIN_PAIRS = 20             # a training set smaller than this is no task

    @property
    def hardness_by(self):
        return "1 - train_frac (a smaller fixed training set)"

    @classmethod
    def modulus(cls, p) -> int:
        return int(p.get("modulus", cls.DEFAULT_MODULUS))

    def symbol_base(self, p):
        return self.modulus(p)

    def n_in(self, p):
        return 2

    def n_answer(self, p):
        return 1

    def space_log10(self, p):
        return 2 * np.log10(self.modulus(p))

    def input_space(self, p):
        return self.modulus(p) ** 2

    def heldout_frac(self, p):
        return 1.0 - float(p["train_frac"])

    def hardness(self, p):
        return int(round(1000 * (1 - float(p["train_frac"]))))

    def check_values(self, p):
        f = p["train_frac"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f < 1:
            raise LevelParamError(f"the training fraction must be a number in (0, 1), got {f!r}", "train_frac")
        m = p.get("modulus", self.DEFAULT_MODULUS)
        most = len(grok_symbols(self.token))
        if isinstance(m, bool) or not isinstance(m, int) or not 2 <= m <= most:
            raise LevelParamError(f"{m!r} must be an integer between 2 and {most} (one vocabulary token per "
                                  f"residue)", "modulus")
        if f * m * m < self.MIN_TRAIN_PAIRS:
            raise LevelParamError(f"{f} of {m}^2 pairs is about {f * m * m:.0f} training pairs; at least "
                                  f"{self.MIN_TRAIN_PAIRS} are needed", "train_frac")

    def check_split(self, p, seed: int, level: str) -> None:
        """LevelParamError naming ``train_frac`` unless the fixed training set of ``seed`` at
        ``level`` (the split hashes both) holds every answer (a residue never seen as an answer
        cannot be learned, only guessed) and the held-out side is not empty."""
        from .data import is_heldout
        m = self.modulus(p)
        a, b = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
        x = np.stack([a.ravel(), b.ravel()], 1)
        held = is_heldout(self.spec(level, p), seed, self.heldout_frac(p), x)
        missing = sorted(set(range(m)) - set(((x[:, 0] + x[:, 1]) % m)[~held].tolist()))
        if missing or held.all() or not held.any():
            why = (f"the training set of seed {seed} holds no pair with answer {missing[:5]}" if missing
                   else f"it leaves {'no training' if held.all() else 'no held-out'} pair")
            raise LevelParamError(f"train_frac {p['train_frac']} of {m}^2 pairs: {why}; raise it", "train_frac")

    def draw(self, p, rng, N):
        return rng.integers(0, self.modulus(p), size=(N, 2))

    def layout(self, p, x):
        s = grok_symbols(self.token)
        return _concat(_const(len(x), self.token), s[x[:, :1]], s[x[:, 1:2]], _const(len(x), "="))

    def answer(self, p, x):
        return grok_symbols(self.token)[(x[:, :1] + x[:, 1:2]) % self.modulus(p)]


class Ind(Task):
    """``IND r r = s s s r r r = s s s``: ``length`` random digits with a marked segment
    (``=`` then ``segment`` random digits) inserted at a random offset; the answer, after the
    final ``=``, is that segment again. The second occurrence is predictable only by copying
    from the context (nothing about the digits is learnable across examples, and the random
    offset rules out a fixed positional shortcut): the final ``=`` must find the earlier ``=``
    and copy the token after it, the induction-head circuit (a previous-token head composed
    with an induction head, Olsson et al. 2022), whose formation is the in-context phase
    change. Inputs: the offset (two digits), the ``length`` context digits, the segment."""

    name = "ind"
    level_param = "length"
    levels = {"L1": {"length": 8}, "L2": {"length": 16}, "L3": {"length": 24}}
    optional_params = {"segment": "tokens of the repeated segment (default 3)"}
    DEFAULT_SEGMENT = 3
    MAX_LENGTH = 99                  # the offset is written in two digits

    @classmethod
    def _k(cls, p) -> int:
        return int(p.get("segment", cls.DEFAULT_SEGMENT))

    def n_in(self, p):
        return 2 + int(p["length"]) + self._k(p)

    def n_answer(self, p):
        return self._k(p)

    def space_log10(self, p):
        return np.log10(int(p["length"]) + 1) + int(p["length"]) + self._k(p)

    def input_space(self, p):
        return (int(p["length"]) + 1) * 10 ** (int(p["length"]) + self._k(p))

    def wide_inputs(self, p):
        return True

    def check_values(self, p):
        n, k = p["length"], p.get("segment", self.DEFAULT_SEGMENT)
        if isinstance(n, list) or not isinstance(n, int) or not 1 <= n <= self.MAX_LENGTH:
            raise LevelParamError(f"give one integer between 1 and {self.MAX_LENGTH}, got {n!r}", "length")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise LevelParamError(f"{k!r} must be a positive integer", "segment")

    def check_run(self, p, heldout_frac, block_size):
        need = self.spec("L1", p).seq_len - 1
        if need > block_size:
            raise LevelParamError(f"length {p['length']} with a segment of {self._k(p)} repeated needs {need} "
                                  f"positions; the context (model.block_size) is {block_size}", "length")

    def induction_query(self, p):
        """The final ``=``: its one earlier copy is the marker, whose next token is the answer."""
        return self.spec("L1", p).first_answer_pred_pos

    def draw(self, p, rng, N):
        n, k = int(p["length"]), self._k(p)
        o = rng.integers(0, n + 1, size=N)
        return np.concatenate([_digits(o, 2), rng.integers(0, 10, size=(N, n + k))], axis=1)

    def layout(self, p, x):
        n, k = int(p["length"]), self._k(p)
        x = np.asarray(x, dtype=np.int64)
        o = (_from_digits(x[:, :2]) % (n + 1))[:, None]                   # the marker's offset (N, 1)
        r, s = x[:, 2:2 + n], x[:, 2 + n:]
        idx = np.arange(n + 1 + k)[None, :]
        rel = idx - o                                                     # position relative to the marker
        noise = np.take_along_axis(r, np.clip(np.where(rel < 0, idx, idx - k - 1), 0, n - 1), axis=1)
        seg = np.take_along_axis(s, np.clip(rel - 1, 0, k - 1), axis=1)
        body = np.where(rel == 0, TOK["="], np.where((rel >= 1) & (rel <= k), seg, noise))
        return _concat(_const(len(x), self.token), body, _const(len(x), "="))

    def answer(self, p, x):
        return np.asarray(x, dtype=np.int64)[:, 2 + int(p["length"]):].copy()
