"""One conformance battery over every registered precursor signal (the idea of scikit-learn's
``check_estimator``, as tests/measures/test_measure_conformance.py is for the expensive
measures): an entry added to ``measures.signal_registry`` runs through these checks unasked.
Each check reads the entry, never a list of names:

* the entry is labelled (a direction, a kind, a source, what it is, inputs that exist) and its
  computation is registered;
* a signal with a computation of its own has a known case here (``KNOWN``: a hand-made state
  whose value is known in closed form) and gives that value;
* on a real (tiny) model the metrics stage writes its curve, finite once the window is full,
  with its settings, and the same seed gives the same values;
* every consumer that offers its inputs writes it: the metrics stage, the monitor (the scanner
  in tests/test_scan.py, over ``offered(scan.SIGNAL_INPUTS)``), the measures stage for the
  gradient-reading ones; a consumer asked for one it cannot compute refuses it by name.
"""
import math

import numpy as np
import pytest
import torch

from geoanatomy.measures import signals as sig
from geoanatomy.measures.signal_registry import SIGNALS, computations, offered, requested
from geoanatomy.measures.signals import COMPUTATIONS, DEFAULT_WINDOW, INPUTS, SignalState, SignalWindow
from geoanatomy.table import read_table

COMPUTED = [s for s in SIGNALS if s.computation is not None]


# ---------------------------------------------------------------- known cases, one per computation
def _ildr_case():
    # classes 0 and 1 at centroids (0, 0) and (4, 0), every point at distance 1 from its centroid
    Z = torch.tensor([[0.0, 1.0], [0.0, -1.0], [4.0, 1.0], [4.0, -1.0]])
    return SignalState(position="first", layers=[("ln_final", 3, Z)], labels=np.array([0, 0, 1, 1])), {"": 4.0}


def _heads_case():
    # head 0 rank one (effective rank 1 in both conventions), head 1 two equal orthogonal
    # directions (2 in both); the mean over the two heads 1.5
    a = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0]])
    b = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    return SignalState(position="first", heads={0: torch.cat([a, b], 1)}, n_head=2), {"sv": 1.5, "sv2": 1.5}


class _Blocks(torch.nn.Module):
    def __init__(self, weights):
        super().__init__()
        self.blocks = torch.nn.ModuleList()
        for W in weights:
            lin = torch.nn.Linear(W.shape[1], W.shape[0])
            with torch.no_grad():
                lin.weight.copy_(W)
            self.blocks.append(lin)


def _stable_case():
    # ||diag(2, 1)||_F^2 / ||diag(2, 1)||_2^2 = 5 / 4
    return SignalState(model=_Blocks([torch.diag(torch.tensor([2.0, 1.0]))])), {"": 1.25}


def _window_model(theta):
    m = _Blocks([torch.zeros(1, 2)])
    with torch.no_grad():
        m.blocks[0].weight.copy_(torch.tensor([theta[:2]]))
        m.blocks[0].bias.copy_(torch.tensor([0.0]))
    return m


def _gap_case():
    # per-step updates (3, 0) then (0, 1): Gram diag(9, 1), sigma_1 / sigma_2 = 3
    w = SignalWindow(2)
    for step, theta in ((0, [0.0, 0.0]), (1, [3.0, 0.0]), (2, [3.0, 1.0])):
        w.feed(step, _window_model(theta), None)
    return SignalState(window=w), {"window": 3.0}


def _cov_case():
    # three checkpoints' losses of four examples; the answer from the N x N covariance of the
    # examples (np.cov), the other side of the matrix from the one the formula diagonalises
    L = np.array([[1.0, 0.0, 2.0, 0.5], [0.0, 1.0, 1.0, 0.5], [2.0, 2.0, 0.0, 0.5]])
    w = SignalWindow(3)
    for step, row in enumerate(L):
        w.feed(step, _window_model([0.0, float(step)]), row)
    lam = np.clip(np.linalg.eigvalsh(np.cov(L.T)), 0, None)
    p = lam[lam > 1e-12] / lam.sum()
    heat = float((p * np.log(p) ** 2).sum() - (p * np.log(p)).sum() ** 2)
    pr = float(lam.sum() ** 2 / (lam ** 2).sum())
    return SignalState(window=w, losses=L[-1]), {("loss_cov_heat", "window"): heat, ("loss_cov_pr", "window"): pr}


def _norm_case():
    # weight (3, 4) and bias 12: sqrt(9 + 16 + 144) = 13
    m = _window_model([3.0, 4.0])
    with torch.no_grad():
        m.blocks[0].bias.copy_(torch.tensor([12.0]))
    return SignalState(model=m), {"": 13.0}


