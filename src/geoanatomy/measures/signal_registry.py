"""Every candidate precursor signal the benchmark scores, one entry each (torch-free).

An entry names the curve of a run's tables the signal is (table, measure, layer, position,
variant), the direction its event is read in (fixed here, from the source's own reading,
before any run was scored: "up" = a rise, "down" = a collapse), where it comes from, whether
it is a candidate or a reference line (the loss curve, the log-probability, a probe, a
clock), and how it is computed: ``compute`` names

* a computation of ``measures.signals.COMPUTATIONS`` (the cheap signals: the entry's rows
  come from that object, given a ``SignalState``), or
* ``"core"``: part of the rows every consumer writes anyway (RankMe, the mean share, the
  behaviour curves, the probes stage's probe), or
* ``"measure"``: an expensive measure of ``measures.registry`` (the measures stage).

``reads`` is the set of inputs (``measures.signals.INPUTS``) the computation needs. Each
consumer declares the inputs it offers (``stages.metrics.SIGNAL_INPUTS``, the monitor's,
the scanner's): it computes every requested signal whose inputs it offers by looping over
the entries' computations (``computations``), and refuses one it cannot by name
(``requested``). ``tests/measures/test_signal_conformance.py`` runs one battery over every
entry (known answer, finite, labelled, same seed same value, written by every consumer that
offers its inputs).

To add a signal: its formula and a ``Computation`` in ``measures.signals`` (or an expensive
measure's entry), an entry here, its known case in the conformance battery, a docs line
(docs/where-things-go.md).
"""
from __future__ import annotations

from dataclasses import dataclass

from .signals import COMPUTATIONS, INPUTS


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
    reads: frozenset      # inputs of measures.signals.INPUTS
    source: str
    what: str
    compute: str          # a key of measures.signals.COMPUTATIONS | core | measure
    cost_key: str = ""    # the timing the stage that computes it records (signal_timings_*.json)

    def __post_init__(self):
        if self.compute not in COMPUTATIONS and self.compute not in ("core", "measure"):
            raise ValueError(f"signal {self.name!r}: compute {self.compute!r} is none of "
                             f"{list(COMPUTATIONS)}, 'core' or 'measure'")
        bad = set(self.reads) - set(INPUTS)
        if bad:
            raise ValueError(f"signal {self.name!r}: reads {sorted(bad)}, not inputs of {list(INPUTS)}")
        if self.compute in COMPUTATIONS and set(self.reads) != COMPUTATIONS[self.compute].reads:
            raise ValueError(f"signal {self.name!r}: reads {sorted(self.reads)}, its computation "
                             f"{self.compute!r} reads {sorted(COMPUTATIONS[self.compute].reads)}")

    @property
    def needs(self) -> str:
        """The coarse reading of ``reads`` the benchmark table shows: gradients, window or state."""
        return "gradients" if "gradients" in self.reads else "window" if "window" in self.reads else "state"

    @property
    def computation(self):
        """Its ``measures.signals.Computation`` (None for core and measure signals)."""
        return COMPUTATIONS.get(self.compute)

    def select(self, df):
        """The rows of a run's table that are this signal's curve."""
        m = ((df["measure"] == self.measure) & (df["layer"].astype(str) == self.layer)
             & (df["position"].astype(str) == self.position) & (df["variant"].fillna("").astype(str) == self.variant))
        return df[m]


_H = ("ln_final", "first")       # the headline layer and position of the hidden-state signals
_HID = frozenset({"hidden"})
_BEH = frozenset({"behaviour"})


def _C(name: str) -> frozenset:
    """The inputs a computation of ``measures.signals.COMPUTATIONS`` reads."""
    return COMPUTATIONS[name].reads

