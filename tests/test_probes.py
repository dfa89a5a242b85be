"""Linear probes recover a planted linear label, sit at chance on shuffled labels; split and rows."""
import json

import numpy as np
import pytest
import torch

from geoanatomy.model import GPT, ModelConfig
from geoanatomy.stages.probes import majority_chance, probe_accuracy, probe_checkpoint, split_indices


def _planted(n=600, d=8, k=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = rng.normal(size=(d, k))
    return X, np.argmax(X @ W, axis=1)                                   # a linear (argmax) label


def test_planted_linear_label_is_recovered():
    X, y = _planted()
    tr, te = split_indices(len(y), 0.5, seed=1)
    r = probe_accuracy(X, y, tr, te, C=1.0, max_iter=200)
    assert r["accuracy"] > 0.85                                         # 0.95 with this seed
    assert r["chance"] < 0.45 and r["accuracy_norm"] > 0.75
    assert r["n_train"] == 300 and r["n_test"] == 300 and r["n_classes"] == 4


def test_shuffled_labels_sit_at_chance():
    X, y = _planted()
    ys = np.random.default_rng(5).permutation(y)                         # breaks the X -> y relation
    tr, te = split_indices(len(y), 0.5, seed=1)
    r = probe_accuracy(X, ys, tr, te, C=0.1)
    # binomial s.e. with 300 test examples and p ~ 0.3 is ~0.026: allow ~5 s.e. around chance
    assert abs(r["accuracy"] - r["chance"]) < 0.13
    assert r["accuracy_norm"] < 0.1


def test_split_is_seeded_disjoint_and_complete():
    a = split_indices(100, 0.3, seed=4)
    b = split_indices(100, 0.3, seed=4)
    assert all(np.array_equal(x, z) for x, z in zip(a, b))
    tr, te = a
    assert len(te) == 30 and len(tr) == 70 and not set(tr) & set(te)
    assert sorted(np.concatenate([tr, te]).tolist()) == list(range(100))
    assert not np.array_equal(split_indices(100, 0.3, seed=5)[1], te)
    with pytest.raises(ValueError, match="test_frac"):
        split_indices(10, 1.0, 0)
    assert majority_chance(np.array([1, 1, 2, 3])) == 0.5


def test_single_class_training_split_predicts_it():
    X = np.random.default_rng(0).normal(size=(10, 3))
    y = np.array([7] * 10)
    r = probe_accuracy(X, y, np.arange(5), np.arange(5, 10))
    assert r["accuracy"] == 1.0 and r["chance"] == 1.0 and np.isnan(r["accuracy_norm"])


def test_probe_checkpoint_rows_every_layer():
    torch.manual_seed(0)
    m = GPT(ModelConfig(n_layer=2, d_model=16, n_head=2, vocab_size=12, block_size=10))
    g = torch.Generator().manual_seed(0)
    # sequences "a b c = a b": the answer copies the inputs (available at every position)
    x = torch.randint(0, 10, (120, 3), generator=g)
    seq = torch.cat([x, torch.full((120, 1), 10), x[:, :2]], 1)         # (120, 6); '=' at index 3
    tr, te = split_indices(120, 0.5, 0)
    rows = probe_checkpoint(m, seq, first_pred_pos=3, n_answer=2, train_idx=tr, test_idx=te, positions="all",
                            settings={"note": "test"})
    layers = m.layer_names()
    positions = {"first", "answer_1", "answer_mean"}
    assert {(r["layer"], r["position"], r["measure"]) for r in rows} == {
        (L, p, meas) for L in layers for p in positions
        for meas in ("probe_accuracy", "probe_chance", "probe_accuracy_norm")}
    by = {(r["layer"], r["position"], r["measure"]): r for r in rows}
    # embed at the '=' position is the same vector for every example: at most chance level
    e = by[("embed", "first", "probe_accuracy")]
    assert e["settings"]["constant_by_construction"] is True
    assert e["value"] <= by[("embed", "first", "probe_chance")]["value"] + 1e-12
    # answer_mean is the mean of the per-position values
    for L in layers:
        vals = [by[(L, p, "probe_accuracy")]["value"] for p in ("first", "answer_1")]
        assert by[(L, "answer_mean", "probe_accuracy")]["value"] == pytest.approx(np.mean(vals))
    assert all(r["n_samples"] == 60 for r in rows)
    json.dumps([r["settings"] for r in rows])                            # settings are JSON-serialisable
