"""Held-out split, training batches, evaluation set and samples of one task level (``TaskData``)."""
from __future__ import annotations

import numpy as np

from .base import TaskSpec
from .hashing import hash_uniform, stable_seed

# Bound on the draw loops below: none can spin forever on a config whose held-out share
# leaves (nearly) nothing to draw. geoanatomy.config rejects such configs first.
MAX_DRAW_ROUNDS = 1000
CONTROLS = ("", "shuffled")
SHUFFLE_POOL = 1 << 16


def split_keys(spec: TaskSpec, inputs: np.ndarray, symmetric: bool = False) -> np.ndarray:
    """The key held-out membership is decided on (N,): the input's own key, or with
    ``symmetric`` the smaller of the keys of (a, b) and (b, a)."""
    k = spec.keys(inputs)
    if not symmetric:
        return k
    w = spec.pair_width
    swapped = np.concatenate([inputs[:, w:], inputs[:, :w]], axis=1)
    return np.minimum(k, spec.keys(swapped))


def is_heldout(spec: TaskSpec, seed: int, heldout_frac: float, inputs: np.ndarray,
               symmetric: bool = False) -> np.ndarray:
    """Boolean (N,): which inputs (N, n_in) of ``spec`` are held out at ``seed`` (the split of
    ``TaskData``, without drawing its pool)."""
    return hash_uniform(split_keys(spec, inputs, symmetric), seed, spec.task, spec.level, "split") < heldout_frac


class TaskData:
    """Held-out split, training batches, evaluation set and samples for one task spec and seed.

    Held-out membership is decided per input: input x is held out when
    ``hash_uniform(key(x), seed, task, level) < heldout_frac`` (with ``symmetric`` the key
    of the unordered operand pair of a task whose input is two operands of one width,
    ``TaskSpec.pair_width``: add, mod, cmp, and mul with equal widths), so the held-out
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
        # a task with its own split (grok: 1 - train_frac) replaces the config's share
        self.heldout_frac = float(heldout_frac if spec.heldout_frac is None else spec.heldout_frac)
        self.symmetric = bool(symmetric) and spec.pair_width is not None
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
    def split_keys(self, inputs: np.ndarray) -> np.ndarray:
        """The key held-out membership is decided on (``split_keys``)."""
        return split_keys(self.spec, inputs, self.symmetric)

    def is_heldout(self, inputs: np.ndarray) -> np.ndarray:
        """Boolean (N,): which inputs (N, n_in) are held out (``is_heldout``)."""
        return is_heldout(self.spec, self.seed, self.heldout_frac, inputs, self.symmetric)

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
