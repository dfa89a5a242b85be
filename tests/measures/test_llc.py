"""SGLD LLC on quadratics with known answers: d/2 at a regular minimum, k/2 with flat
directions, negative off the minimum, flags, determinism, weights restored; a minibatch-
dependent quadratic whose exact expectation pins down which loss is recorded (minibatch,
before the step), the noise scale, n_beta, gamma and burn-in; and step-for-step and
chain-for-chain agreement with devinterp 2.x (a test dependency)."""
import math
import os
import warnings

import numpy as np
import pytest
import torch

from geoanatomy.measures.llc import default_n_beta, estimate_llc


class Quad(torch.nn.Module):
    """L(w) = 0.5 * sum_i lam_i (w_i - c_i)^2 (data-free: minibatches do not change it)."""

    def __init__(self, lam, w0, centre=None):
        super().__init__()
        self.lam = torch.tensor(lam, dtype=torch.float64)
        self.c = torch.zeros(len(lam), dtype=torch.float64) if centre is None else torch.tensor(centre,
                                                                                                dtype=torch.float64)
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


@pytest.mark.slow
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


# ---------------------------------------------------------------- minibatch-dependent quadratic
class LinQuad(torch.nn.Module):
    """L_b(w) = lam/2 |w|^2 - w . mean(x_b): the pool loss is lam/2 |w|^2 (pool mean 0), and
    every minibatch pulls w towards its own mean, so the minibatch gradient noise, and which
    loss is recorded, change the expected llc."""

    def __init__(self, d, lam):
        super().__init__()
        self.lam = lam
        self.w = torch.nn.Parameter(torch.zeros(d, dtype=torch.float64))


def linquad_loss(model, batch):
    return 0.5 * model.lam * (model.w ** 2).sum() - model.w @ batch.mean(0)


