"""Algorithmic tasks: seeded generators, token format, held-out split, answer masks.

Token format (shared vocabulary of 32 ids, see ``VOCAB``)::

    [TASK] input tokens ... = answer tokens ...

Every example of one task and level has the same length, so batches need no
padding and the answer occupies fixed positions. ``=`` (``SEP``) always sits
right before the answer: its position is the one that *predicts the first
answer token* (``first_answer_pred_pos``).

Tasks and what a level changes (values live in ``config.yaml`` under
``tasks:``; the defaults below are the same numbers):

====  =====================================  ===========================
task  example (L1)                           level parameter
====  =====================================  ===========================
copy  ``COPY 3 1 4 1 = 3 1 4 1``             ``length`` (digits)
rev   ``REV 3 1 4 1 = 1 4 1 3``              ``length`` (digits)
cmp   ``CMP 4 2 , 4 7 = <``                  ``digits`` per number
par   ``PAR 1 0 1 1 0 1 0 = 1``              ``support`` k of ``length`` n bits; answer = parity of k fixed bits
add   ``ADD 2 4 + 9 1 = 1 6 0``              ``digits`` per operand (42 + 19 = 61, all least significant first)
mod   ``MOD 3 0 + 0 9 = 0 2`` (p = 37)       ``modulus`` p; a, b < p; answer (a+b) mod p
sort  ``SORT 3 1 4 1 = 1 1 3 4``             ``length`` (digits)
mul   ``MUL 7 4 * 8 = 6 7 3``                ``digits`` of each operand ``[da, db]`` (47 x 8 = 376, reversed)
====  =====================================  ===========================

Numbers are written most-significant digit first and zero-padded to a fixed
width, except in add and mul, whose operands and answers are all written least-significant
digit first, as small-transformer arithmetic studies do (Lee et al. 2023, "Teaching
arithmetic to small transformers", reverse the answer; McLeish et al. 2024 and Shen et al.
2023 reverse every number): with the most significant digit first, the first answer digit
depends on every carry and the model must solve the whole problem before emitting anything;
reversed, answer digit i needs only the operands' digits at place i (at a fixed offset from
it in the sequence) and the carry from place i - 1. Measured at nano in 1,500 steps,
reversing the answers alone left 3-digit addition and 3x1-digit multiplication unlearned;
reversing the operands too, 4-digit addition is acquired at step 825 and 4x1 at 393.

``par`` is sparse parity (Barak et al. 2022, "Hidden progress in deep learning"): the
answer is the parity of ``support`` fixed bits among ``length``; its hardness is n ** k,
the statistical-query cost of finding the k relevant bits, and SGD finds them after a
plateau. Full parity (``support`` = ``length``, the default when ``support`` is not given)
is not learned by the nano model at 8 to 24 bits in 1,500 or 3,000 steps (flipping any one
bit flips the answer, so nothing short of the whole rule beats chance). ``cmp`` draws the second number sharing a random-length prefix with the
first half of the time (otherwise the first digit decides almost every case).

Held-out split (``TaskData``): each input is held out or not by a seeded hash of the
input itself against ``heldout_frac``, so both sides follow the task's distribution.
Training batches are drawn per step from a generator seeded with ``(seed, step)`` and
any row whose input is held out is redrawn, so train and held-out inputs never overlap
and the batch of step t is the same whether or not training was interrupted.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

DIGITS = [str(d) for d in range(10)]
SPECIAL = ["=", "+", "*", ",", "<", ">", "EQ"]
TASK_TOKENS = ["COPY", "REV", "CMP", "PAR", "ADD", "MOD", "SORT", "MUL"]
PAD = ["PAD", "BOS", "EOS", "UNK", "RSV1", "RSV2", "RSV3"]
VOCAB: list[str] = DIGITS + SPECIAL + TASK_TOKENS + PAD  # 32 tokens
assert len(VOCAB) == 32
TOK = {t: i for i, t in enumerate(VOCAB)}
SEP = TOK["="]

TASKS = ["copy", "rev", "cmp", "par", "add", "mod", "sort", "mul"]
LEVELS = ["L1", "L2", "L3"]

# Default level parameters (config.yaml repeats them; config wins).
DEFAULT_LEVELS: dict[str, dict[str, dict]] = {
    "copy": {"L1": {"length": 4}, "L2": {"length": 8}, "L3": {"length": 16}},
    "rev": {"L1": {"length": 4}, "L2": {"length": 8}, "L3": {"length": 12}},
    "cmp": {"L1": {"digits": 2}, "L2": {"digits": 4}, "L3": {"digits": 8}},
    "par": {"L1": {"length": 7, "support": 1}, "L2": {"length": 7, "support": 2},
            "L3": {"length": 7, "support": 3}},
    "add": {"L1": {"digits": 2}, "L2": {"digits": 3}, "L3": {"digits": 4}},
    "mod": {"L1": {"modulus": 37}, "L2": {"modulus": 61}, "L3": {"modulus": 97}},
    "sort": {"L1": {"length": 4}, "L2": {"length": 6}, "L3": {"length": 10}},
    "mul": {"L1": {"digits": [2, 1]}, "L2": {"digits": [3, 1]}, "L3": {"digits": [4, 1]}},
}
# The one parameter that grades each task's difficulty (validated L1 < L2 < L3).
LEVEL_PARAM = {"copy": "length", "rev": "length", "cmp": "digits", "par": "length",
               "add": "digits", "mod": "modulus", "sort": "length", "mul": "digits"}
# Optional second parameters (task -> {name: meaning}); par's support defaults to its length.
OPTIONAL_PARAMS = {"par": {"support": "bits that decide the answer (default: all; fewer = sparse parity)"}}


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


def level_hardness(task: str, params: dict) -> int:
    """Scalar hardness of a level used to check L1 < L2 < L3: the input space size's log, or
    for parity n ** k, the statistical-query cost of finding k relevant bits among n."""
    v = params[LEVEL_PARAM[task]]
    if task == "par":
        return int(v) ** int(params.get("support", v))
    return int(sum(v)) if isinstance(v, (list, tuple)) else int(v)


def _digits(x: np.ndarray, width: int) -> np.ndarray:
    """Integers (N,) -> digit tokens (N, width), most significant first."""
    x = np.asarray(x, dtype=np.int64)
    pows = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return (x[:, None] // pows[None, :]) % 10


def _from_digits(d: np.ndarray) -> np.ndarray:
    """Digit tokens (N, width) -> integers (N,)."""
    w = d.shape[1]
    pows = 10 ** np.arange(w - 1, -1, -1, dtype=np.int64)
    return (d.astype(np.int64) * pows[None, :]).sum(1)


@dataclass(frozen=True)
class TaskSpec:
    """One task at one level: how to draw inputs and compute answers.

    ``inputs`` are the digits/bits that vary between examples (N, n_in), as
    plain ints 0..9; ``encode`` turns them into full token sequences.
    """

    task: str
    level: str
    params: dict
    n_in: int                 # number of varying input symbols
    n_answer: int             # answer length in tokens
    space_log10: float        # log10 of the number of distinct inputs
    draw: Callable[[np.random.Generator, int], np.ndarray]   # -> (N, n_in) int64
    layout: Callable[[np.ndarray], np.ndarray]               # inputs -> prompt tokens (N, P) ending in '='
    answer: Callable[[np.ndarray], np.ndarray]               # inputs -> answer tokens (N, n_answer)

    @property
    def run_prefix(self) -> str:
        return f"{self.task}_{self.level}"

    def encode(self, inputs: np.ndarray) -> np.ndarray:
        """Inputs (N, n_in) -> full sequences (N, S) = prompt + answer."""
        return np.concatenate([self.layout(inputs), self.answer(inputs)], axis=1)

    @property
    def seq_len(self) -> int:
        return self.layout(np.zeros((1, self.n_in), dtype=np.int64)).shape[1] + self.n_answer

    @property
    def first_answer_pred_pos(self) -> int:
        """Index (in the model input x = seq[:-1]) of the position predicting answer token 0."""
        return self.seq_len - self.n_answer - 1

    def answer_pred_positions(self) -> np.ndarray:
        """Indices in x = seq[:-1] whose next-token prediction is an answer token."""
        a0 = self.first_answer_pred_pos
        return np.arange(a0, a0 + self.n_answer)

    def keys(self, inputs: np.ndarray) -> np.ndarray:
        """A unique int key per input row (the input symbols read as a base-2 or base-10 number)."""
        base = 2 if self.task == "par" else 10
        if self.n_in * np.log2(base) > 62:
            raise ValueError(f"{self.task} {self.level}: {self.n_in} input symbols exceed the int64 key")
        pows = base ** np.arange(self.n_in - 1, -1, -1, dtype=np.int64)
        return (np.asarray(inputs, dtype=np.int64) * pows[None, :]).sum(1)


def _concat(*parts):
    return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts], axis=1)


def _const(n: int, tok: str) -> np.ndarray:
    return np.full((n, 1), TOK[tok], dtype=np.int64)


def make_task(task: str, level: str, params: dict | None = None) -> TaskSpec:
    """Build the TaskSpec for ``task`` at ``level`` with level ``params`` (defaults if None)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; allowed: {TASKS}")
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; allowed: {LEVELS}")
    p = dict(DEFAULT_LEVELS[task][level] if params is None else params)
    T = task.upper()

    if task in ("copy", "rev", "sort", "par"):
        n = int(p["length"])
        hi = 2 if task == "par" else 10
        draw = lambda rng, N: rng.integers(0, hi, size=(N, n))
        layout = lambda x: _concat(_const(len(x), T), x, _const(len(x), "="))
        if task == "copy":
            ans = lambda x: np.asarray(x, dtype=np.int64).copy()
            na = n
        elif task == "rev":
            ans = lambda x: np.asarray(x, dtype=np.int64)[:, ::-1].copy()
            na = n
        elif task == "sort":
            ans = lambda x: np.sort(np.asarray(x, dtype=np.int64), axis=1)
            na = n
        else:
            bits = parity_support(n, p.get("support"))
            ans = lambda x: (np.asarray(x, dtype=np.int64)[:, bits].sum(1, keepdims=True) % 2)
            na = 1
        return TaskSpec(task, level, p, n, na, n * np.log10(hi), draw, layout, ans)

    if task == "cmp":
        n = int(p["digits"])

        def draw(rng, N):
            a = rng.integers(0, 10, size=(N, n))
            b = rng.integers(0, 10, size=(N, n))
            share = rng.random(N) < 0.5
            k = rng.integers(0, n + 1, size=N)          # shared prefix length
            mask = share[:, None] & (np.arange(n)[None, :] < k[:, None])
            b = np.where(mask, a, b)
            return np.concatenate([a, b], axis=1)

        layout = lambda x: _concat(_const(len(x), T), x[:, :n], _const(len(x), ","), x[:, n:], _const(len(x), "="))

        def ans(x):
            a, b = _from_digits(x[:, :n]), _from_digits(x[:, n:])
            out = np.where(a < b, TOK["<"], np.where(a > b, TOK[">"], TOK["EQ"]))
            return out[:, None].astype(np.int64)

        return TaskSpec(task, level, p, 2 * n, 1, 2 * n, draw, layout, ans)

    if task == "add":
        n = int(p["digits"])
        draw = lambda rng, N: rng.integers(0, 10, size=(N, 2 * n))
        layout = lambda x: _concat(_const(len(x), T), x[:, :n][:, ::-1], _const(len(x), "+"), x[:, n:][:, ::-1],
                                   _const(len(x), "="))
        ans = lambda x: _digits(_from_digits(x[:, :n]) + _from_digits(x[:, n:]), n + 1)[:, ::-1].copy()
        return TaskSpec(task, level, p, 2 * n, n + 1, 2 * n, draw, layout, ans)

    if task == "mod":
        m = int(p["modulus"])
        w = len(str(m - 1))

        def draw(rng, N):
            ab = rng.integers(0, m, size=(N, 2))
            return np.concatenate([_digits(ab[:, 0], w), _digits(ab[:, 1], w)], axis=1)

        layout = lambda x: _concat(_const(len(x), T), x[:, :w], _const(len(x), "+"), x[:, w:], _const(len(x), "="))
        ans = lambda x: _digits((_from_digits(x[:, :w]) + _from_digits(x[:, w:])) % m, w)
        return TaskSpec(task, level, p, 2 * w, w, 2 * np.log10(m), draw, layout, ans)

    if task == "mul":
        da, db = (int(v) for v in p["digits"])
        draw = lambda rng, N: rng.integers(0, 10, size=(N, da + db))
        layout = lambda x: _concat(_const(len(x), T), x[:, :da][:, ::-1], _const(len(x), "*"), x[:, da:][:, ::-1],
                                   _const(len(x), "="))
        ans = lambda x: _digits(_from_digits(x[:, :da]) * _from_digits(x[:, da:]), da + db)[:, ::-1].copy()
        return TaskSpec(task, level, p, da + db, da + db, da + db, draw, layout, ans)

    raise AssertionError(task)