# ---- candidates from the field (cheap: every checkpoint, metrics stage)
_CHEAP: tuple[Signal, ...] = (
    Signal("loss_cov_heat", "metrics", "loss_cov_heat", "output", "answer", "window", "up", "candidate", _C("loss_cov"),
           "arXiv 2603.29805 (2-datapoint reduced density matrix)",
           "heat capacity of the covariance of per-example held-out losses over a trailing window",
           "loss_cov", cost_key="loss_cov"),
    Signal("loss_cov_pr", "metrics", "loss_cov_pr", "output", "answer", "window", "down", "candidate", _C("loss_cov"),
           "arXiv 2603.29805", "participation ratio of the same covariance (a low-dimensional reorganisation)",
           "loss_cov", cost_key="loss_cov"),
    Signal("ildr", "metrics", "ildr", *_H, "", "up", "candidate", _C("ildr"), "arXiv 2604.20923",
           "inter/intra-class distance ratio of the final-layer state, classes = first answer token", "ildr",
           cost_key="ildr"),
    Signal("update_gap", "metrics", "update_gap", "all_params", "none", "window", "up", "candidate", _C("update_gap"),
           "arXiv 2603.28964 (spectral edge)",
           "sigma_1/sigma_2 of the per-step parameter updates of a trailing window", "update_gap",
           cost_key="update_gap"),
    Signal("head_erank_sv", "metrics", "head_erank", "all_heads", "first", "sv", "down", "candidate", _C("head_erank"),
           "skydancerosel/spectral-probe-circuits",
           "per-head effective rank of attention outputs, RankMe's convention, mean over heads", "head_erank",
           cost_key="head_erank"),
    Signal("head_erank_sv2", "metrics", "head_erank", "all_heads", "first", "sv2", "down", "candidate",
           _C("head_erank"),
           "skydancerosel/spectral-probe-circuits",
           "the same in the squared-singular-value convention of per-head work", "head_erank", cost_key="head_erank"),
    Signal("stable_rank", "metrics", "stable_rank", "all_blocks", "none", "", "down", "candidate", _C("stable_rank"),
           "weight spectra (stable rank; WeightWatcher's family)",
           "mean stable rank ||W||_F^2/||W||_2^2 of the blocks' weight matrices", "stable_rank",
           cost_key="stable_rank"),
    Signal("weight_norm", "metrics", "weight_norm", "all_params", "none", "", "down", "candidate", _C("weight_norm"),
           "Nanda et al. 2023 (progress measures for grokking)", "L2 norm of every parameter",
           "weight_norm", cost_key="weight_norm"),
)
# ---- the study's representation measures and the references
_STATE: tuple[Signal, ...] = (
    Signal("rankme_uncentred", "metrics", "rankme", *_H, "uncentred", "down", "candidate", _HID,
           "Garrido et al. 2023; the study", "RankMe as defined", "core", cost_key="geometry"),
    Signal("rankme_centred", "metrics", "rankme", *_H, "centred", "down", "candidate", _HID,
           "the project's centred variant", "RankMe of the centred matrix", "core", cost_key="geometry"),
    Signal("mean_share", "metrics", "mean_share", *_H, "", "up", "candidate", _HID,
           "the project", "share of the squared norm carried by the mean row", "core", cost_key="geometry"),
    # ---- references: behaviour and a probe
    Signal("loss", "metrics", "loss", "output", "answer", "train", "down", "reference", _BEH,
           "the loss curve", "answer loss on the fixed training sample", "core", cost_key="behaviour_train"),
    Signal("logprob", "metrics", "logprob_per_token", "output", "answer", "", "up", "reference", _BEH,
           "behaviour", "held-out per-token answer log-probability", "core", cost_key="behaviour"),
    Signal("probe", "probes", "probe_accuracy", *_H, "logreg", "up", "reference",
           frozenset({"hidden", "labels", "probes"}),
           "linear probe", "held-out accuracy of a linear probe of the first answer token", "core", cost_key=""),
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
                  "down" if t.direction == "collapse" else "up", "candidate", frozenset({"gradients"}), source, what,
                  "measure", cost_key=kind)


SIGNALS: tuple[Signal, ...] = _CHEAP + tuple(_expensive(n, *v) for n, v in _EXPENSIVE.items()) + _STATE
SIGNAL_BY_NAME = {s.name: s for s in SIGNALS}
# the clock: an event at a fixed step for every run (the benchmark builds it; no curve)
CLOCK = "clock"


def signal(name: str) -> Signal:
    """The entry ``name``; ValueError naming the allowed ones otherwise."""
    if name not in SIGNAL_BY_NAME:
        raise ValueError(f"unknown signal {name!r}; allowed: {list(SIGNAL_BY_NAME)}")
    return SIGNAL_BY_NAME[name]


def offered(inputs) -> list[str]:
    """The candidate signals a consumer offering ``inputs`` computes (their reads within them)."""
    return [s.name for s in SIGNALS if s.kind == "candidate" and s.reads <= frozenset(inputs)]


def requested(names, inputs, who: str) -> tuple[Signal, ...]:
    """The entries ``names`` a consumer (``who``, offering ``inputs``) is asked for; a ValueError
    naming each unknown signal, or each one whose inputs it does not offer (and what it lacks)."""
    names = (names,) if isinstance(names, str) else tuple(names or ())
    unknown = [n for n in names if n not in SIGNAL_BY_NAME]
    if unknown:
        raise ValueError(f"{who}: unknown signal(s) {unknown}; registered: {list(SIGNAL_BY_NAME)}")
    lack = {n: sorted(SIGNAL_BY_NAME[n].reads - frozenset(inputs)) for n in names}
    lack = {n: v for n, v in lack.items() if v}
    if lack:
        why = "; ".join(f"{n} reads {', '.join(v)}" for n, v in lack.items())
        raise ValueError(f"{who}: {list(lack)} cannot be computed by it ({why}, which it does not offer); "
                         f"it computes {offered(inputs)}")
    return tuple(SIGNAL_BY_NAME[n] for n in names)


def computations(signals) -> list:
    """The distinct computations (``measures.signals.COMPUTATIONS``, in their order) the given
    entries need; core and measure signals need none of them."""
    keys = {s.compute for s in signals}
    return [c for k, c in COMPUTATIONS.items() if k in keys]
