"""One conformance battery over every registered task (``tasks.REGISTRY``), the way the measure
and signal registries have theirs: a task added to the registry runs through these checks
unasked, and nothing here lists tasks by name. Its answers against an independent computation
and its recorded cases are tests/test_tasks.py's (parametrized over the registry too: a new
task's answer rule goes into its ``expected_answer``)."""
import numpy as np
import pytest

from geoanatomy.tasks import LEVELS, REGISTRY, TOK, VOCAB, TaskData, make_task
from geoanatomy.tasks import tokens

CELLS = [(name, lv) for name in REGISTRY for lv in LEVELS]
# the ids of every token that is not a task's, as the study's data were recorded with them
FIXED_IDS = {**{str(d): d for d in range(10)}, "=": 10, "+": 11, "*": 12, ",": 13, "<": 14, ">": 15, "EQ": 16,
             "PAD": 25, "BOS": 26, "EOS": 27, "UNK": 28}


@pytest.mark.parametrize("name,level", CELLS)
def test_data_are_deterministic_per_seed(name, level):
    spec = make_task(name, level)
    a, b, c = (TaskData(spec, seed=s, n_heldout=32) for s in (5, 5, 6))
    assert np.array_equal(a.heldout, b.heldout) and np.array_equal(a.train_batch(3, 16), b.train_batch(3, 16))
    assert not np.array_equal(a.train_batch(3, 16), a.train_batch(4, 16))      # each step its own batch
    assert not (np.array_equal(a.heldout, c.heldout) and np.array_equal(a.train_batch(3, 16), c.train_batch(3, 16)))


@pytest.mark.parametrize("name,level", CELLS)
def test_the_held_out_split_is_disjoint_from_training(name, level):
    spec = make_task(name, level)
    d = TaskData(spec, seed=0, n_heldout=64)
    n = spec.seq_len - spec.n_answer
    held = {tuple(r[:n]) for r in d.heldout}
    seen = {tuple(r[:n]) for s in range(20) for r in d.train_batch(s, 64)}
    assert held and seen and not held & seen


@pytest.mark.parametrize("name,level", CELLS)
def test_sequences_use_the_vocabulary_and_the_task_token(name, level):
    spec = make_task(name, level)
    seq = TaskData(spec, seed=0, n_heldout=16).train_batch(0, 16)
    assert seq.min() >= 0 and seq.max() < len(VOCAB)
    assert (seq[:, 0] == TOK[REGISTRY[name].token]).all()
    assert (seq[:, -spec.n_answer - 1] == TOK["="]).all()


def test_special_ids_are_stable_and_a_new_task_takes_a_reserved_slot(monkeypatch):
    """Registering a task beyond the vocabulary's own takes the next reserved slot: every other
    token keeps its id (the recorded sequences of the other tasks stay); when the slots run out
    the next one is refused by name."""
    assert {t: TOK[t] for t in FIXED_IDS} == FIXED_IDS
    assert len(VOCAB) == 32 and len(set(VOCAB)) == 32
    monkeypatch.setattr(tokens, "VOCAB", list(tokens.VOCAB))
    monkeypatch.setattr(tokens, "TOK", dict(tokens.TOK))
    monkeypatch.setattr(tokens, "TASK_TOKENS", list(tokens.TASK_TOKENS))
    before = dict(tokens.TOK)
    free = [t for t in tokens.VOCAB if t in tokens.RESERVED]
    ids = [tokens.add_task_token(f"NEW{i}") for i in range(len(free))]
    assert ids == [before[t] for t in free]
    assert tokens.add_task_token("NEW0") == ids[0]                          # the same token, the same id
    assert {t: i for t, i in tokens.TOK.items() if not t.startswith("NEW")} == \
        {t: i for t, i in before.items() if t not in tokens.RESERVED}
    with pytest.raises(ValueError, match="task token 'ONE_TOO_MANY': the vocabulary's 3 reserved slots are taken"):
        tokens.add_task_token("ONE_TOO_MANY")