KNOWN = {"ildr": _ildr_case, "head_erank": _heads_case, "stable_rank": _stable_case, "update_gap": _gap_case,
         "loss_cov": _cov_case, "weight_norm": _norm_case}


# -------------------------------------------------------------------------------- the battery
@pytest.mark.parametrize("s", SIGNALS, ids=lambda s: s.name)
def test_the_entry_is_labelled_and_its_computation_registered(s):
    assert s.direction in ("up", "down") and s.kind in ("candidate", "reference")
    assert s.source and s.what and s.table in ("metrics", "measures", "probes")
    assert s.reads and set(s.reads) <= set(INPUTS)
    assert s.compute in (*COMPUTATIONS, "core", "measure")
    if s.computation is not None:
        assert s.measure in s.computation.measures, f"{s.name}: its computation writes {s.computation.measures}"
    if s.compute == "measure":
        from geoanatomy.measures.registry import TABLE_MEASURES
        assert s.measure in TABLE_MEASURES and s.reads == {"gradients"}


@pytest.mark.parametrize("s", COMPUTED, ids=lambda s: s.name)
def test_a_known_case_gives_the_known_value(s):
    assert s.compute in KNOWN, (f"signal {s.name}: its computation {s.compute!r} has no known case in this "
                                f"battery (KNOWN): add a hand-made state whose value is known in closed form")
    state, want = KNOWN[s.compute]()
    rows = s.computation.rows(state)
    mine = [r for r in rows if r["measure"] == s.measure and r["variant"] == s.variant]
    assert mine, f"{s.name}: its computation wrote no row of its curve"
    key = (s.measure, s.variant) if (s.measure, s.variant) in want else s.variant
    headline = [r for r in mine if r["layer"] in (s.layer, "all_heads", "all_blocks", "all_params", "output")]
    assert headline[-1]["value"] == pytest.approx(want[key], rel=1e-6, abs=1e-9)


def _metrics_rows(seed: int):
    """The metrics stage's rows at DEFAULT_WINDOW + 2 checkpoints of a tiny GPT whose weights move
    by seeded steps (a window full at the last ones)."""
    from geoanatomy.model import GPT, ModelConfig
    from geoanatomy.stages.metrics import measure_checkpoint
    torch.manual_seed(seed)
    m = GPT(ModelConfig(n_layer=2, d_model=16, n_head=2, vocab_size=16, block_size=10))
    g = torch.Generator().manual_seed(seed)
    seq = torch.randint(0, 16, (40, 10), generator=g)
    seq[:, -2] = torch.arange(40) % 4                # four classes of first answer token, ten each
    w, out = SignalWindow(), []
    for i, step in enumerate([0, 1, 2, 4, 8, 16, 32, 64][:DEFAULT_WINDOW + 2]):
        with torch.no_grad():
            for p in m.parameters():
                p.add_(0.02 * torch.randn(p.shape, generator=g))
        for r in measure_checkpoint(m, seq, 1, 1e-7, seq[:20], w, step, {}):
            out.append({**r, "step": step})
    import pandas as pd
    return pd.DataFrame(out)


@pytest.fixture(scope="module")
def metrics_rows():
    return _metrics_rows(0), _metrics_rows(0)


@pytest.mark.parametrize("s", [s for s in SIGNALS if s.table == "metrics"], ids=lambda s: s.name)
def test_the_metrics_stage_writes_it_finite_labelled_and_seeded(s, metrics_rows):
    from geoanatomy.stages.metrics import SIGNAL_INPUTS
    assert s.reads <= SIGNAL_INPUTS, f"{s.name} reads {sorted(s.reads - SIGNAL_INPUTS)}, which the stage lacks"
    a, b = metrics_rows
    ca, cb = s.select(a), s.select(b)
    assert len(ca) == a["step"].nunique(), f"the metrics stage offers {s.name}'s inputs but did not write its curve"
    last = ca[ca["step"] == ca["step"].max()]
    assert np.isfinite(last["value"]).all()
    for col in ("layer", "layer_index", "position", "n_samples"):      # each value says where it comes from
        assert ca[col].notna().all(), f"{s.name}: rows without {col}"
    assert (ca["n_samples"] >= 0).all()
    assert ca["value"].tolist() == pytest.approx(cb["value"].tolist(), nan_ok=True)    # same seed, same values


