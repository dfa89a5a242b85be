"""The multi-task protocol: one model per size and seed trained on a mixture of task x level
combinations, analysed per combination (torch-free; docs/mixture.md).

A grid block with ``protocol: mixture`` (geoanatomy.config.mixtures) names the combinations
(its tasks x levels), their sampling weights (``weights``, default 1 each) and controls
(``controls``, default the block's ``control``). Names:

* the training run ``{name}_{size}[_sN]`` (name ``mixture`` unless the block gives one; it
  always starts with ``mix``): ``results/mixture_nano/checkpoints/`` and ``train.json``;
* one analysis unit per combination, ``{name}_{size}[_sN]/{task}_{level}[_shuffled]``: its
  metrics.csv, measures.csv, probes.csv and precursor.json in ``results/mixture_nano/mod_L3/``,
  made by the single-task stages from the training run's checkpoints.

Training batch of step t (``MixtureData.train_batch``): each row's combination is drawn from
the normalised weights by a generator seeded with (seed, "mixture_rows", t); the rows of one
combination are that combination's training-side inputs (its ``TaskData`` with the run's seed,
so its held-out split is the single-task run's), drawn by a generator seeded with (seed, task,
level, "mixture_train", t). Every sequence starts with its task token. Rows are right-padded
with PAD to the longest sequence of the mixture (a fixed shape) and the loss is taken at each
row's own answer positions only (``answer_mask``). Causal attention never lets a real position
see the padding to its right, so a row's logits and hidden states equal its unpadded ones. The
batch of step t depends only on the seed, the mixture and t, so a killed run resumes
bit-exactly, as a single-task run does.

Loss (``model.padded_answer_loss``): per row the mean cross-entropy over its answer tokens, then
the mean over rows. Each row counts once whatever its answer length, so a combination's share of
the loss is its share of the rows (its weight), and a mixture of one combination would give the
single-task loss exactly.

Evaluation: each unit uses its combination's own ``TaskData`` (the same held-out pool and
evaluation set as the single-task run of that task, level and seed), so every per-unit number is
computed on unpadded, task-specific batches: the first-answer position is that combination's.
"""
from __future__ import annotations

import numpy as np

from .tasks import TOK, TaskData, make_task, stable_seed

PAD_ID = TOK["PAD"]


def component_data(spec, comp: dict) -> TaskData:
    """The TaskData of one combination of a mixture spec (the single-task run's split)."""
    d = spec.data
    return TaskData(make_task(comp["task"], comp["level"], comp["level_params"]), spec.seed, d["n_heldout"],
                    d["heldout_frac"], d.get("heldout_symmetric", True), comp.get("control", ""))


def combination_names(mixture: dict) -> list[str]:
    from .spec import combination_name
    return [combination_name(c["task"], c["level"], c.get("control", "")) for c in mixture["components"]]


def shares(mixture: dict) -> np.ndarray:
    """Sampling probabilities of the combinations (K,): the weights normalised to sum to 1."""
    w = np.array([float(c["weight"]) for c in mixture["components"]], dtype=np.float64)
    if len(w) < 2 or not np.all(w > 0):
        raise ValueError(f"a mixture needs at least two combinations with positive weights, got {w.tolist()}")
    return w / w.sum()


class MixtureData:
    """Training stream of a mixture spec (RunSpec with ``mixture`` and no task): padded batches
    and their answer masks; the combinations' own TaskData for evaluation."""

    def __init__(self, spec):
        self.spec_run = spec
        self.seed = spec.seed
        self.names = combination_names(spec.mixture)
        self.probs = shares(spec.mixture)
        self.parts = [component_data(spec, c) for c in spec.mixture["components"]]
        self.seq_len = max(p.spec.seq_len for p in self.parts)
        self.n_heldout = min(p.n_heldout for p in self.parts)

    def train_rows(self, step: int, batch_size: int) -> np.ndarray:
        """The combination index of each row of step ``step``'s batch (B,)."""
        rng = np.random.default_rng(stable_seed(self.seed, "mixture_rows", step))
        return rng.choice(len(self.parts), size=batch_size, p=self.probs)

    def train_batch(self, step: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """(tokens (B, S) right-padded with PAD, answer mask (B, S - 1)) of step ``step``: mask[i, j]
        is True where position j of the model input tokens[:, :-1] predicts an answer token of row i."""
        rows = self.train_rows(step, batch_size)
        tokens = np.full((batch_size, self.seq_len), PAD_ID, dtype=np.int64)
        mask = np.zeros((batch_size, self.seq_len - 1), dtype=bool)
        for k, part in enumerate(self.parts):
            idx = np.flatnonzero(rows == k)
            if not len(idx):
                continue
            t = part.spec
            seq = part.encode(self.component_inputs(k, step, len(idx)))                   # (n_k, S_k)
            tokens[idx, :seq.shape[1]] = seq
            mask[idx, t.first_answer_pred_pos:t.first_answer_pred_pos + t.n_answer] = True
        return tokens, mask

    def component_inputs(self, k: int, step: int, n: int) -> np.ndarray:
        """The inputs (n, n_in) of combination k's rows in step ``step``'s batch: draws of its
        generator on the training side of its held-out split."""
        part = self.parts[k]
        t = part.spec
        rng = np.random.default_rng(stable_seed(self.seed, t.task, t.level, "mixture_train", step))
        return part.filter_training(rng, t.draw(rng, n))

    def eval_sets(self, n: int) -> list[np.ndarray]:
        """Each combination's fixed evaluation sequences (n, S_k), unpadded."""
        return [p.eval_set(min(n, p.n_heldout)) for p in self.parts]
