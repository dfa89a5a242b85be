"""The field's cheap precursor signals, each a formula on one checkpoint (or a trailing window
of checkpoints), with a closed-form answer on a hand-made case (tests/measures/test_signals.py).

Every function takes plain arrays (torch or numpy) and returns floats; the metrics stage
(``stages.metrics``) calls them at every checkpoint, the registry (``measures.signal_registry``)
says which table rows they become and how their events are read. Sources: docs/benchmark.md.

loss covariance (``loss_covariance``; the "2-datapoint reduced density matrix", arXiv 2603.29805)
    L (W, N): per-example losses at the W checkpoints of a trailing window. X = L minus its
    mean over the window (per example); C = X^T X / (W - 1) is the N x N covariance of the
    examples' losses over the window; its non-zero eigenvalues are those of X X^T / (W - 1)
    (W x W). With p_k = lambda_k / sum lambda::

        participation ratio  PR = (sum lambda)^2 / sum lambda^2        in [1, W - 1]
        heat capacity        C_h = sum p_k (ln p_k)^2 - (sum p_k ln p_k)^2
                             (the variance of the spectrum's energies -ln p_k: 0 for one mode
                             and for a flat spectrum, largest in between)

ILDR (``ildr``; inter/intra-class distance ratio, arXiv 2604.20923)
    Z (N, d) representations, y (N,) class labels (here the first answer token). Centroids
    mu_c of the classes with >= 2 members; ILDR = mean_{a<b} ||mu_a - mu_b|| /
    mean_i ||z_i - mu_{y_i}||. Rises as classes separate.

update-Gram gap (``update_gap``; the spectral edge of rolling-window updates, arXiv 2603.28964)
    theta_0..theta_W flattened parameters at W + 1 consecutive checkpoints (steps s_i). Updates
    per optimiser step u_i = (theta_i - theta_{i-1}) / (s_i - s_{i-1}) (checkpoints are log-spaced
    early, so raw differences would grow with the spacing); sigma_1 >= sigma_2 >= ... the singular
    values of U (W x P), from the W x W Gram U U^T. gap = sigma_1 / sigma_2: large when one
    direction dominates the recent updates (inf when sigma_2^2 is below 1e-14 sigma_1^2, the
    Gram's rounding). Data-free.

commutator defect (``commutator_defect``; arXiv 2602.16967)
    Two fixed batches A, B, gradients g_A, g_B at theta, step eta. theta_AB = theta - eta g_A -
    eta g_B(theta - eta g_A), theta_BA the other order; defect = ||theta_AB - theta_BA|| /
    (eta^2 ||g_A|| ||g_B||). Computed as eta ||(g_A(theta - eta g_B) - g_A) - (g_B(theta - eta g_A)
    - g_B)|| (the same number without subtracting two nearly equal parameter vectors). On
    quadratics L_A = theta^T A theta / 2 it is ||(BA - AB) theta|| / (||A theta|| ||B theta||) for
    every eta. An expensive measure (``measures.registry``: four gradients per checkpoint).

per-head effective rank (``effective_ranks``; spectral-probe-circuits)
    Z (N, d_head) one head's attention output at a position. With singular values s_k:
    "sv" p_k = s_k / sum s (RankMe's convention, eps 0) and "sv2" p_k = s_k^2 / sum s^2 (the
    per-head work's convention, the entropy of the covariance spectrum); rank = exp(-sum p ln p).

stable rank (``stable_rank``)
    ||W||_F^2 / ||W||_2^2 of a weight matrix: in [1, rank W].

weight norm (``weight_norm``; Nanda et al. 2023, "Progress measures for grokking via
    mechanistic interpretability": its decline under weight decay tracks the clean-up phase)
    sqrt(sum of the squares of every parameter), embeddings included. Data-free.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

DEFAULT_WINDOW = 6      # the trailing window (checkpoints) of the windowed signals (update gap, loss covariance)


def _svdvals(x) -> np.ndarray:
    """Singular values in float64 (torch's LAPACK, the one RankMe uses)."""
    import torch
    t = x.detach() if hasattr(x, "detach") else torch.as_tensor(np.asarray(x))
    return torch.linalg.svdvals(t.to(torch.float64).cpu()).numpy()


def _as_np(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


# ------------------------------------------------------------------ spectra
def spectrum_stats(eigenvalues) -> dict:
    """Participation ratio and heat capacity of a non-negative spectrum (module doc); NaN
    when it sums to zero or is not finite."""
    lam = _as_np(eigenvalues)
    lam = np.clip(lam, 0.0, None)
    tot = lam.sum()
    if not np.isfinite(tot) or tot <= 0:
        return {"participation_ratio": float("nan"), "heat_capacity": float("nan")}
    p = lam[lam > 0] / tot
    e = -np.log(p)
    return {"participation_ratio": float(tot ** 2 / (lam ** 2).sum()),
            "heat_capacity": float((p * e ** 2).sum() - (p * e).sum() ** 2)}


def loss_covariance(losses) -> dict:
    """Participation ratio and heat capacity of the covariance over checkpoints of the
    per-example losses L (W, N) of a trailing window (module doc)."""
    L = _as_np(losses)
    if L.ndim != 2 or L.shape[0] < 2:
        raise ValueError(f"loss_covariance needs a (W >= 2, N) matrix of losses, got shape {L.shape}")
    if not np.isfinite(L).all():
        return {"participation_ratio": float("nan"), "heat_capacity": float("nan")}
    X = L - L.mean(0, keepdims=True)
    lam = np.linalg.eigvalsh(X @ X.T / (L.shape[0] - 1))
    return spectrum_stats(lam)


# ------------------------------------------------------------------- ILDR
def ildr(Z, labels) -> float:
    """Inter/intra-class distance ratio of Z (N, d) under labels (N,) (module doc); NaN when
    fewer than two classes have two members or every point sits on its centroid."""
    Z, y = _as_np(Z), np.asarray(labels).reshape(-1)
    if Z.ndim != 2 or len(y) != Z.shape[0]:
        raise ValueError(f"ildr needs Z (N, d) and N labels, got {Z.shape} and {y.shape}")
    if not np.isfinite(Z).all():
        return float("nan")
    classes, counts = np.unique(y, return_counts=True)
    keep = classes[counts >= 2]
    if len(keep) < 2:
        return float("nan")
    mus, intra = [], []
    for c in keep:
        zc = Z[y == c]
        mu = zc.mean(0)
        mus.append(mu)
        intra.append(np.linalg.norm(zc - mu, axis=1))
    mus = np.stack(mus)
    d_in = float(np.concatenate(intra).mean())
    diff = mus[:, None, :] - mus[None, :, :]
    iu = np.triu_indices(len(keep), 1)
    d_out = float(np.linalg.norm(diff, axis=-1)[iu].mean())
    return d_out / d_in if d_in > 0 else float("nan")


# ------------------------------------------------------- update-Gram gap
def gap_of_gram(gram) -> float:
    """sigma_1 / sigma_2 from the Gram matrix U U^T of the updates (``update_gap``); NaN when it
    is not finite (a diverged run)."""
    if not np.isfinite(np.asarray(gram, dtype=np.float64)).all():
        return float("nan")
    lam = np.sort(np.clip(np.linalg.eigvalsh(np.asarray(gram, dtype=np.float64)), 0.0, None))[::-1]
    if lam[0] <= 0:
        return float("nan")
    # below 1e-14 of the top eigenvalue the Gram's rounding dominates: one direction only
    return float(math.sqrt(lam[0] / lam[1])) if lam[1] > 1e-14 * lam[0] else float("inf")


def update_gap(thetas, steps) -> float:
    """sigma_1 / sigma_2 of the per-step updates between W + 1 consecutive flattened parameter
    vectors thetas (W + 1, P) at checkpoint steps (W + 1,) (module doc); inf when the updates
    are parallel, NaN when there are fewer than two updates or none moved."""
    T = _as_np(thetas)
    s = np.asarray(steps, dtype=np.float64)
    if T.ndim != 2 or T.shape[0] != len(s) or len(s) < 3:
        raise ValueError(f"update_gap needs (W + 1 >= 3, P) parameters and W + 1 steps, got {T.shape}, {len(s)}")
    ds = np.diff(s)
    if (ds <= 0).any():
        raise ValueError(f"update_gap: steps must increase, got {s.tolist()}")
    U = np.diff(T, axis=0) / ds[:, None]
    return gap_of_gram(U @ U.T)


# --------------------------------------------------------- effective ranks
def effective_ranks(Z) -> dict:
    """Effective rank of Z (N, d) in both conventions: "sv" (p = s / sum s, RankMe without its
    epsilon) and "sv2" (p = s^2 / sum s^2); NaN for an all-zero or non-finite Z. The entropy is
    RankMe's (``rankme.rankme_from_singular_values``)."""
    import torch

    from .rankme import rankme_from_singular_values
    if not np.isfinite(_as_np(Z)).all():
        return {"sv": float("nan"), "sv2": float("nan")}
    s = torch.as_tensor(_svdvals(Z))
    return {"sv": rankme_from_singular_values(s, eps=0.0), "sv2": rankme_from_singular_values(s ** 2, eps=0.0)}


def stable_rank(W) -> float:
    """||W||_F^2 / ||W||_2^2 of a matrix (NaN for an all-zero one): the top eigenvalue of the
    smaller Gram matrix W^T W or W W^T in float64 (the same number as the SVD's, cheaper)."""
    import torch
    A = (W.detach() if hasattr(W, "detach") else torch.as_tensor(np.asarray(W))).to(torch.float64).cpu()
    if not bool(torch.isfinite(A).all()):
        return float("nan")
    G = A.T @ A if A.shape[0] >= A.shape[1] else A @ A.T
    top = float(torch.linalg.eigvalsh(G)[-1])
    return float(torch.trace(G)) / top if top > 0 else float("nan")


# ------------------------------------------------------ commutator defect
def commutator_defect(grad, theta, eta: float = 1e-3) -> dict:
    """The commutator defect at parameters theta (P,) of two gradient fields
    ``grad(which, theta) -> (P,)`` with which in ("A", "B") (module doc). Returns
    {"value", "eta", "grad_cos", "norm_a", "norm_b"}; NaN when a gradient is zero."""
    import torch
    ga, gb = grad("A", theta), grad("B", theta)
    na, nb = float(ga.norm()), float(gb.norm())
    if na == 0 or nb == 0 or not (math.isfinite(na) and math.isfinite(nb)):
        return {"value": float("nan"), "eta": eta, "grad_cos": float("nan"), "norm_a": na, "norm_b": nb}
    ga_b = grad("A", theta - eta * gb)          # g_A after the B step
    gb_a = grad("B", theta - eta * ga)          # g_B after the A step
    delta = eta * ((ga_b - ga) - (gb_a - gb))   # theta_AB - theta_BA
    value = float(torch.linalg.vector_norm(delta.double())) / (eta ** 2 * na * nb)
    return {"value": value, "eta": eta, "grad_cos": float((ga.double() @ gb.double()) / (na * nb)),
            "norm_a": na, "norm_b": nb}


# ------------------------------------------------------------ rows of a model
def _row(measure, layer, layer_index, position, variant, n, value, settings) -> dict:
    return {"measure": measure, "layer": layer, "layer_index": layer_index, "position": position,
            "variant": variant, "n_samples": int(n), "value": float(value), "settings": settings}


EMBEDDING_NAMES = ("wte", "wpe", "embed", "lm_head", "embed_out")


def block_matrices(model) -> dict:
    """{block index: [2-D weight matrices]} of a transformer: the parameters under ``blocks.i.``
    (this project's GPT), ``h.i.`` (GPT-2) or ``layers.i.`` (GPT-NeoX/Pythia), embeddings and
    the head left out."""
    import re
    out: dict = {}
    for name, p in model.named_parameters():
        m = re.search(r"(?:^|\.)(?:blocks|h|layers)\.(\d+)\.", name)
        if p.ndim == 2 and m and not any(e in name for e in EMBEDDING_NAMES):
            out.setdefault(int(m.group(1)), []).append(p)
    return dict(sorted(out.items()))


def stable_rank_rows(model) -> list[dict]:
    """stable_rank rows: per block (mean over its 2-D weights) and ``all_blocks`` (mean over every
    block matrix)."""
    rows, allv = [], []
    for i, mats in block_matrices(model).items():
        vals = [stable_rank(W) for W in mats]
        allv += vals
        rows.append(_row("stable_rank", f"block{i}", i + 1, "none", "", 0, float(np.mean(vals)),
                         {"mean_over": f"the block's {len(vals)} weight matrices"}))
    if allv:
        rows.append(_row("stable_rank", "all_blocks", -1, "none", "", 0, float(np.mean(allv)),
                         {"mean_over": f"{len(allv)} block weight matrices"}))
    return rows


def weight_norm_rows(model) -> list[dict]:
    """The weight_norm row: the L2 norm of every parameter (``all_params``), in float64."""
    sq = sum(float((p.detach().double() ** 2).sum()) for p in model.parameters())
    n = sum(p.numel() for p in model.parameters())
    return [_row("weight_norm", "all_params", -1, "none", "", 0, math.sqrt(sq),
                 {"over": f"every parameter ({n} values), embeddings included", "dtype": "float64"})]


def head_rank_rows(heads: dict, n_head: int, position: str) -> list[dict]:
    """head_erank rows of captured head outputs (``capture_heads``): each head of each block and
    ``all_heads`` (their mean), in both conventions."""
    rows, per = [], {"sv": [], "sv2": []}
    for i, Y in sorted(heads.items()):
        N = Y.shape[0]
        for h, Z in enumerate(Y.reshape(N, n_head, -1).unbind(1)):
            for v, val in effective_ranks(Z).items():
                per[v].append(val)
                rows.append(_row("head_erank", f"block{i}.head{h}", i + 1, position, v, N, val,
                                 {"convention": v, "what": "attention output of the head (before c_proj)"}))
    n = next(iter(heads.values())).shape[0] if heads else 0
    for v, vals in per.items():
        if vals:
            rows.append(_row("head_erank", "all_heads", -1, position, v, n, float(np.mean(vals)),
                             {"convention": v, "mean_over": f"{len(vals)} heads"}))
    return rows


class capture_heads:
    """Context manager: each attention layer's output per head, captured at the input of its
    output projection (heads concatenated there), at position ``first`` (an int, or a (B,)
    tensor of positions per row). The layers are the modules named ``*.attn.c_proj`` (this
    project's GPT and GPT-2 style models); ``{block index: (B, d_model)}``."""

    def __init__(self, model, first):
        self.model, self.first, self.out, self.handles = model, first, {}, []

    def __enter__(self) -> dict:
        import torch
        mods = [m for n, m in self.model.named_modules() if n.endswith("attn.c_proj")]
        for i, m in enumerate(mods):
            def hook(mod, args, i=i):
                x = args[0]
                if isinstance(self.first, int):
                    self.out[i] = x[:, self.first, :].detach()
                else:
                    self.out[i] = x[torch.arange(x.shape[0], device=x.device), self.first.to(x.device)].detach()
            self.handles.append(m.register_forward_pre_hook(hook))
        return self.out

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()



class SignalWindow:
    """The windowed signals of one run, fed in checkpoint order: the per-step updates between
    the last ``size`` + 1 checkpoints (float32, with their Gram matrix in float64 kept up to date
    one row at a time) and the last ``size`` checkpoints' per-example losses."""

    def __init__(self, size: int = DEFAULT_WINDOW):
        self.size = int(size)
        self.prev = None
        self.updates: list = []
        self.gram = np.zeros((0, 0))
        self.losses: list[np.ndarray] = []
        self.example_rows: list[np.ndarray] = []
        self.feed_seconds = 0.0       # CPU seconds the last checkpoint took to take in (the update's dot products)

    def _add_update(self, step: int, theta) -> None:
        import torch
        if self.prev is not None:
            u = (theta - self.prev[1]) / float(step - self.prev[0])
            if len(self.updates) == self.size:
                self.updates.pop(0)
                self.gram = self.gram[1:, 1:]
            dots = np.array([float(torch.dot(u.double(), x.double())) for x in self.updates + [u]])
            k = len(self.updates)
            g = np.zeros((k + 1, k + 1))
            g[:k, :k] = self.gram
            g[k, :] = g[:, k] = dots
            self.gram = g
            self.updates.append(u)
        self.prev = (int(step), theta)

    def feed(self, step: int, model, losses: np.ndarray | None) -> None:
        """Take this checkpoint: its parameters (the update since the last one) and, when given,
        its per-example losses."""
        import torch
        clock = time.process_time()
        self._add_update(step, torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu().clone())
        self.feed_seconds = time.process_time() - clock
        if losses is not None:
            self.losses = (self.losses + [losses])[-self.size:]
            self.example_rows.append(losses.astype(np.float32))

    def gap_rows(self) -> list[dict]:
        """The update_gap row at the last checkpoint fed (NaN until the window is full)."""
        gap = gap_of_gram(self.gram) if len(self.updates) == self.size else float("nan")
        return [_row("update_gap", "all_params", -1, "none", "window", 0, gap,
                     {"window": self.size, "trailing": True,
                      "updates": "per optimiser step between consecutive checkpoints"})]

    def cov_rows(self, n: int) -> list[dict]:
        """The two loss-covariance rows at the last checkpoint fed (NaN until the window holds
        ``size`` checkpoints' losses), ``n`` the number of examples."""
        heat = pr = float("nan")
        if len(self.losses) == self.size:
            cov = loss_covariance(np.stack(self.losses))
            heat, pr = cov["heat_capacity"], cov["participation_ratio"]
        w = {"window": self.size, "trailing": True, "losses": "per-example held-out answer loss"}
        return [_row("loss_cov_heat", "output", -1, "answer", "window", n, heat, w),
                _row("loss_cov_pr", "output", -1, "answer", "window", n, pr, w)]

    def rows(self, step: int, model, losses: np.ndarray | None) -> list[dict]:
        """Feed this checkpoint, then the update_gap row and (with per-example ``losses``) the two
        loss-covariance rows (NaN until the window is full)."""
        self.feed(step, model, losses)
        return self.gap_rows() + ([] if losses is None else self.cov_rows(len(losses)))


# ------------------------------------------------ a signal computes itself
# What a consumer (the metrics stage, the monitor, the scanner) can hand a signal at one
# checkpoint; a signal's registry entry (``measures.signal_registry``) says which of these it
# reads, and a consumer offers a set of them (its ``SIGNAL_INPUTS``).
INPUTS = {
    "weights": "the checkpoint's parameters",
    "hidden": "hidden states of named layers at one position, one row per example",
    "labels": "a class label per example (the first answer token)",
    "heads": "each attention layer's output per head at that position",
    "losses": "the per-example losses at this checkpoint",
    "window": "the trailing window of earlier checkpoints (SignalWindow, fed this checkpoint)",
    "gradients": "gradients on fixed training batches (an expensive measure: the measures stage)",
    "behaviour": "the model's answers on fixed samples (the loss curve, log-probabilities)",
    "probes": "linear probes fitted on frozen hidden states (the probes stage)",
}


@dataclass
class SignalState:
    """One checkpoint as a consumer hands it to the signals' computations. ``layers``: (name,
    index, Z (N, d)) at ``position`` for the hidden-state signals; ``classes`` says what the
    labels are; ``window`` has been fed this checkpoint."""
    model: Any = None
    step: int | None = None
    position: str = "first"
    layers: list = field(default_factory=list)
    labels: Any = None
    classes: str = "first answer token"
    heads: dict | None = None
    n_head: int | None = None
    losses: Any = None
    window: SignalWindow | None = None


def _ildr_rows(st: SignalState) -> list[dict]:
    y = np.asarray(st.labels)
    meta = {"classes": st.classes, "definition": "mean centroid distance / mean distance to own centroid"}
    return [_row("ildr", name, li, st.position, "", len(y), ildr(Z, y), meta) for name, li, Z in st.layers]


def _head_rows(st: SignalState) -> list[dict]:
    return head_rank_rows(st.heads or {}, int(st.n_head), st.position) if st.heads else []


def _stable_rows(st: SignalState) -> list[dict]:
    return stable_rank_rows(st.model)


def _norm_rows(st: SignalState) -> list[dict]:
    return weight_norm_rows(st.model)


def _gap_rows(st: SignalState) -> list[dict]:
    return st.window.gap_rows()


def _cov_rows(st: SignalState) -> list[dict]:
    return st.window.cov_rows(len(st.losses))


@dataclass(frozen=True)
class Computation:
    """One computation of the cheap signals at a checkpoint: what it reads (``INPUTS``), its
    rows from a ``SignalState``, the measures those rows carry and the timing key its CPU
    seconds are recorded under (``signal_timings_*.json``)."""
    name: str
    reads: frozenset
    rows: Callable[[SignalState], list]
    measures: tuple
    cost_key: str


# in the order the metrics stage writes their rows (metrics.csv's row order)
COMPUTATIONS: dict[str, Computation] = {c.name: c for c in (
    Computation("ildr", frozenset({"hidden", "labels"}), _ildr_rows, ("ildr",), "ildr"),
    Computation("head_erank", frozenset({"heads"}), _head_rows, ("head_erank",), "head_erank"),
    Computation("stable_rank", frozenset({"weights"}), _stable_rows, ("stable_rank",), "stable_rank"),
    Computation("weight_norm", frozenset({"weights"}), _norm_rows, ("weight_norm",), "weight_norm"),
    Computation("update_gap", frozenset({"window"}), _gap_rows, ("update_gap",), "update_gap"),
    Computation("loss_cov", frozenset({"window", "losses"}), _cov_rows, ("loss_cov_heat", "loss_cov_pr"), "loss_cov"),
)}