def _monitor_table(tmp_path, names):
    from geoanatomy.model import GPT, ModelConfig, answer_loss
    from geoanatomy.monitor import Monitor, Probe
    from geoanatomy.tasks import TaskData, make_task
    torch.manual_seed(0)
    data = TaskData(make_task("copy", "L1"), 0, n_heldout=128)
    model = GPT(ModelConfig(n_layer=2, d_model=32, n_head=2))
    mon = Monitor(Probe.from_task(data, 32), every=1, out_dir=tmp_path, log=None, signals=names, figure=False)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    mon.step(model, 0)
    for step in range(1, DEFAULT_WINDOW + 3):
        loss = answer_loss(model, torch.as_tensor(data.train_batch(step, 32)), data.spec.n_answer)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mon.step(model, step, loss=loss.item())
    mon.close()
    return read_table(tmp_path / "metrics.csv")


def test_the_monitor_writes_every_signal_it_offers(tmp_path):
    from geoanatomy.monitor import monitor_signals
    names = monitor_signals()
    assert names, "a monitor offers no signal"
    df = _monitor_table(tmp_path, names)
    for s in requested(names, frozenset(INPUTS), "the battery"):
        rows = df[(df["measure"] == s.measure) & (df["variant"].fillna("").astype(str) == s.variant)]
        assert rows["step"].nunique() == df["step"].nunique(), f"the monitor offers {s.name} but did not write it"
        assert math.isfinite(float(rows[rows["step"] == rows["step"].max()]["value"].iloc[-1]))


@pytest.mark.parametrize("s", [s for s in SIGNALS if s.compute == "measure"], ids=lambda s: s.name)
def test_the_measures_stage_writes_the_gradient_signals(s):
    from geoanatomy.measures import MEASURES
    from geoanatomy.model import GPT, ModelConfig
    from geoanatomy.stages.measures import measure_checkpoint
    entries = list(MEASURES.values())
    kind = next(m for m in entries if any(t.name == s.measure for t in m.writes))
    kinds = [m.name for m in entries if any(t.name in kind.uses for t in m.writes)] + [kind.name]
    torch.manual_seed(0)
    model = GPT(ModelConfig(n_layer=1, d_model=16, n_head=2, vocab_size=12, block_size=10, attn_impl="math"))
    g = torch.Generator().manual_seed(0)
    pools = {m.config_key: torch.randint(0, 12, (int(m.tiny_settings()[m.pool_size_key]), 8), generator=g)
             for m in entries}
    rows = measure_checkpoint(model, pools, 2, {m.config_key: m.tiny_settings() for m in entries},
                              {m.name: 1 for m in entries}, kinds)
    mine = [r for r in rows if r["measure"] == s.measure and r["variant"] == s.variant]
    assert mine and all(math.isfinite(r["value"]) for r in mine)


@pytest.mark.parametrize("who,inputs", [("a scan", frozenset({"weights", "window"})),
                                        ("an unlabelled monitor", frozenset({"weights", "window", "hidden"}))])
def test_a_consumer_refuses_what_it_cannot_compute_by_name(who, inputs):
    cannot = [s.name for s in SIGNALS if not s.reads <= inputs]
    assert cannot
    with pytest.raises(ValueError, match=rf"{who}: \['{cannot[0]}'\] cannot be computed by it \({cannot[0]} reads"):
        requested([cannot[0]], inputs, who)
    with pytest.raises(ValueError, match="unknown signal"):
        requested(["no_such_signal"], inputs, who)
    ok = offered(inputs)
    assert {s.name for s in requested(ok, inputs, who)} == set(ok)
    assert all(c.reads <= inputs for c in computations(requested(ok, inputs, who)))


def test_a_signal_with_an_unregistered_computation_or_input_is_refused_at_registration():
    from geoanatomy.measures.signal_registry import Signal
    with pytest.raises(ValueError, match="compute 'nobody'"):
        Signal("x", "metrics", "x", "ln_final", "first", "", "up", "candidate", frozenset({"hidden"}), "s", "w",
               "nobody")
    with pytest.raises(ValueError, match=r"reads \['gradient'\]"):
        Signal("x", "metrics", "x", "ln_final", "first", "", "up", "candidate", frozenset({"gradient"}), "s", "w",
               "core")
    with pytest.raises(ValueError, match="its computation 'ildr' reads"):
        Signal("x", "metrics", "ildr", "ln_final", "first", "", "up", "candidate", frozenset({"hidden"}), "s", "w",
               "ildr")
    assert sig.COMPUTATIONS["ildr"].reads == {"hidden", "labels"}
