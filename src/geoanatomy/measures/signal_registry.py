"""Every candidate precursor signal the benchmark scores, one entry each (torch-free).

An entry names the curve of a run's tables the signal is (table, measure, layer, position,
variant), the direction its event is read in (fixed here, from the source's own reading,
before any run was scored: "up" = a rise, "down" = a collapse), where it comes from, what it
needs (``needs``: "state" = one checkpoint's weights and a fixed input sample; "window" = the
last few checkpoints as well; "gradients" = gradients on training batches; "training" = the
training loop's own numbers), and whether it is a candidate or a reference line (the loss
curve, the log-probability, a probe, a clock). The monitor and the checkpoint scanner offer
the entries whose ``needs`` is "state" or "window" (no training-time state).

The formulas: ``measures.signals`` (cheap signals, written by the metrics stage at every
checkpoint) and ``measures.registry`` (the expensive measures, at the fixed 20 checkpoints).
To add a signal: its formula in ``measures.signals`` with a known-answer test, its rows in
the metrics stage (or an expensive measure's entry), and an entry here (docs/benchmark.md).
"""
from __future__ import annotations

from dataclasses import dataclass



@dataclass(frozen=True)
class Signal:
    """One scored curve (module doc)."""
    name: str
    table: str            # metrics | measures | probes
    measure: str
    layer: str
    position: str
    variant: str
    direction: str        # up | down
    kind: str             # candidate | reference
    needs: str            # state | window | gradients | training
    source: str
    what: str
    cost_key: str = ""    # the timing the stage that computes it records (signal_timings_*.json)

    def select(self, df):
        """The rows of a run's table that are this signal's curve."""
        m = ((df["measure"] == self.measure) & (df["layer"].astype(str) == self.layer)
             & (df["position"].astype(str) == self.position) & (df["variant"].fillna("").astype(str) == self.variant))
        return df[m]

    @property
    def monitorable(self) -> bool:
        return self.needs in ("state", "window")


_H = ("ln_final", "first")       # the headline layer and position of the hidden-state signals
# ---- candidates from the field (cheap: every checkpoint, metrics stage)
_CHEAP: tuple[Signal, ...] = (
    Signal("loss_cov_heat", "metrics", "loss_cov_heat", "output", "answer", "window", "up", "candidate", "window",
           "arXiv 2603.29805 (2-datapoint reduced density matrix)",
           "heat capacity of the covariance of per-example held-out losses over a trailing window",
           cost_key="loss_cov"),
    Signal("loss_cov_pr", "metrics", "loss_cov_pr", "output", "answer", "window", "down", "candidate", "window",
           "arXiv 2603.29805", "participation ratio of the same covariance (a low-dimensional reorganisation)",
           cost_key="loss_cov"),
    Signal("ildr", "metrics", "ildr", *_H, "", "up", "candidate", "state", "arXiv 2604.20923",
           "inter/intra-class distance ratio of the final-layer state, classes = first answer token", cost_key="ildr"),
    Signal("update_gap", "metrics", "update_gap", "all_params", "none", "window", "up", "candidate", "window",
           "arXiv 2603.28964 (spectral edge)",
           "sigma_1/sigma_2 of the per-step parameter updates of a trailing window", cost_key="update_gap"),
    Signal("head_erank_sv", "metrics", "head_erank", "all_heads", "first", "sv", "down", "candidate", "state",
           "skydancerosel/spectral-probe-circuits",
           "per-head effective rank of attention outputs, RankMe's convention, mean over heads", cost_key="head_erank"),
    Signal("head_erank_sv2", "metrics", "head_erank", "all_heads", "first", "sv2", "down", "candidate", "state",
           "skydancerosel/spectral-probe-circuits",
           "the same in the squared-singular-value convention of per-head work", cost_key="head_erank"),
    Signal("stable_rank", "metrics", "stable_rank", "all_blocks", "none", "", "down", "candidate", "state",
           "weight spectra (stable rank; WeightWatcher's family)",
           "mean stable rank ||W||_F^2/||W||_2^2 of the blocks' weight matrices", cost_key="stable_rank"),
)
# ---- the study's representation measures and the references
_STATE: tuple[Signal, ...] = (
    Signal("rankme_uncentred", "metrics", "rankme", *_H, "uncentred", "down", "candidate", "state",
           "Garrido et al. 2023; the study", "RankMe as defined", cost_key="geometry"),
    Signal("rankme_centred", "metrics", "rankme", *_H, "centred", "down", "candidate", "state",
           "the project's centred variant", "RankMe of the centred matrix", cost_key="geometry"),
    Signal("mean_share", "metrics", "mean_share", *_H, "", "up", "candidate", "state",
           "the project", "share of the squared norm carried by the mean row", cost_key="geometry"),
    # ---- references: behaviour and a probe
    Signal("loss", "metrics", "loss", "output", "answer", "train", "down", "reference", "state",
           "the loss curve", "answer loss on the fixed training sample", cost_key="behaviour_train"),
    Signal("logprob", "metrics", "logprob_per_token", "output", "answer", "", "up", "reference", "state",
           "behaviour", "held-out per-token answer log-probability", cost_key="behaviour"),
    Signal("probe", "probes", "probe_accuracy", *_H, "logreg", "up", "reference", "state",
           "linear probe", "held-out accuracy of a linear probe of the first answer token", cost_key=""),
)
# the expensive measures scored (measures.csv, the fixed 20 checkpoints; nano only in the study):
# curve, direction and variant from their entry in measures.registry, the one home of those facts
_EXPENSIVE = {
    "commutator": ("arXiv 2602.16967", "commutator defect of two gradient steps on fixed training batches"),
    "grad_erank": ("the study (per-sample gradient effective rank)", "effective rank of per-sample gradients"),
    "hessian_top": ("the study (sharpness)", "top Hessian eigenvalue"),
    "llc": ("the study (local learning coefficient)", "local learning coefficient (SGLD)"),
}


def _expensive(name: str, source: str, what: str) -> Signal:
    from .registry import MEASURES, TABLE_MEASURES
    t = TABLE_MEASURES[name]
    kind = next(m.name for m in MEASURES.values() if t in m.writes)
    return Signal(name, "measures", name, "all_params", "answer", t.headline_variant,
                  "down" if t.direction == "collapse" else "up", "candidate", "gradients", source, what, cost_key=kind)


SIGNALS: tuple[Signal, ...] = _CHEAP + tuple(_expensive(n, *v) for n, v in _EXPENSIVE.items()) + _STATE
SIGNAL_BY_NAME = {s.name: s for s in SIGNALS}
# the clock: an event at a fixed step for every run (the benchmark builds it; no curve)
CLOCK = "clock"


def signal(name: str) -> Signal:
    """The entry ``name``; ValueError naming the allowed ones otherwise."""
    if name not in SIGNAL_BY_NAME:
        raise ValueError(f"unknown signal {name!r}; allowed: {list(SIGNAL_BY_NAME)}")
    return SIGNAL_BY_NAME[name]


def monitorable() -> list[str]:
    """The signals a monitor or scanner can compute without training-time state."""
    return [s.name for s in SIGNALS if s.monitorable and s.table == "metrics" and s.kind == "candidate"]
