"""DEFAULTS: every config key's default value, the only home of defaults; and ``Settings``, a
block of them as one frozen object (``events_settings`` here, ``analysis.settings.summary_settings``).

A plain dict, importing only the torch-free measure registry (each expensive measure's
settings defaults live in its entry), so the monitor, the CLI and the analysis can read
defaults without the config machinery (YAML, JSON schema); ``geoanatomy.config`` merges a
user config over it and re-exports it.
"""
from .measures.registry import MEASURES

# Every Pythia benchmark, the ``pythia.benchmarks`` default (geoanatomy.config.pythia.BENCHMARKS
# is the same list, built from its fixed and generated sets; a test keeps the two equal).
PYTHIA_BENCHMARKS = ["syntax", "semantics", "arithmetic", "icl", "factual", "reasoning", "general",
                     "deduction3", "deduction5", "deduction7"]

DEFAULTS: dict = {
    "seed": 0,
    "device": "auto",
    "results_dir": "results",
    "allow_results_outside_workdir": False,
    "keep_checkpoints": "all",
    "max_unpruned_runs": None,
    "check_disk": True,
    "tasks": {},
    "model": {"block_size": 64},
    # Settings that change numbers on a GPU, all off by default (geoanatomy.runtime.NUMERICS
    # documents them; a run that turns one on hashes it into its settings, train.json names all).
    "numerics": {"tf32": False, "mixed_precision": "off", "fused_attention_gpu": False},
    "train": {
        "steps": 2000, "batch_size": 64, "lr": 1e-3, "warmup": 100, "min_lr_frac": 0.1,
        "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.98, "grad_clip": 1.0, "checkpoint_dtype": "float32",
        "checkpoints": {"n_log": 30, "log_end": 0.1, "n_uniform": 50},
    },
    "size_overrides": {},
    "data": {"n_heldout": 1024, "heldout_frac": 0.25, "heldout_symmetric": True},
    "eval": {"n_samples": 200, "rankme_eps": 1e-7, "n_samples_by_size": {}},
    "events": {
        "layer": "ln_final", "position": "first", "variant": "uncentred",
        "acquisition_threshold": 0.5, "persist": 3, "detector": "matched",
        "onset_frac": 0.1, "extreme_tol": 0.05, "return_frac": 0.25,
        "collapse_drop": 0.3, "collapse_half": 0.5, "recovery_rise": 0.25,
        "transition": "floor", "precursor_min_gap_frac": 0.25,
        "logprob_margin": 0.1, "plateau_rule": "matched", "easy_max_step": 150,
        "floor_window": "loss_onset", "classes_file": None, "classes_sha256": None,
    },
    # Expensive measures on a schedule fixed before training (geoanatomy.stages.measures
    # documents every key): n_points checkpoints spread over the run by index.
    "measures": {
        "which": list(MEASURES),
        "sizes": ["nano", "micro", "small", "medium", "large", "xlarge"],
        "n_points": 20,
        # each measure's settings block: its registry entry's defaults (their one home)
        **{m.config_key: dict(m.defaults) for m in MEASURES.values()},
    },
    # Linear probes per layer and checkpoint (geoanatomy.stages.probes documents every key).
    "probes": {"sizes": ["nano", "micro", "small", "medium", "large", "xlarge"],
               "n_samples": 400, "test_frac": 0.5, "positions": "first",
               "C": 0.1, "max_iter": 100, "standardize": True},
    "threads": {"train": 1, "metrics": 1, "events": 1, "measures": 1, "probes": 1},
    # Runs trained together in one process (geoanatomy.stages.train_pack): train: K puts up to K
    # runs of one size in each training job; 1 = every run alone (on a CPU a pack saves each
    # job's start, not step time: benchmarks/bench_pack.py; on a GPU it fills the device).
    "pack": {"train": 1},
    # Cross-run analysis -> results/summary/ (geoanatomy.analysis documents every key).
    "summary": {"coincide_log10_tol": 0.1, "exact_max_n": 10, "n_resamples": 20000, "seed": 0,
                "alpha": 0.05, "topdown_require_collapse": True, "n_permutations": 10000,
                "n_bootstrap": 2000, "verdict_min_units": 5, "headline_variant": "centred",
                "equivalence_decades": 0.1, "slope_equivalence": 0.1, "mod_floor_reference": 2.0,
                "mean_direction_rho": 0.9, "min_power": 0.8, "power_populations": 200,
                "power_multiples": [0.25, 0.5, 0.75, 0.9, 1, 2, 4], "allow_mixed_settings": False,
                "frozen_rules": None, "allow_unfrozen": False},
    # Pythia validation branch (geoanatomy.config.pythia documents every key).
    "pythia": {
        "enabled": False, "models": [], "revisions": "all", "benchmarks": list(PYTHIA_BENCHMARKS),
        "n_items": {}, "deduction_seed": 0, "scoring": "sum", "layer": "ln_final",
        "delete_cache": True, "cache_dir": None, "dtype": "float32", "batch_size": 16,
        "device": "auto", "threads": 1,
    },
}


class Settings(dict):
    """A config block as one read-only dict: every key of the block present (the defaults filled
    in), none changeable after it is built (``replace`` gives a new one). JSON-serialisable as a
    dict; ``block`` names it in errors."""

    def __init__(self, data=(), block: str = "summary"):
        super().__init__(data)
        self.block = block

    def _frozen(self, *a, **k):
        raise TypeError(f"{self.block} settings are frozen: build new ones with .replace(key=value)")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = _frozen   # type: ignore[assignment]

    def replace(self, **changes) -> "Settings":
        """A copy with ``changes`` (known keys only)."""
        unknown = sorted(set(changes) - set(self))
        if unknown:
            raise ValueError(f"{self.block} settings: unknown keys {unknown}; allowed: {sorted(self)}")
        return Settings({**self, **changes}, self.block)

    def __reduce__(self):                      # pickles (multiprocessing) as a plain copy
        return (Settings, (dict(self), self.block))


def events_settings(user: dict | None = None, **fixed) -> Settings:
    """The ``events:`` block as one frozen object: ``DEFAULTS["events"]`` updated by ``user`` (a
    resolved block, or a user's partial one) and then by ``fixed`` (what a caller sets itself: the
    headline layer and position of a scan). Unknown keys are an error naming them; types and
    ranges are the config schema's (checked where a user block enters: config load, the monitor)."""
    out = dict(DEFAULTS["events"])
    extra = sorted((set(user or {}) | set(fixed)) - set(out))
    if extra:
        raise ValueError(f"events settings: unknown keys {extra}; allowed: {sorted(out)}")
    if user and set(user) == set(out):
        out = dict(user)             # a resolved block keeps its order (the order precursor.json records)
    else:
        out.update(user or {})       # a partial one: the defaults' order, the user's values
    out.update(fixed)
    return Settings(out, "events")
