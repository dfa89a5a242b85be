"""SGLD LLC on quadratics with known answers: d/2 at a regular minimum, k/2 with flat
directions, negative off the minimum, flags, determinism, weights restored."""
import math

import numpy as np
import pytest
import torch

from geoanatomy.measures.llc import default_n_beta, estimate_llc


class Quad(torch.nn.Module):
    """L(w) = 0.5 * sum_i lam_i (w_i - c_i)^2 (data-free: minibatches do not change it)."""

    def __init__(self, lam, w0, centre=None):
        super().__init__()
        self.lam = torch.tensor(lam, dtype=torch.float64)
        self.c = torch.zeros(len(lam), dtype=torch.float64) if centre is None else torch.tensor(centre, dtype=torch.float64)
        self.w = torch.nn.Parameter(torch.tensor(w0, dtype=torch.float64))

    def loss(self, batch=None):
        return 0.5 * (self.lam * (self.w - self.c) ** 2).sum()


def loss_fn(model, batch):
    return model.loss(batch)


DATA = torch.zeros(64, 1)


def exact_discrete(lam, eps, n_beta, gamma):
    """Stationary E[n_beta (L - L0)] of the discretised chain at the minimum (w0 = c).

    Per direction x' = (1 - eps a / 2) x + sqrt(eps) xi with a = n_beta lam + gamma:
    Var x = eps / (1 - (1 - eps a / 2)^2); E[n_beta lam x^2 / 2] follows.
    """
    out = 0.0
    for li in lam:
        a = n_beta * li + gamma
        var = eps / (1 - (1 - eps * a / 2) ** 2)
        out += 0.5 * n_beta * li * var
    return out


def test_regular_minimum_gives_half_the_dimension():
    m = Quad([1.0] * 6, [0.0] * 6)
    kw = dict(eps=2e-3, gamma=0.0, n_beta=100.0, chains=4, draws=600, burnin=30, batch_size=8, seed=0)
    r = estimate_llc(m, loss_fn, DATA, **kw)
    want = exact_discrete([1.0] * 6, 2e-3, 100.0, 0.0)            # 3.16: d/2 = 3 plus the step-size bias
    assert want == pytest.approx(3.0, rel=0.06)
    assert r["value"] == pytest.approx(want, abs=0.25)
    assert r["value"] == pytest.approx(3.0, rel=0.15)               # d/2 up to step-size bias and MC error
    assert r["clean"] and r["flags"] == []
    assert r["init_loss"] == 0.0 and len(r["per_chain"]) == 4
    # the settings travel with the estimate
    for k in ("eps", "gamma", "n_beta", "chains", "draws", "burnin", "batch_size", "n_data", "seed"):
        assert k in r
    assert r["loss_trace"].shape == (4, 630)


def test_scale_with_dimension_not_temperature():
    # twice the dimension -> twice the LLC (6 vs 3); ten times n_beta (colder) -> the same
    kw = dict(chains=4, draws=600, burnin=30, batch_size=8, seed=1, gamma=0.0)
    r12 = estimate_llc(Quad([1.0] * 12, [0.0] * 12), loss_fn, DATA, eps=2e-3, n_beta=100.0, **kw)["value"]
    r12c = estimate_llc(Quad([1.0] * 12, [0.0] * 12), loss_fn, DATA, eps=2e-4, n_beta=1000.0, **kw)["value"]
    want = exact_discrete([1.0] * 12, 2e-3, 100.0, 0.0)           # same eps * n_beta: same 6.32 for both
    assert want == pytest.approx(exact_discrete([1.0] * 12, 2e-4, 1000.0, 0.0))
    assert r12 == pytest.approx(want, abs=0.45) and r12c == pytest.approx(want, abs=0.45)   # ~4 MC s.e.
    assert r12 == pytest.approx(6.0, rel=0.15) and r12c == pytest.approx(6.0, rel=0.15)


