"""Algorithmic tasks: seeded generators, token format, held-out split, answer masks.

Token format (shared vocabulary of 32 ids, see ``VOCAB``)::

    [TASK] input tokens ... = answer tokens ...

Every example of one task and level has the same length, so batches need no
padding and the answer occupies fixed positions. ``=`` (``SEP``) always sits
right before the answer: its position is the one that *predicts the first
answer token* (``first_answer_pred_pos``).

Tasks and what a level changes (values live in ``config.yaml`` under
``tasks:``; each task's defaults, its ``Task.levels``, are the same numbers):

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
bit flips the answer, so nothing short of the whole rule beats chance). ``cmp`` draws the second number sharing a
random-length prefix with the
first half of the time (otherwise the first digit decides almost every case).

Held-out split (``TaskData``): each input is held out or not by a seeded hash of the
input itself against ``heldout_frac``, so both sides follow the task's distribution.
Training batches are drawn per step from a generator seeded with ``(seed, step)`` and
any row whose input is held out is redrawn, so train and held-out inputs never overlap
and the batch of step t is the same whether or not training was interrupted.

Modules: ``tokens`` (the vocabulary), ``base`` (``Task``: what one task is; ``TaskSpec``:
one task level), ``catalogue`` (the eight tasks, one class each), ``registry`` (name ->
task object, ``make_task``), ``data`` (``TaskData``), ``hashing`` (stable seeds). Adding a
task: docs/where-things-go.md (one class in ``catalogue``, its entry in ``registry.REGISTRY``;
its token takes a reserved slot of the vocabulary by itself).
"""
from .base import LevelParamError, Task, TaskSpec
from .catalogue import parity_support
from .data import CONTROLS, MAX_DRAW_ROUNDS, SHUFFLE_POOL, TaskData
from .hashing import hash_uniform, stable_seed
from .registry import DEFAULT_LEVELS, LEVELS, REGISTRY, TASKS, get_task, level_hardness, make_task
from .tokens import (  # noqa: F401 (_digits: tests)
    DIGITS, PAD, SEP, SPECIAL, TASK_TOKENS, TOK, VOCAB, VOCAB_SIZE, _digits)

__all__ = ["CONTROLS", "DEFAULT_LEVELS", "DIGITS", "LEVELS", "LevelParamError", "MAX_DRAW_ROUNDS", "PAD",
           "REGISTRY", "SEP", "SHUFFLE_POOL", "SPECIAL", "TASKS", "TASK_TOKENS", "TOK", "Task", "TaskData",
           "TaskSpec", "VOCAB", "get_task", "hash_uniform", "level_hardness", "make_task", "parity_support",
           "stable_seed"]
