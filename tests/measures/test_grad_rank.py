"""Gradient effective ranks: constructed gradient sets of known rank, Gram vs SVD, vmap vs loop."""
import math

import numpy as np
import pytest
import torch

from geoanatomy.measures.grad_rank import (centre_gram, grad_ranks, gram_effective_ranks, gram_spectrum,
                                           per_sample_gram)
from geoanatomy.measures.rankme import effective_rank, rankme
from geoanatomy.model import GPT, ModelConfig


def _orthonormal(n, k, seed):
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(n, k, generator=g, dtype=torch.float64))
    return q                                                              # (n, k)


def _matrix(svals, N=20, P=300, seed=0):
    """G = U diag(s) V^T (N, P) with the given singular values."""
    U, V = _orthonormal(N, len(svals), seed), _orthonormal(P, len(svals), seed + 1)
    return U @ torch.diag(torch.tensor(svals, dtype=torch.float64)) @ V.T


def test_equal_singular_values_give_their_count():
    G = _matrix([2.0] * 5)
    r = gram_effective_ranks(G @ G.T)["grad"]
    assert r["roy_vetterli"] == pytest.approx(5.0, abs=1e-6)
    assert r["eig"] == pytest.approx(5.0, abs=1e-6)
    assert r["rankme"] == pytest.approx(5.0, rel=1e-4)             # eps = 1e-7 adds ~N*eps


def test_unequal_spectrum_matches_hand_formula():
    s = np.array([3.0, 2.0, 1.0])
    G = _matrix(list(s))
    r = gram_effective_ranks(G @ G.T)["grad"]
    p = s / s.sum()
    assert r["roy_vetterli"] == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-8)
    q = s**2 / (s**2).sum()
    assert r["eig"] == pytest.approx(math.exp(-(q * np.log(q)).sum()), rel=1e-8)
    assert gram_spectrum(G @ G.T)[:3].numpy() == pytest.approx(s, rel=1e-8)


def test_centred_gram_removes_a_shared_offset():
    # G = 1 a^T + Z with rank-3 Z whose columns have zero mean: the gradients share a common
    # component (the batch gradient); the covariance rank is exactly 3, the raw rank is not.
    N, P = 24, 200
    Uc = torch.randn(N, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    Uc = torch.linalg.qr(Uc - Uc.mean(0))[0]                          # zero-mean orthonormal columns
    Z = Uc @ _orthonormal(P, 3, 7).T
    a = 10 * torch.randn(P, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    G = torch.ones(N, 1, dtype=torch.float64) @ a[None] + Z
    K = G @ G.T
    r = gram_effective_ranks(K)
    assert r["grad_cov"]["roy_vetterli"] == pytest.approx(3.0, abs=1e-6)
    assert r["grad"]["roy_vetterli"] < 2.0                           # dominated by the shared offset
    Gc = G - G.mean(0)
    assert torch.allclose(centre_gram(K), Gc @ Gc.T, atol=1e-9)


def test_gram_route_equals_direct_svd_of_random_matrix():
    G = torch.randn(30, 500, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    G = G * torch.logspace(0, -3, 500, dtype=torch.float64)            # spread spectrum
    r = gram_effective_ranks(G @ G.T, eps=1e-7)
    assert r["grad"]["roy_vetterli"] == pytest.approx(effective_rank(G), rel=1e-9)
    assert r["grad"]["rankme"] == pytest.approx(rankme(G), rel=1e-9)
    assert r["grad_cov"]["roy_vetterli"] == pytest.approx(effective_rank(G, centred=True), rel=1e-7)


def _tiny():
    torch.manual_seed(0)
    m = GPT(ModelConfig(n_layer=1, d_model=16, n_head=2, vocab_size=12, block_size=10))
    for p in m.parameters():
        p.data.add_(0.2 * torch.randn_like(p))
    return m


@pytest.mark.slow
def test_per_sample_gradients_vmap_equal_loop_and_explicit():
    m = _tiny()
    seq = torch.randint(0, 12, (7, 10), generator=torch.Generator().manual_seed(1))
    K_v, info = per_sample_gram(m, seq, 2, method="vmap")
    K_l, info_l = per_sample_gram(m, seq, 2, method="loop")
    assert info["method"] == "vmap" and info_l["method"] == "loop"
    assert torch.allclose(K_v, K_l, rtol=1e-4, atol=1e-8)
    # explicit per-sample gradients with plain autograd
    rows = []
    for i in range(7):
        m.zero_grad()
        from geoanatomy.model import answer_loss
        answer_loss(m, seq[i:i + 1], 2).backward()
        rows.append(torch.cat([p.grad.reshape(-1) for p in m.parameters()]).double())
    G = torch.stack(rows)
    assert torch.allclose(K_v, G @ G.T, rtol=1e-4, atol=1e-8)
    # a small memory cap splits parameters into groups; the Gram matrix is unchanged
    K_g, info_g = per_sample_gram(m, seq, 2, method="vmap", max_bytes=7 * 4 * 600)
    assert info_g["param_groups"] > 3
    assert torch.allclose(K_g, K_v, rtol=1e-6, atol=1e-10)


def test_identical_examples_have_gradient_rank_one():
    m = _tiny()
    seq = torch.randint(0, 12, (1, 10), generator=torch.Generator().manual_seed(2)).repeat(6, 1)
    r = grad_ranks(m, seq, 3)
    assert r["grad"]["roy_vetterli"] == pytest.approx(1.0, abs=1e-4)
    assert r["n_samples"] == 6 and r["n_params"] == sum(p.numel() for p in m.parameters())
    # distinct examples: rank above 1 and at most N
    seq = torch.randint(0, 12, (6, 10), generator=torch.Generator().manual_seed(3))
    r = grad_ranks(m, seq, 3)
    assert 1.5 < r["grad"]["roy_vetterli"] <= 6 + 1e-9
    assert 1.0 < r["grad_cov"]["roy_vetterli"] <= 5 + 1e-9            # centring removes one dimension
    assert m.cfg.attn_impl == "sdpa"                                   # restored


def test_bad_input():
    with pytest.raises(ValueError, match="square"):
        gram_spectrum(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="at least 2"):
        grad_ranks(_tiny(), torch.zeros(1, 10, dtype=torch.long), 2)
    with pytest.raises(ValueError, match="method"):
        per_sample_gram(_tiny(), torch.zeros(2, 10, dtype=torch.long), 2, method="fast")