def stable_seed(*parts) -> int:
    """Stable 64-bit seed from mixed parts (strings hashed, not Python's salted hash)."""
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


# Bound on the draw loops below: none can spin forever on a config whose held-out share
# leaves (nearly) nothing to draw. geoanatomy.config rejects such configs first.
MAX_DRAW_ROUNDS = 1000
# Tasks whose two operands have the same width: with ``symmetric`` held-out membership is
# decided for the unordered pair, so (b, a) of a held-out (a, b) is held out too.
PAIR_TASKS = ("add", "mod", "cmp", "mul")
CONTROLS = ("", "shuffled")
SHUFFLE_POOL = 1 << 16


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


class TaskData:
    """Held-out split, training batches, evaluation set and samples for one task spec and seed.

    Held-out membership is decided per input: input x is held out when
    ``hash_uniform(key(x), seed, task, level) < heldout_frac`` (with ``symmetric`` the key
    of the unordered operand pair of add, mod, cmp and mul with equal widths), so the held-out
    inputs are a fixed random ``heldout_frac`` share of the input space, independent of how
    often the generator draws them: training inputs and held-out inputs follow the same
    distribution. Training batches, the held-out pool and every sample are draws of the task's
    generator restricted to one side (redrawn rows, at most ``MAX_DRAW_ROUNDS`` rounds).

    ``n_heldout``: size of the fixed held-out pool (independent draws, so an input can occur
    twice, as in the training stream); the evaluation set is its first ``n`` rows.

    ``control="shuffled"``: the shuffled-label control. The answer of input x is the true
    answer of another input g(x), a fixed pseudo-random pick (by the hash of x) from a pool of
    65,536 generator draws: every input keeps one answer and the answers keep their
    distribution, but no rule links them to the input, so nothing can be acquired that
    carries over to held-out inputs.
    """

    def __init__(self, spec: TaskSpec, seed: int, n_heldout: int = 1024, heldout_frac: float = 0.25,
                 symmetric: bool = True, control: str = ""):
        if control not in CONTROLS:
            raise ValueError(f"unknown control {control!r}; allowed: {list(CONTROLS)}")
        self.spec = spec
        self.seed = seed
        self.heldout_frac = float(heldout_frac)
        self.symmetric = bool(symmetric) and self._pair_width() is not None
        self.control = control
        self.n_heldout = int(n_heldout)
        if control:
            rng = np.random.default_rng(stable_seed(seed, spec.task, spec.level, "shuffle_pool"))
            self._shuffle_pool = spec.answer(spec.draw(rng, SHUFFLE_POOL))            # (M, n_answer)
        rng = np.random.default_rng(stable_seed(seed, spec.task, spec.level, "heldout"))
        self.heldout_inputs = self._restricted(rng, spec.draw(rng, self.n_heldout), heldout=True,
                                               what="held-out pool")               # (H, n_in)
        self.heldout = self.encode(self.heldout_inputs)                             # (H, S)

    # ------------------------------------------------------------------ split
    def _pair_width(self) -> int | None:
        t, p = self.spec.task, self.spec.params
        if t not in PAIR_TASKS:
            return None
        if t == "mul":
            da, db = (int(v) for v in p["digits"])
            return da if da == db else None
        return self.spec.n_in // 2

    def split_keys(self, inputs: np.ndarray) -> np.ndarray:
        """The key held-out membership is decided on (N,): the input's own key, or with
        ``symmetric`` the smaller of the keys of (a, b) and (b, a)."""
        k = self.spec.keys(inputs)
        if not self.symmetric:
            return k
        w = self._pair_width()
        swapped = np.concatenate([inputs[:, w:], inputs[:, :w]], axis=1)
        return np.minimum(k, self.spec.keys(swapped))

    def is_heldout(self, inputs: np.ndarray) -> np.ndarray:
        """Boolean (N,): which inputs (N, n_in) are held out."""
        spec = self.spec
        return hash_uniform(self.split_keys(inputs), self.seed, spec.task, spec.level, "split") < self.heldout_frac

    def _restricted(self, rng, x: np.ndarray, heldout: bool, what: str) -> np.ndarray:
        """Redraw the rows of x (N, n_in) that fall on the wrong side of the split."""
        bad = self.is_heldout(x) != heldout
        rounds = 0
        while bad.any():
            if rounds == MAX_DRAW_ROUNDS:
                raise RuntimeError(f"{self.spec.task} {self.spec.level} {what}: {int(bad.sum())} of {len(x)} "
                                   f"draws still on the wrong side of the held-out split after {MAX_DRAW_ROUNDS} "
                                   f"rounds (data.heldout_frac = {self.heldout_frac} leaves too few inputs)")
            rounds += 1
            x[bad] = self.spec.draw(rng, int(bad.sum()))
            bad = self.is_heldout(x) != heldout
        return x

    def filter_training(self, rng, x: np.ndarray) -> np.ndarray:
        """Inputs x (N, n_in) with every held-out row redrawn from ``rng`` (training side)."""
        return self._restricted(rng, x, heldout=False, what="training draw")

    # ---------------------------------------------------------------- answers
    def answer(self, inputs: np.ndarray) -> np.ndarray:
        """Answer tokens (N, n_answer) of inputs (N, n_in): the task's, or the control's."""
        if not self.control:
            return self.spec.answer(inputs)
        u = hash_uniform(self.spec.keys(inputs), self.seed, self.spec.task, self.spec.level, "shuffle")
        return self._shuffle_pool[(u * SHUFFLE_POOL).astype(np.int64)]

    def encode(self, inputs: np.ndarray) -> np.ndarray:
        """Inputs (N, n_in) -> full sequences (N, S) = prompt + answer (the control's answer)."""
        return np.concatenate([self.spec.layout(inputs), self.answer(inputs)], axis=1)

    # ------------------------------------------------------------------ draws
    def train_inputs(self, step: int, batch_size: int) -> np.ndarray:
        """Training inputs for ``step`` (B, n_in): depends only on (seed, step), never held out."""
        rng = np.random.default_rng(stable_seed(self.seed, self.spec.task, self.spec.level, "train", step))
        return self._restricted(rng, self.spec.draw(rng, batch_size), heldout=False, what=f"step {step}")

    def train_batch(self, step: int, batch_size: int) -> np.ndarray:
        """Token sequences (B, S) for training step ``step``."""
        return self.encode(self.train_inputs(step, batch_size))

    def training_sample(self, n: int, *tag) -> np.ndarray:
        """A fixed seeded sample (n, S) of training-distribution sequences, one per ``tag``."""
        rng = np.random.default_rng(stable_seed(self.seed, self.spec.task, self.spec.level, "sample", *tag))
        return self.encode(self.filter_training(rng, self.spec.draw(rng, n)))

    def heldout_sample(self, n: int, *tag) -> np.ndarray:
        """A fixed seeded sample (n, S) of held-out sequences, one per ``tag`` (not the pool)."""
        rng = np.random.default_rng(stable_seed(self.seed, self.spec.task, self.spec.level, "heldout_sample", *tag))
        return self.encode(self._restricted(rng, self.spec.draw(rng, n), heldout=True, what="held-out sample"))

    def eval_set(self, n: int) -> np.ndarray:
        """The fixed evaluation sequences (n, S): the first n rows of the held-out pool."""
        if n > self.n_heldout:
            raise ValueError(f"{self.spec.run_prefix}: eval n_samples={n} exceeds the held-out pool ({self.n_heldout})")
        return self.heldout[:n]