def expected_linquad_trace(T, *, lam, eps, n_beta, gamma, d, V, K, record="before", loss="minibatch"):
    """Exact E[recorded loss] at steps t = 0..T-1 of the chain from w0 = 0 (independent of
    the estimator: second moments of a linear recursion).

    w_{t+1} = rho w_t + c m_t + sqrt(eps) xi_t with rho = 1 - eps (n_beta lam + gamma)/2,
    c = eps n_beta / 2, m_t the batch mean at step t. The batches of one epoch are a random
    partition of the pool into K batches, a new one every epoch, so E[m_j . m_t] = V (j = t),
    -V/(K-1) (same epoch) and 0 (other epochs), where V = sum_dims E[m_b^2]. Then
    E|w_{t+1}|^2 = rho^2 E|w_t|^2 + 2 rho c E[w_t . m_t] + c^2 V + eps d and
    E[w_t . m_t] = c sum_{j<t} rho^(t-1-j) E[m_j . m_t].
    record="before" (ours, devinterp's): L_{b_t}(w_t); "after": L_{b_t}(w_{t+1});
    loss="full": the pool loss L_n(w_t) instead of the minibatch loss.
    """
    rho, c = 1 - eps * (n_beta * lam + gamma) / 2, eps * n_beta / 2
    out, ww = np.empty(T), 0.0
    for t in range(T):
        j = np.arange(t)
        corr = np.where(j // K == t // K, -1.0 / (K - 1), 0.0)
        wm = c * V * float((rho ** (t - 1 - j) * corr).sum())
        ww_next = rho ** 2 * ww + 2 * rho * c * wm + c * c * V + eps * d
        if record == "before":
            out[t] = 0.5 * lam * ww - (wm if loss == "minibatch" else 0.0)
        else:
            out[t] = 0.5 * lam * ww_next - (rho * wm + c * V)
        ww = ww_next
    return out


def _linquad_pool(n, d, B):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x -= x.mean(0)
    V = float((x ** 2).mean(0).sum()) * (n - B) / (B * (n - 1))   # E[m_b^2] without replacement
    return x, V


@pytest.mark.slow
def test_minibatch_loss_matches_closed_form():
    d, n, B, lam, eps, nb, gamma = 8, 16, 8, 1.0, 2e-3, 100.0, 10.0
    x, V = _linquad_pool(n, d, B)
    burnin, draws = 20, 1500
    kw = dict(lam=lam, eps=eps, n_beta=nb, gamma=gamma, d=d, V=V, K=n // B)
    want = nb * expected_linquad_trace(burnin + draws, **kw)[burnin:].mean()                       # 6.53
    after = nb * expected_linquad_trace(burnin + draws, record="after", **kw)[burnin:].mean()       # 1.15
    full = nb * expected_linquad_trace(burnin + draws, loss="full", **kw)[burnin:].mean()          # 3.98
    vals = [estimate_llc(LinQuad(d, lam), linquad_loss, x, eps=eps, gamma=gamma, n_beta=nb, chains=2, draws=draws,
                         burnin=burnin, batch_size=B, seed=s)["value"] for s in range(6)]
    assert np.mean(vals) == pytest.approx(want, abs=0.3)           # ~5 MC s.e.
    assert abs(np.mean(vals) - after) > 4 and abs(np.mean(vals) - full) > 2


@pytest.mark.slow
def test_burnin_is_excluded_from_the_average():
    d, n, B, lam, eps, nb, gamma = 8, 16, 8, 1.0, 2e-3, 100.0, 10.0
    x, V = _linquad_pool(n, d, B)
    burnin, draws = 5, 5
    tr = nb * expected_linquad_trace(burnin + draws, lam=lam, eps=eps, n_beta=nb, gamma=gamma, d=d, V=V, K=n // B)
    want, with_burnin = tr[burnin:].mean(), tr.mean()                                              # 6.28, 4.86
    vals = [estimate_llc(LinQuad(d, lam), linquad_loss, x, eps=eps, gamma=gamma, n_beta=nb, chains=4, draws=draws,
                         burnin=burnin, batch_size=B, seed=s)["value"] for s in range(128)]
    assert np.mean(vals) == pytest.approx(want, abs=0.55)          # ~4 MC s.e.; with burn-in 1.4 lower
    assert abs(np.mean(vals) - with_burnin) > 0.8


def test_rng_schemes():
    m = Quad([1.0, 2.0], [0.0, 0.0])
    kw = dict(eps=1e-3, gamma=5.0, n_beta=50.0, chains=2, draws=30, batch_size=8, seed=7)
    a = estimate_llc(m, loss_fn, DATA, **kw)
    b = estimate_llc(m, loss_fn, DATA, rng="devinterp", **kw)
    assert a["rng"] == "geoanatomy" and b["rng"] == "devinterp" and a["value"] != b["value"]
    # devinterp's streams: chain c of seed s is chain c-1 of seed s+1 (same noise; this loss ignores the data)
    c = estimate_llc(m, loss_fn, DATA, rng="devinterp", **{**kw, "seed": 8})
    assert np.array_equal(b["loss_trace"][1], c["loss_trace"][0])
    d = estimate_llc(m, loss_fn, DATA, **{**kw, "seed": 8})
    assert not np.array_equal(a["loss_trace"][1], d["loss_trace"][0])
    with pytest.raises(ValueError, match="rng"):
        estimate_llc(m, loss_fn, DATA, rng="numpy")


# ---------------------------------------------------------------- devinterp 2.x (the reference)
def _tiny_gpt():
    from geoanatomy.model import GPT, ModelConfig
    torch.manual_seed(0)
    return GPT(ModelConfig(n_layer=1, d_model=16, n_head=2, block_size=8))


def _pool(model, n=48, S=6):
    return torch.randint(0, model.cfg.vocab_size, (n, S), generator=torch.Generator().manual_seed(1))


def test_one_sgld_step_matches_devinterp():
    from devinterp.optim import SGMCMC

    from geoanatomy.measures.llc import _sgld_step
    from geoanatomy.model import answer_loss
    eps, nb, gamma = 1e-3, 30.0, 100.0
    m1, m2 = _tiny_gpt(), _tiny_gpt()
    pool = _pool(m1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = SGMCMC.sgld([{"params": p} for _, p in m1.named_parameters()], lr=eps, localization=gamma, nbeta=nb)
    params = [p for p in m2.parameters() if p.requires_grad]
    w0 = [p.detach().clone() for p in params]
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    for t in range(3):                                     # same weights, minibatch and noise
        b = pool[8 * t:8 * t + 8]
        opt.zero_grad()
        answer_loss(m1, b, 2).backward()
        opt.step(noise_generator=g1)
        grads = torch.autograd.grad(answer_loss(m2, b, 2), params)
        _sgld_step(params, grads, w0, eps=eps, n_beta=nb, gamma=gamma, noise=g2)
        for p1, p2 in zip(m1.parameters(), m2.parameters()):
            torch.testing.assert_close(p1, p2, rtol=0, atol=1e-6)
    assert any(not torch.equal(p, q) for p, q in zip(m1.parameters(), w0))


@pytest.mark.slow
def test_chains_match_devinterp_llc(tmp_path):
    os.environ.setdefault("TQDM_DISABLE", "1")
    import torch.nn.functional as F
    from datasets import Dataset
    from devinterp.slt.llc import llc

    from geoanatomy.measures.llc import llc_at_checkpoint
    model = _tiny_gpt()
    pool = _pool(model)
    na, B, chains, draws, burnin, seed = 2, 8, 3, 12, 3, 5

    def per_token(m, ids):                                 # our answer loss, per sample, broadcast over positions
        x, y = ids[:, :-1], ids[:, 1:]
        logits = m(x)[:, -na:, :]
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[:, -na:].reshape(-1), reduction="none")
        return ce.view(-1, na).mean(1)[:, None].expand(-1, x.shape[1])

    kw = dict(eps=1e-3, gamma=100.0, n_beta=30.0, chains=chains, draws=draws, batch_size=B)
    ours = llc_at_checkpoint(model, pool, na, burnin=burnin, seed=seed, rng="devinterp", **kw)
    ds = Dataset.from_dict({"input_ids": pool.tolist()}).with_format("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = llc(model, ds, {}, lr=kw["eps"], n_beta=kw["n_beta"], localization=kw["gamma"], num_chains=chains,
                  num_draws=draws, num_burnin_steps=burnin, batch_size=B, init_seed=seed, device="cpu",
                  num_init_loss_batches=pool.shape[0] // B, output_path=str(tmp_path / "s.zarr"), loss_fn=per_token)
    assert ours["init_loss"] == pytest.approx(float(res["init_loss"]), abs=1e-5)
    np.testing.assert_allclose(ours["loss_trace"], res["loss_trace"].values, rtol=0, atol=1e-5)
    # devinterp 2.x averages burn-in steps too; ours drops them (the same trace either way)
    full = kw["n_beta"] * (ours["loss_trace"].mean(1) - ours["init_loss"])
    np.testing.assert_allclose(full, res["llc_per_chain"].values, rtol=0, atol=1e-3)
    drop = kw["n_beta"] * (ours["loss_trace"][:, burnin:].mean(1) - ours["init_loss"])
    np.testing.assert_allclose(ours["per_chain"], drop)
