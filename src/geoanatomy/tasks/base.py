"""What a task is (``Task``: one object per task) and what one task level gives the data
layer (``TaskSpec``)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np


WIDE_KEY_MOD = (1 << 57) - 1     # the key of an input wider than 62 bits (TaskSpec.keys)


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
    base: int = 10            # input symbols are 0 .. base - 1
    pair_width: int | None = None   # width of each of two same-width operands, else None
    # the task's own held-out share (a fixed training set: grok's 1 - train_frac), replacing
    # data.heldout_frac for its runs; None: the config's
    heldout_frac: float | None = None
    # the task allows inputs wider than the exact 62-bit key (``Task.wide_inputs``): keys() hashes them
    wide_keys: bool = False

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
        """An int key per input row: the input symbols read as a base-``base`` number (unique)
        when that fits 62 bits; for a wider input of a task that allows one (``wide_keys``: ind's
        context; any other is refused, as the config check refuses it first) a polynomial hash of the row
        modulo 2^57 - 1 (``WIDE_KEY_MOD``), where two inputs sharing a key only share their
        held-out membership and control answer (with ~10^3-10^5 draws, a chance of ~10^-8)."""
        x = np.asarray(inputs, dtype=np.int64)
        if self.n_in * np.log2(self.base) > 62:
            if not self.wide_keys:
                raise ValueError(f"{self.task} {self.level}: {self.n_in} input symbols exceed the int64 key")
            k = np.zeros(len(x), dtype=np.int64)
            for j in range(x.shape[1]):          # k < 2^57, so k * base + x < 2^63 for base <= 32
                k = (k * self.base + x[:, j]) % WIDE_KEY_MOD
            return k
        pows = self.base ** np.arange(self.n_in - 1, -1, -1, dtype=np.int64)
        return (x * pows[None, :]).sum(1)


class LevelParamError(ValueError):
    """A level's parameters do not fit the task; ``field``: the parameter at fault ("" for
    the level as a whole)."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field


class Task:
    """One algorithmic task: its graded levels, its example generator (``draw``, ``layout``,
    ``answer`` of a level's parameters ``p``) and what the config checks ask of it.

    A subclass sets the class attributes and the per-task methods; ``spec`` turns one level
    into the ``TaskSpec`` the data layer uses.
    """

    name: str = ""                       # the task token is name.upper() (tokens.TASK_TOKENS)
    level_param: str = ""                # the one parameter that grades the difficulty
    levels: dict[str, dict] = {}         # L1/L2/L3 -> default parameters (config.yaml repeats them)
    optional_params: dict[str, str] = {}  # further parameters: name -> meaning
    base: int = 10                       # input symbols are 0 .. base - 1
    unit: str = "digits"                 # what one input symbol is called

    @property
    def token(self) -> str:
        return self.name.upper()

    @property
    def hardness_by(self) -> str:
        """What ``hardness`` grows with, as a config message names it."""
        return repr(self.level_param)

    # ------------------------------------------------------------ per task
    def n_in(self, p: dict) -> int:
        """Number of varying input symbols."""
        raise NotImplementedError

    def n_answer(self, p: dict) -> int:
        """Answer length in tokens."""
        raise NotImplementedError

    def space_log10(self, p: dict) -> float:
        """log10 of the number of distinct inputs."""
        raise NotImplementedError

    def input_space(self, p: dict) -> int:
        """The exact number of distinct inputs (integer arithmetic: no float overflow)."""
        raise NotImplementedError

    def draw(self, p: dict, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` seeded inputs (n, n_in) int64."""
        raise NotImplementedError

    def layout(self, p: dict, x: np.ndarray) -> np.ndarray:
        """Inputs (N, n_in) -> prompt tokens (N, P), ending in '='."""
        raise NotImplementedError

    def answer(self, p: dict, x: np.ndarray) -> np.ndarray:
        """Inputs (N, n_in) -> answer tokens (N, n_answer)."""
        raise NotImplementedError

    # ------------------------------------------------------------ defaults
    def hardness(self, p: dict) -> int:
        """Scalar hardness of a level, used to check L1 < L2 < L3 (the level parameter, or
        the sum of a list of them)."""
        v = p[self.level_param]
        return int(sum(v)) if isinstance(v, (list, tuple)) else int(v)

    def heldout_frac(self, p: dict) -> float | None:
        """The task's own held-out share (a task whose split is part of its definition, as
        grokking's fixed training set is), or None: the config's ``data.heldout_frac``."""
        return None

    def wide_inputs(self, p: dict) -> bool:
        """Whether the inputs may exceed the 62-bit exact key (then hashed: ``TaskSpec.keys``)."""
        return False

    def check_run(self, p: dict, heldout_frac: float, block_size: int) -> None:
        """Checks that need the level's whole setting (its split share, the context); a
        LevelParamError naming the parameter at fault. Default: none."""

    def check_split(self, p: dict, seed: int, level: str) -> None:
        """For a task with its own split (``heldout_frac``): LevelParamError unless the split of
        ``seed`` at ``level`` leaves a usable training and held-out side. Default: none."""

    def induction_query(self, p: dict) -> int | None:
        """The position (in the model input) whose prefix-matching score the metrics stage
        records for every head (``measures.induction``): a task solved by in-context copying
        names it; None (the default) records none."""
        return None

    def pair_width(self, p: dict) -> int | None:
        """Width of each operand when the input is two operands of the same width (held-out
        membership can then be decided for the unordered pair), else None."""
        return None

    def check_params(self, p: dict) -> None:
        """LevelParamError unless ``p`` names exactly the level parameter (plus optional
        ones) with values of the right shape."""
        want, optional = self.level_param, self.optional_params
        extra = sorted(set(p) - {want} - set(optional))
        if want not in p or extra:
            also = f" (optional: {sorted(optional)})" if optional else ""
            raise LevelParamError(f"task {self.name!r} takes the parameter {want!r}{also}, got {sorted(p)}")
        self.check_values(p)

    def check_values(self, p: dict) -> None:
        """The level parameter is one integer (the schema has checked its type and range)."""
        want = self.level_param
        if isinstance(p[want], list):
            raise LevelParamError(f"give one integer, got {p[want]!r}", want)

    def spec(self, level: str, p: dict) -> TaskSpec:
        """The TaskSpec of this task at ``level`` with parameters ``p``."""
        return TaskSpec(self.name, level, p, self.n_in(p), self.n_answer(p), self.space_log10(p),
                        partial(self.draw, p), partial(self.layout, p), partial(self.answer, p),
                        base=self.symbol_base(p), pair_width=self.pair_width(p), heldout_frac=self.heldout_frac(p),
                        wide_keys=self.wide_inputs(p))

    def symbol_base(self, p: dict) -> int:
        """Input symbols are 0 .. symbol_base - 1 (the class's ``base``; grok's: its modulus)."""
        return self.base
