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
par   ``PAR 1 0 1 1 0 1 0 0 1 1 = 0``        ``length`` (bits); answer = sum mod 2
add   ``ADD 4 2 + 1 9 = 0 6 1``              ``digits`` per operand; answer n+1 digits
mod   ``MOD 3 0 + 0 9 = 0 2`` (p = 37)       ``modulus`` p; a, b < p; answer (a+b) mod p
sort  ``SORT 3 1 4 1 = 1 1 3 4``             ``length`` (digits)
mul   ``MUL 4 7 * 8 = 3 7 6``                ``digits`` of each operand ``[da, db]``
====  =====================================  ===========================

Numbers are written most-significant digit first and zero-padded to a fixed
width. ``cmp`` draws the second number sharing a random-length prefix with the
first half of the time (otherwise the first digit decides almost every case).

Held-out split: the held-out inputs are the first ``n_heldout`` distinct
inputs of a generator seeded with ``(seed, task, level, "heldout")``, capped at
``heldout_frac`` of the input space. Training batches are drawn per step from
a generator seeded with ``(seed, step)`` and any row whose input is held out is
redrawn, so train and held-out inputs never overlap and the batch of step t is
the same whether or not training was interrupted.
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
    "par": {"L1": {"length": 10}, "L2": {"length": 16}, "L3": {"length": 24}},
    "add": {"L1": {"digits": 2}, "L2": {"digits": 3}, "L3": {"digits": 5}},
    "mod": {"L1": {"modulus": 37}, "L2": {"modulus": 61}, "L3": {"modulus": 97}},
    "sort": {"L1": {"length": 4}, "L2": {"length": 6}, "L3": {"length": 10}},
    "mul": {"L1": {"digits": [2, 1]}, "L2": {"digits": [2, 2]}, "L3": {"digits": [3, 2]}},
}
# The one parameter that grades each task's difficulty (validated L1 < L2 < L3).
LEVEL_PARAM = {"copy": "length", "rev": "length", "cmp": "digits", "par": "length",
               "add": "digits", "mod": "modulus", "sort": "length", "mul": "digits"}


def level_hardness(task: str, params: dict) -> int:
    """Scalar hardness of a level used to check L1 < L2 < L3 (the input space size's log)."""
    v = params[LEVEL_PARAM[task]]
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
            ans = lambda x: (np.asarray(x, dtype=np.int64).sum(1, keepdims=True) % 2)
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
        layout = lambda x: _concat(_const(len(x), T), x[:, :n], _const(len(x), "+"), x[:, n:], _const(len(x), "="))
        ans = lambda x: _digits(_from_digits(x[:, :n]) + _from_digits(x[:, n:]), n + 1)
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
        layout = lambda x: _concat(_const(len(x), T), x[:, :da], _const(len(x), "*"), x[:, da:], _const(len(x), "="))
        ans = lambda x: _digits(_from_digits(x[:, :da]) * _from_digits(x[:, da:]), da + db)
        return TaskSpec(task, level, p, da + db, da + db, da + db, draw, layout, ans)

    raise AssertionError(task)


def stable_seed(*parts) -> int:
    """Stable 64-bit seed from mixed parts (strings hashed, not Python's salted hash)."""
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


# Bound on the draw loops below: neither can spin forever on a config whose held-out set
# covers (nearly) the whole input space. geoanatomy.config rejects such configs first (at
# most half of an input space may be held out), so valid configs never get near it.
MAX_DRAW_ROUNDS = 1000


class TaskData:
    """Held-out set and per-step training batches for one task spec and seed."""

    def __init__(self, spec: TaskSpec, seed: int, n_heldout: int = 1024, heldout_frac: float = 0.25):
        self.spec = spec
        self.seed = seed
        space = 10 ** spec.space_log10
        cap = max(1, int(np.floor(heldout_frac * space + 1e-9)))
        self.n_heldout = int(min(n_heldout, cap))
        rng = np.random.default_rng(stable_seed(seed, spec.task, spec.level, "heldout"))
        keys_seen: dict[int, None] = {}
        rows = []
        rounds = 0
        while len(rows) < self.n_heldout:
            if rounds == MAX_DRAW_ROUNDS:
                raise RuntimeError(f"{spec.task} {spec.level}: only {len(rows)} of {self.n_heldout} distinct "
                                   f"held-out inputs after {MAX_DRAW_ROUNDS} draw rounds; lower data.n_heldout "
                                   f"or data.heldout_frac")
            rounds += 1
            x = spec.draw(rng, 4 * self.n_heldout)
            for row, k in zip(x, spec.keys(x)):
                if int(k) not in keys_seen:
                    keys_seen[int(k)] = None
                    rows.append(row)
                    if len(rows) == self.n_heldout:
                        break
        self.heldout_inputs = np.stack(rows).astype(np.int64)           # (H, n_in)
        self.heldout_keys = np.sort(spec.keys(self.heldout_inputs))     # (H,)
        self.heldout = spec.encode(self.heldout_inputs)                 # (H, S)

    def is_heldout(self, inputs: np.ndarray) -> np.ndarray:
        k = self.spec.keys(inputs)
        idx = np.clip(np.searchsorted(self.heldout_keys, k), 0, len(self.heldout_keys) - 1)
        return self.heldout_keys[idx] == k

    def train_inputs(self, step: int, batch_size: int) -> np.ndarray:
        """Training inputs for ``step`` (B, n_in): depends only on (seed, step), never held out."""
        rng = np.random.default_rng(stable_seed(self.seed, self.spec.task, self.spec.level, "train", step))
        x = self.spec.draw(rng, batch_size)
        bad = self.is_heldout(x)
        rounds = 0
        while bad.any():
            if rounds == MAX_DRAW_ROUNDS:
                raise RuntimeError(f"{self.spec.task} {self.spec.level} step {step}: {int(bad.sum())} of {batch_size} "
                                   f"training inputs still held out after {MAX_DRAW_ROUNDS} redraw rounds; the "
                                   f"held-out set covers too much of the input space (lower data.heldout_frac "
                                   f"or data.n_heldout)")
            rounds += 1
            x[bad] = self.spec.draw(rng, int(bad.sum()))
            bad = self.is_heldout(x)
        return x

    def train_batch(self, step: int, batch_size: int) -> np.ndarray:
        """Token sequences (B, S) for training step ``step``."""
        return self.spec.encode(self.train_inputs(step, batch_size))

    def eval_set(self, n: int) -> np.ndarray:
        """The fixed evaluation sequences (n, S): the first n held-out examples."""
        if n > self.n_heldout:
            raise ValueError(f"{self.spec.run_prefix}: eval n_samples={n} exceeds the held-out set ({self.n_heldout})")
        return self.heldout[:n]


def marginal_logprob(answers: np.ndarray) -> float:
    """Mean per-token log-probability (nats) of the best input-blind predictor.

    For each answer position, the empirical token distribution q over the given
    answers (N, n_answer); the predictor that knows only q scores
    sum_t q_t log q_t per token (minus the entropy), averaged over positions.
    This is the log-probability level of the early loss plateau.
    """
    out = []
    for j in range(answers.shape[1]):
        _, c = np.unique(answers[:, j], return_counts=True)
        q = c / c.sum()
        out.append(float((q * np.log(q)).sum()))
    return float(np.mean(out))