def test_flat_directions_do_not_count():
    # only 2 of 8 directions are curved; localisation gamma << n_beta*lam confines the rest
    lam = [2.0, 2.0] + [0.0] * 6
    kw = dict(eps=2e-3, gamma=1.0, n_beta=100.0, chains=4, draws=500, burnin=30, batch_size=8, seed=2)
    r = estimate_llc(Quad(lam, [0.0] * 8), loss_fn, DATA, **kw)
    assert r["value"] == pytest.approx(exact_discrete(lam, 2e-3, 100.0, 1.0), abs=0.15)
    assert r["value"] == pytest.approx(1.0, abs=0.2)               # k/2 = 1, not d/2 = 4


def test_off_minimum_is_negative_and_flagged():
    # w0 away from the minimum: the chain walks downhill, sampled losses fall below L(w0)
    m = Quad([1.0] * 4, [1.0] * 4)
    r = estimate_llc(m, loss_fn, DATA, eps=1e-3, gamma=10.0, n_beta=100.0, chains=2, draws=200, burnin=0,
                     batch_size=8, seed=3)
    assert r["init_loss"] == pytest.approx(2.0)
    assert r["value"] < -10
    assert "negative" in r["flags"] and not r["clean"]
    assert torch.equal(m.w.detach(), torch.ones(4, dtype=torch.float64))   # weights restored


def test_disagreement_and_divergence_flags():
    lam = [1.0] * 4
    r = estimate_llc(Quad(lam, [0.0] * 4), loss_fn, DATA, eps=1e-3, gamma=0.0, n_beta=100.0, chains=3,
                     draws=50, batch_size=8, seed=4, disagree_threshold=1e-9)
    assert "chains_disagree" in r["flags"]
    assert r["disagreement"] == pytest.approx(r["std"] / abs(r["value"]))
    # eps * n_beta * lam = 10 > 4: the chain diverges geometrically and becomes non-finite
    r = estimate_llc(Quad(lam, [0.0] * 4), loss_fn, DATA, eps=0.1, gamma=0.0, n_beta=100.0, chains=2,
                     draws=2000, batch_size=8, seed=4)
    assert r["flags"] == ["nonfinite"] and math.isnan(r["value"])


def test_seeded_and_minibatch_order():
    m = Quad([1.0, 2.0], [0.0, 0.0])
    kw = dict(eps=1e-3, gamma=5.0, n_beta=50.0, chains=2, draws=30, batch_size=8, seed=7)
    a, b = estimate_llc(m, loss_fn, DATA, **kw), estimate_llc(m, loss_fn, DATA, **kw)
    assert a["value"] == b["value"] and np.array_equal(a["loss_trace"], b["loss_trace"])
    c = estimate_llc(m, loss_fn, DATA, **{**kw, "seed": 8})
    assert c["value"] != a["value"]
    # a data-dependent loss sees every pool example once per epoch (drop_last permutations)
    seen = []

    def recording(model, batch):
        seen.append(batch[:, 0].clone())
        return model.loss()
    pool = torch.arange(16, dtype=torch.float64)[:, None]
    estimate_llc(m, recording, pool, eps=1e-3, gamma=0.0, n_beta=10.0, chains=1, draws=4, burnin=0,
                 batch_size=4, seed=0)
    assert len(seen) == 4 + 4                                        # 4 init-loss chunks, then 4 SGLD steps
    first_epoch = torch.cat(seen[4:8])
    assert sorted(torch.cat(seen[:4]).tolist()) == list(range(16))   # init loss covers the pool once
    assert sorted(first_epoch.tolist()) == list(range(16))           # one SGLD epoch = a permutation


def test_defaults_and_bad_input():
    assert default_n_beta(32) == pytest.approx(32 / math.log(32))
    m = Quad([1.0], [0.0])
    r = estimate_llc(m, loss_fn, DATA, n_beta=None, chains=1, draws=2, batch_size=8)
    assert r["n_beta"] == pytest.approx(8 / math.log(8)) and r["n_beta_rule"] == "B/lnB"
    with pytest.raises(ValueError, match="batch_size"):
        estimate_llc(m, loss_fn, DATA, batch_size=100)
    with pytest.raises(ValueError, match="eps"):
        estimate_llc(m, loss_fn, DATA, eps=0.0)
    with pytest.raises(ValueError, match="chains"):
        estimate_llc(m, loss_fn, DATA, chains=0)
