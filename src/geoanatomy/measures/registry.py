"""The expensive measures, one entry each (torch-free: the measure modules are imported
when a measure is computed, so the events stage and the cost model read this without torch).

An entry says everything the project knows about one kind in ``measures.which``: the
table measures it writes to measures.csv, each with the direction of its transition
("collapse": falls, detected as RankMe's; "rise": grows, detected mirrored) and the
variant its precursor.json entry reads (headline variant); its settings block in the
``measures:`` config with the defaults; the seeded training sample it uses (pool); the
function giving its rows at one checkpoint; its cost per checkpoint (``geoanatomy.throughput``).

=========  ===============================  =========  =================  ===========
kind       table measures                   direction  headline variant   config block
=========  ===============================  =========  =================  ===========
grad_rank  grad_erank, grad_cov_erank       collapse   roy_vetterli       grad_rank
hessian    hessian_top                      rise       top_eigenvalue     hessian
llc        llc                              rise       sgld               llc
commutator commutator                       rise       defect             commutator
=========  ===============================  =========  =================  ===========
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

# settings every expensive-measure row carries
COMMON_SETTINGS = {"loss": "answer cross-entropy, mean over answer tokens",
                   "data": "fixed training-distribution sample"}


@dataclass(frozen=True)
class TableMeasure:
    """One measure name of measures.csv: how its events are read."""
    name: str
    direction: str            # "collapse" | "rise"
    headline_variant: str


@dataclass(frozen=True)
class Measure:
    """One expensive measure kind (module doc)."""
    name: str                               # the kind in measures.which
    writes: tuple[TableMeasure, ...]
    config_key: str                         # its settings block in measures: (and its pool's name)
    defaults: dict
    pool_size_key: str                      # the setting that sizes its training sample
    seeded: bool                            # gets a per-run random seed
    compute: Callable                       # (model, pool, n_answer, settings, seed, given) -> rows
    cost: Callable                          # (settings, size, positions, device) -> seconds per checkpoint
    uses: tuple[str, ...] = ()              # table measures of other kinds it reads at the same checkpoint
    settings_schema: dict = field(default_factory=dict, compare=False)   # JSON schema of each setting
    tiny: dict = field(default_factory=dict, compare=False)   # settings for a seconds-long run (tests, smoke)

    def tiny_settings(self) -> dict:
        """The defaults with ``tiny`` over them: what a conformance test or a smoke run uses."""
        return {**self.defaults, **self.tiny}

    def settings_block_schema(self) -> dict:
        """The JSON schema of its ``measures.<config_key>`` block (config.schema.load_schema)."""
        return {"type": "object", "additionalProperties": False, "properties": dict(self.settings_schema)}

    def rows(self, model, pool, n_answer: int, settings: dict, seed: int | None, given: dict | None = None
             ) -> list[dict]:
        """Rows (without run/step) at the model's current weights. ``given``: the values at this
        checkpoint of the table measures it declares in ``uses`` that were measured before it
        (the LLC reads the Hessian's top eigenvalue); others are not passed."""
        given = {k: v for k, v in (given or {}).items() if k in self.uses}
        return self.compute(model, pool, n_answer, settings, seed, given)

    def seconds_per_checkpoint(self, settings: dict, size: str, positions: int, device: str) -> float:
        """Expected seconds of this measure at one checkpoint (worst case)."""
        return self.cost(settings, size, positions, device)


def row(measure: str, variant: str, n, value, settings: dict) -> dict:
    """One measures.csv row (without run/step) of an all-parameter measure."""
    return {"measure": measure, "layer": "all_params", "layer_index": -1, "position": "answer",
            "variant": variant, "n_samples": int(n), "value": float(value), "settings": settings}


# -------------------------------------------------------------------- grad_rank
def _grad_rank_rows(model, pool, n_answer, g, seed, given):
    from .grad_rank import grad_ranks
    r = grad_ranks(model, pool, n_answer, eps=float(g["rankme_eps"]), method=g["method"],
                   max_bytes=int(g["max_mbytes"]) * 2**20)
    st = dict(COMMON_SETTINGS, n_samples=r["n_samples"], eps=r["eps"], method=r["method"], n_params=r["n_params"],
              param_groups=r["param_groups"], gram="float64 via G G^T (N x N)",
              top_singular_value=r["top_singular_value"])
    rows = [row("grad_erank", v, r["n_samples"], val, dict(st, centred=False)) for v, val in r["grad"].items()]
    rows += [row("grad_cov_erank", v, r["n_samples"], val, dict(st, centred=True)) for v, val in r["grad_cov"].items()]
    return rows


def _grad_rank_cost(g, size, positions, device):
    from ..throughput import grad_rank_flops, op_seconds
    return op_seconds("grad_rank", size, grad_rank_flops(size, int(g["n_samples"]), positions), device)


# ---------------------------------------------------------------------- hessian
def _hessian_rows(model, pool, n_answer, h, seed, given):
    from .hessian import hessian_top
    r = hessian_top(model, pool, n_answer, max_iter=int(h["max_iter"]), tol=float(h["tol"]), seed=seed,
                    method=h["method"])
    st = dict(COMMON_SETTINGS, batch_size=r["batch_size"], max_iter=r["max_iter"], tol=r["tol"],
              iterations=r["iterations"], converged=r["converged"], seed=r["seed"], batch_loss=r["loss"],
              n_params=r["n_params"], mode="eval", attention="math",
              method=f"{h['method']} on double-backward Hessian-vector products")
    return [row("hessian_top", "top_eigenvalue", r["batch_size"], r["value"], st)]


def _hessian_cost(h, size, positions, device):
    from ..throughput import hvp_flops, op_seconds
    return int(h["max_iter"]) * op_seconds("hvp", size, hvp_flops(size, int(h["batch_size"]), positions), device)


# -------------------------------------------------------------------------- llc
def _llc_rows(model, pool, n_answer, c, seed, given):
    from .llc import llc_at_checkpoint
    r = llc_at_checkpoint(model, pool, n_answer, eps=float(c["eps"]), gamma=float(c["gamma"]),
                          n_beta=None if c["n_beta"] is None else float(c["n_beta"]),
                          chains=int(c["chains"]), draws=int(c["draws"]), burnin=int(c["burnin"]),
                          batch_size=int(c["batch_size"]), seed=seed,
                          disagree_threshold=float(c["disagree_threshold"]))
    st = dict(COMMON_SETTINGS, **{k: r[k] for k in ("eps", "gamma", "n_beta", "n_beta_rule", "chains", "draws",
                                                    "burnin", "batch_size", "n_data", "seed", "std", "per_chain",
                                                    "init_loss", "mean_sampled_loss", "flags", "clean",
                                                    "disagree_threshold", "drift")})
    # each chain's minibatch loss at every SGLD step (burn-in first): the measures stage moves it
    # out of the row into llc_traces.csv (``stages.measures.TRACE_KEY``)
    st["loss_trace"] = [[float(x) for x in chain] for chain in r["loss_trace"]]
    lam_top = given.get("hessian_top")
    if lam_top is not None and math.isfinite(lam_top):
        # SGLD on a quadratic of curvature n_beta*lam is stable iff eps*n_beta*lam < 4
        st["eps_nbeta_lambda"] = r["eps"] * r["n_beta"] * lam_top
        if st["eps_nbeta_lambda"] >= 4 and "unstable_step" not in st["flags"]:
            st["flags"] = st["flags"] + ["unstable_step"]
            st["clean"] = False
    return [row("llc", "sgld", r["n_data"], r["value"], st)]


def _llc_cost(c, size, positions, device):
    from ..throughput import forward_flops_per_token, op_seconds, sgld_step_flops
    n_sgld = int(c["chains"]) * (int(c["draws"]) + int(c["burnin"]))
    return (n_sgld * op_seconds("sgld", size, sgld_step_flops(size, int(c["batch_size"]), positions), device)
            + op_seconds("eval", size, forward_flops_per_token(size, positions) * int(c["n_data"]) * positions,
                         device))


# ------------------------------------------------------------------- commutator
def _commutator_rows(model, pool, n_answer, c, seed, given):
    import torch

    from ..model import answer_loss
    from .signals import commutator_defect
    params = list(model.parameters())
    half = pool.shape[0] // 2
    batches = {"A": pool[:half], "B": pool[half:2 * half]}
    theta0 = torch.cat([p.detach().reshape(-1) for p in params]).clone()

    def load(theta):
        with torch.no_grad():
            i = 0
            for p in params:
                p.copy_(theta[i:i + p.numel()].view_as(p))
                i += p.numel()

    def grad(which, theta):
        load(theta)
        g = torch.autograd.grad(answer_loss(model, batches[which], n_answer), params)
        return torch.cat([x.reshape(-1) for x in g])

    was = model.training
    model.eval()
    try:
        r = commutator_defect(grad, theta0, eta=float(c["eta"]))
    finally:
        load(theta0)
        model.train(was)
    st = dict(COMMON_SETTINGS, eta=r["eta"], batch_size=half, grad_cos=r["grad_cos"], norm_a=r["norm_a"],
              norm_b=r["norm_b"], definition="||theta_AB - theta_BA|| / (eta^2 ||g_A|| ||g_B||), two fixed batches")
    return [row("commutator", "defect", 2 * half, r["value"], st)]


def _commutator_cost(c, size, positions, device):
    from ..throughput import op_seconds, sgld_step_flops
    return 4 * op_seconds("sgld", size, sgld_step_flops(size, int(c["n_samples"]) // 2, positions), device)


_POSINT = "#/$defs/posint"
_ENTRIES = (
    Measure("grad_rank", (TableMeasure("grad_erank", "collapse", "roy_vetterli"),
                          TableMeasure("grad_cov_erank", "collapse", "roy_vetterli")),
            "grad_rank", {"n_samples": 64, "method": "vmap", "max_mbytes": 256, "rankme_eps": 1e-7},
            "n_samples", False, _grad_rank_rows, _grad_rank_cost,
            settings_schema={
                "n_samples": {"type": "integer", "minimum": 2, "maximum": 4096,
                              "description": "per-sample gradients N (ranks are capped by N)"},
                "method": {"type": "string", "enum": ["vmap", "loop"]},
                "max_mbytes": {"$ref": _POSINT, "maximum": 65536, "description": "memory cap for N x P float32"
                               " gradients; above it parameters are processed in groups"},
                "rankme_eps": {"type": "number", "minimum": 0}},
            tiny={"n_samples": 6}),
    Measure("hessian", (TableMeasure("hessian_top", "rise", "top_eigenvalue"),),
            "hessian", {"batch_size": 32, "max_iter": 100, "tol": 1e-3, "method": "lanczos"},
            "batch_size", True, _hessian_rows, _hessian_cost,
            settings_schema={
                "batch_size": {"$ref": _POSINT, "maximum": 8192},
                "max_iter": {"$ref": _POSINT, "maximum": 100000, "description": "power iterations (PyHessian: 100)"},
                "tol": {"type": "number", "exclusiveMinimum": 0, "description": "relative tolerance (PyHessian: 1e-3)"},
                "method": {"type": "string", "enum": ["lanczos", "power"],
                           "description": "Lanczos (the same products and stopping rule as power iteration, estimate"
                                          " from the whole Krylov space: fewer products) or power iteration"
                                          " (PyHessian's)"}},
            tiny={"batch_size": 6, "max_iter": 8}),
    Measure("llc", (TableMeasure("llc", "rise", "sgld"),),
            "llc", {"eps": 3e-5, "gamma": 1e4, "n_beta": 30.0, "chains": 2, "draws": 20, "burnin": 5,
                    "batch_size": 32, "n_data": 512, "disagree_threshold": 0.5},
            "n_data", True, _llc_rows, _llc_cost, uses=("hessian_top",),
            settings_schema={
                "eps": {"type": "number", "exclusiveMinimum": 0, "description": "SGLD step size"},
                "gamma": {"type": "number", "minimum": 0, "description": "localization strength"},
                "n_beta": {"oneOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "null"}],
                           "description": "inverse temperature; null = B / ln B"},
                "chains": {"$ref": _POSINT, "maximum": 1000},
                "draws": {"$ref": _POSINT, "maximum": 100000},
                "burnin": {"$ref": "#/$defs/count", "maximum": 100000},
                "batch_size": {"type": "integer", "minimum": 2, "maximum": 8192},
                "n_data": {"$ref": _POSINT, "maximum": 100000,
                           "description": "fixed training-distribution pool the SGLD minibatches come from"},
                "disagree_threshold": {"type": "number", "exclusiveMinimum": 0,
                                       "description": "flag when std over chains / |llc| exceeds it"}},
            tiny={"chains": 2, "draws": 3, "burnin": 1, "batch_size": 4, "n_data": 16}),
    Measure("commutator", (TableMeasure("commutator", "rise", "defect"),),
            "commutator", {"n_samples": 64, "eta": 1e-3},
            "n_samples", False, _commutator_rows, _commutator_cost,
            settings_schema={
                "n_samples": {"type": "integer", "minimum": 2, "maximum": 8192,
                              "description": "two fixed training batches of n_samples / 2 examples"},
                "eta": {"type": "number", "exclusiveMinimum": 0,
                        "description": "the two gradient steps' size (arXiv 2602.16967: 1e-3)"}},
            tiny={"n_samples": 8}),
)

MEASURES: dict[str, Measure] = {m.name: m for m in _ENTRIES}
TABLE_MEASURES: dict[str, TableMeasure] = {t.name: t for m in _ENTRIES for t in m.writes}
DIRECTIONS = {name: t.direction for name, t in TABLE_MEASURES.items()}
HEADLINE_VARIANT = {name: t.headline_variant for name, t in TABLE_MEASURES.items()}


def measure(kind: str) -> Measure:
    """The registry entry of ``kind``; ValueError naming the allowed kinds otherwise."""
    if kind not in MEASURES:
        raise ValueError(f"unknown expensive measure {kind!r}; allowed: {list(MEASURES)}")
    return MEASURES[kind]
