"""``verdict.csv``: the claims' rows (``analysis.claims``) assembled into one table: each row's
p Holm-adjusted within its family, its word by the rule it names (``RULES``, ``word``), its
power and its claim's false rate from verdict_power.csv (``analysis.power``), and its
stability over seed subsets; and the claims block of docs/analysis.md (``claims_markdown``).

Units. Every row is about units: task x level x size cells, the seeds of a cell nested in it
(one number per cell, the median over its seeds; ``analysis.units``). Intervals resample
cells, permutations permute cells within a size, sign tests and counts are over cells;
n_units counts cells and n_runs the runs in them. Shuffled-label control runs and diverged
runs are left out (controls.csv reports the controls). The mixture protocol's rows
(analysis.protocols) are the same claims with models as units.

The headline precursor test is ``timing beyond the loss curve`` (analysis.claims.timing).
RankMe rows say their variant; the headline variant is ``summary.headline_variant``
(column ``headline``). An uncentred row whose curve follows the mean share carries
"mean-direction" in its detail.

Regenerate the table in docs/analysis.md: ``python -m geoanatomy.report.claims docs/analysis.md``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from .claims import CLAIMS, VERDICT_COLUMNS, SummaryView, measure_views, reading, runs_views
from .stats import CELLS
from .stats import holm

# ------------------------------------------------------------------------------- the rules
# Each row names its rule; ``word`` implements them, RULE is their text in verdict.csv's header
# and docs/analysis.md shows it (claims_markdown). Every rule needs n_units >= n_min and a p.
# "Not reproduced" is said only by a bound: the row's one-sided 95% bound (column ``bound``, the
# same alpha as "reproduced") excludes its claim's smallest effect of interest (column
# ``effect_of_interest``, fixed in the claim object with its reason); a significant effect
# whose bound excludes it is too small to be the one claimed, and is not reproduced either. A
# row whose claim has none can be reproduced or inconclusive, never "not reproduced" from a
# non-significant p.
RULES = {
    "greater": ("reproduced: Holm-adjusted one-sided p < alpha and the interval's lower end (intervals are two-sided"
                " 1 - 2 alpha, so that end is the one-sided 1 - alpha bound: one level) above the null value "
                "(the estimate, for statistics without an interval); not reproduced: the one-sided 95% upper bound "
                "(bound) below the smallest effect of interest (effect_of_interest)"),
    "less": "the mirror image of greater (the claimed effect is below the null value; the bound is a lower bound)",
    "greater+gain": ("reproduced: greater, and the second statistic's (the leave-one-out gain) 1 - 2 alpha interval"
                     " above 0;"
                     " not reproduced: as greater (the partial correlation's bound below the effect of interest)"),
    "equivalence": ("reproduced: adjusted two-one-sided-tests p < alpha and the 90% interval inside (-delta, delta);"
                    " not reproduced: the interval entirely outside it (lower end >= delta or upper end <= -delta)"),
    "lag": ("reproduced: adjusted p < alpha and the 90% interval's lower end (the one-sided 95% bound) above 0;"
            " not reproduced: its upper end (bound) below the effect of interest (delta: a lag the grid resolves)"),
    "lead": ("reproduced: as greater; not reproduced: the relative lead's one-sided 95% upper bound (bound) below"
             " the effect of interest (the precursor rule's clear gap f for 'much earlier', 0.1 for 'before')"),
    "descriptive": "no word, no Holm family, not counted: a share any early event passes",
}
WORDS = ("reproduced", "not reproduced", "inconclusive")
DESCRIPTIVE = "descriptive"
MAX_FALSE_RATE = 0.05
GATES = ("a row forced by the design (column forced_by: a floor window that hides the event) is inconclusive; a"
         " claim whose simulated false rate under any of its design nulls exceeds 0.05 at the grid's design cannot"
         " read reproduced (inconclusive, naming the null); a claim that reads 'not reproduced' in more than 0.05 of"
         " the populations simulated under its own alternative at the grid's design cannot read not reproduced (its"
         " smallest effect of interest is out of the design's reach: inconclusive, naming the alternative); a row of"
         " a secondary family (a family named '... "
         "(secondary)') reads reproduced only when a row of its primary family ('... (primary)') does (gatekeeping)")
RULE = ("; ".join(f"{k}: {v}" for k, v in RULES.items())
        + "; inconclusive otherwise, or with fewer than n_min units, or no test; gates: " + GATES)


def _num(x):
    """A finite float, or None (a missing or non-finite cell)."""
    x = pd.to_numeric(x, errors="coerce")
    return None if x is None or not np.isfinite(x) else float(x)


@dataclass(frozen=True)
class Evidence:
    """What a row's word is read from (``word``): the Holm-adjusted ``p``, the interval
    (``ci_lo``, ``ci_hi``; None: no interval, the estimate decides), the ``estimate``, the units
    it rests on, the null value (delta for equivalence), the row's rule, the second statistic's
    interval (rule greater+gain), and ``bound``, the one-sided 95% bound facing
    ``effect_of_interest``, the smallest effect the claim states (both None: the row cannot read
    "not reproduced")."""
    p: float | None
    ci_lo: float | None
    estimate: float | None
    n_units: int
    null_value: float = 0.0
    rule: str = "greater"
    ci_hi: float | None = None
    second_lo: float | None = None
    second_hi: float | None = None
    effect_of_interest: float | None = None
    bound: float | None = None

    @classmethod
    def of_row(cls, r) -> "Evidence":
        """The evidence of a verdict row (a dict or a namedtuple of VERDICT_COLUMNS)."""
        g = (lambda k: r.get(k)) if isinstance(r, dict) else (lambda k: getattr(r, k, None))
        num = _num
        return cls(num(g("p_holm")), num(g("ci_lo")), num(g("value")), int(g("n_units") or 0),
                   num(g("null_value")) or 0.0, g("rule") or "greater", num(g("ci_hi")), num(g("second_ci_lo")),
                   num(g("second_ci_hi")), num(g("effect_of_interest")), num(g("bound")))


def word(e: Evidence, alpha: float = 0.05, n_min: int = 5) -> str:
    """The verdict rules (``RULES``) on one row's ``Evidence``; ``alpha`` the level of the
    adjusted p, ``n_min`` the fewest units a word needs (summary.verdict_min_units)."""
    p, ci_lo, estimate, n_units, null_value, rule = e.p, e.ci_lo, e.estimate, e.n_units, e.null_value, e.rule
    ci_hi, second_lo, effect_of_interest, bound = e.ci_hi, e.second_lo, e.effect_of_interest, e.bound

    def ok(x):
        return x is not None and not (isinstance(x, float) and math.isnan(x))
    if rule == DESCRIPTIVE:
        return DESCRIPTIVE
    if n_units < n_min or not ok(p) or not ok(estimate):
        return "inconclusive"
    if rule == "equivalence":
        if not (ok(ci_lo) and ok(ci_hi)):
            return "inconclusive"
        if p < alpha and -null_value < ci_lo and ci_hi < null_value:
            return "reproduced"
        return "not reproduced" if ci_lo >= null_value or ci_hi <= -null_value else "inconclusive"
    sign = -1.0 if rule == "less" else 1.0
    if rule == "lag":
        beyond = ok(ci_lo) and ci_lo > 0
    else:
        lower = ci_hi if rule == "less" else ci_lo
        beyond = sign * (lower - null_value) > 0 if ok(lower) else sign * (estimate - null_value) > 0
        if rule == "greater+gain" and not (ok(second_lo) and second_lo > 0):
            beyond = False
    if ok(bound) and ok(effect_of_interest) and sign * (bound - effect_of_interest) < 0:
        return "not reproduced"          # even a significant effect is smaller than the one claimed
    if p < alpha and beyond:
        return "reproduced"
    return "inconclusive"


def bound_text(rule: str, bound, effect_of_interest, verdict: str) -> str:
    """What a row's bound excludes and what it does not, in words ("" without one)."""
    if rule in ("equivalence", DESCRIPTIVE) or bound is None or effect_of_interest is None:
        return ""
    rel, other = ("<=", ">=") if rule == "less" else (">=", "<=")
    if verdict == "not reproduced":
        return f"one-sided 95% bound {bound:.3g}: excludes an effect {rel} {effect_of_interest:g}"
    return (f"one-sided 95% bound {bound:.3g}: does not exclude an effect of {effect_of_interest:g} (the smallest of"
            f" interest)")


def _rows(reads: str, views) -> list[dict]:
    """The rows of the claims that read ``reads``: view by view (one per measure for the
    per-measure claims), and within a view in CLAIMS order."""
    claims = reading(reads)
    return [r.as_dict() for v in views for c in claims for r in c.rows(v)]


def behaviour_claims(pres: list[dict], st: dict) -> list[dict]:
    """Rows of the claims that read the runs (acquisition rate, log-prob before accuracy,
    probes before behaviour, the floors across sizes)."""
    return _rows("runs", runs_views(pres, st))


def precursor_claims(rows: pd.DataFrame, st: dict, protocol: str = "single-task", cluster_cols=CELLS,
                     perm_group: str = "size") -> list[dict]:
    """Rows of the per-measure claims from the per-run x per-measure long table
    (``rates.measure_rows``). ``cluster_cols``: the units (cells; a mixture's models);
    ``perm_group``: permutations permute units within its values."""
    return _rows("measure", measure_views(rows, st, protocol, cluster_cols, perm_group))


def json_claims(jsons: dict, st: dict) -> list[dict]:
    """Rows for the floors, scale, top-down and prediction claims from the summary JSON files
    (floor_summary.json, scale_invariance.json, top_down_summary.json, prediction.json), for
    both RankMe variants. A statistic that could not be computed gives an inconclusive row
    saying why, except a cross-size row of a level the grid has at one size only when the
    claim has rows at other levels (nothing to pair: the grid never asked it there)."""
    rows = _rows("summary", [SummaryView(jsons, st)])

    def empty(r):
        return r["n_units"] == 0 and " level " in f" {r['statistic']}" and "<" in str(r.get("detail") or "")
    asked = {(r["claim"], r["measure"]) for r in rows if not empty(r)}
    return [r for r in rows if not (empty(r) and (r["claim"], r["measure"]) in asked)]


def finish(rows: list[dict], st: dict, power: pd.DataFrame | None = None) -> pd.DataFrame:
    """Holm-adjust p within each family (descriptive rows have none), fill each row's smallest
    effect of interest from its claim, apply each row's rule (``word``) and the gates
    (``GATES``: a claim's false rate under its design nulls, from the power table when given;
    the primary family before a secondary one), say what each bound excludes, and write each
    row's power (at the largest simulated design with no more cells than the row) and its
    claim's false rate; a row whose power is below ``summary.min_power`` is underpowered (a
    column: power no longer turns a non-significant row into a word)."""
    df = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    alpha, n_min = float(st["alpha"]), int(st["verdict_min_units"])
    for fam, g in df.groupby("family", sort=False):
        if not fam:
            continue
        ps = pd.to_numeric(g["p"], errors="coerce").astype(float).to_numpy()
        ok = np.isfinite(ps)
        adj = np.full(len(ps), np.nan)
        if ok.any():
            adj[ok] = np.asarray(holm(ps[ok]), dtype=float)
        df.loc[g.index, "p_holm"] = adj
    eoi = {c.name: c.effect_of_interest for c in CLAIMS}
    df["effect_of_interest"] = [e if e == e and e is not None else eoi.get(c)
                                for c, e in zip(df["claim"], df["effect_of_interest"])]

    df["verdict"] = [word(Evidence.of_row(r), alpha, n_min) for r in df.itertuples()]
    notes = [[] for _ in range(len(df))]
    for i, r in enumerate(df.itertuples()):
        if isinstance(r.forced_by, str) and r.forced_by and r.verdict != DESCRIPTIVE:
            if r.verdict != "inconclusive":
                notes[i].append(f"would read {r.verdict}, but forced by {r.forced_by}")
            df.loc[df.index[i], "verdict"] = "inconclusive"
    fr = {}
    if power is not None and len(power):
        fr = false_rates(power)
        worst = {k: max(v.items(), key=lambda kv: kv[1]) for k, v in fr.items() if v}
        for i, r in enumerate(df.itertuples()):
            w = worst.get((r.claim, r.event if isinstance(r.event, str) else "")) or worst.get((r.claim, ""))
            if r.verdict == "reproduced" and w and w[1] > MAX_FALSE_RATE:
                df.loc[df.index[i], "verdict"] = "inconclusive"
                notes[i].append(f"cannot exclude the {w[0]} null: its test reads reproduced in {w[1]:.0%} of"
                                " populations simulated on this grid's design")
        refuting = refutation_rates(power)
        for i, r in enumerate(df.itertuples()):
            w = refuting.get((r.claim, r.event if isinstance(r.event, str) else "")) or refuting.get((r.claim, ""))
            if df.loc[df.index[i], "verdict"] == "not reproduced" and w and w[1] > MAX_FALSE_RATE:
                df.loc[df.index[i], "verdict"] = "inconclusive"
                notes[i].append(f"its smallest effect of interest is out of this design's reach: under the claim's own"
                                f" alternative ({w[0]}) the test reads not reproduced in {w[1]:.0%} of populations"
                                " simulated on this grid's design")
    primaries = {f[:-len(" (primary)")] for f, v in zip(df["family"], df["verdict"])
                 if isinstance(f, str) and f.endswith(" (primary)") and v == "reproduced"}
    for i, r in enumerate(df.itertuples()):
        fam = r.family if isinstance(r.family, str) else ""
        if fam.endswith(" (secondary)") and r.verdict == "reproduced" and fam[:-len(" (secondary)")] not in primaries:
            df.loc[df.index[i], "verdict"] = "inconclusive"
            notes[i].append("gate closed: the primary row is not reproduced, so the secondary family is not read")
        t = bound_text(r.rule, _num(r.bound), _num(r.effect_of_interest), df.loc[df.index[i], "verdict"])
        if t:
            notes[i].append(t)
    df["detail"] = [("; ".join(([d] if isinstance(d, str) and d else []) + n)) if n else d
                    for d, n in zip(df["detail"], notes)]
    if power is not None and len(power):
        bound = float(st["min_power"])
        curves = power_curves(power)
        pw = [power_at(curves.get(r.claim), int(r.n_units or 0)) for r in df.itertuples()]
        df["power"] = [p for p, _ in pw]
        df["false_rate"] = [max((fr.get((c, e if isinstance(e, str) else "")) or fr.get((c, "")) or {}).values(),
                                default=None) for c, e in zip(df["claim"], df["event"])]
        df["underpowered"] = [None if p is None else bool(p < bound) for p, _ in pw]
    return df


# ------------------------------------------- reading verdict_power.csv (analysis.power)
ROLE_NULL, ROLE_ALT = "H0 (false rate)", "H1 (power)"      # the table's ``role`` column


def power_by_claim(table: pd.DataFrame) -> dict:
    """claim -> power at the grid's design (the rate of "reproduced" under its alternatives;
    for a claim with several events or alternatives, the smallest)."""
    a = table[(table["role"] == ROLE_ALT) & (table["design"] == "grid")]
    return {c: float(g["reproduced"].min()) for c, g in a.groupby("claim")}


def power_curves(table: pd.DataFrame) -> dict:
    """claim -> [(units, power)] over the table's designs, ascending in units (the cells the
    claim's rows count in that design: column n_units, n_cells in older tables; power: the
    smallest rate of "reproduced" over the claim's events and alternatives at that design)."""
    a = table[table["role"] == ROLE_ALT]
    col = "n_units" if "n_units" in a.columns else "n_cells"
    out = {}
    for c, g in a.groupby("claim"):
        g = g.assign(_n=pd.to_numeric(g[col], errors="coerce")).dropna(subset=["_n"])
        out[c] = [(int(k), float(h["reproduced"].min())) for k, h in g.groupby("_n")]
    return out


def power_at(curve, n_units: int):
    """(power, cells) of the largest simulated design with at most ``n_units`` cells (power
    grows with cells, so this is the conservative reading); (None, None) when every simulated
    design is larger than the row or the claim was not simulated."""
    fits = [(pw, k) for k, pw in (curve or []) if k <= n_units]
    return fits[-1] if fits else (None, None)


def refutation_rates(table: pd.DataFrame) -> dict:
    """(claim, event) -> (alternative, its rate of "not reproduced") at the grid's design, the
    largest over the claim's alternatives (and over its events under (claim, "")): how often
    the claim's own alternative is refuted by its bound, which must stay within alpha."""
    a = table[(table["role"] == ROLE_ALT) & (table["design"] == "grid")].copy()
    if "not_reproduced" not in a or not len(a):
        return {}
    a["event"] = a["event"].astype(object).where(a["event"].notna(), "").astype(str)
    a["not_reproduced"] = pd.to_numeric(a["not_reproduced"], errors="coerce").fillna(0.0)
    out: dict = {}
    for r in a.itertuples():
        for key in ((r.claim, r.event), (r.claim, "")):
            if key not in out or r.not_reproduced > out[key][1]:
                out[key] = (r.scenario, float(r.not_reproduced))
    return out


def false_rate_by_claim(table: pd.DataFrame) -> dict:
    n = table[(table["role"] == ROLE_NULL) & (table["design"] == "grid")]
    return {c: float(g["reproduced"].max()) for c, g in n.groupby("claim")}


def false_rates(table: pd.DataFrame) -> dict:
    """(claim, event) -> {null scenario: its rate of "reproduced"} at the grid's design; the
    claim's rows for every event under (claim, "") too (the largest over its events)."""
    n = table[(table["role"] == ROLE_NULL) & (table["design"] == "grid")].copy()
    n["event"] = n["event"].astype(object).where(n["event"].notna(), "").astype(str)
    out: dict = {}
    for (c, e, sc), g in n.groupby(["claim", "event", "scenario"]):
        rate = float(g["reproduced"].max())
        out.setdefault((c, e), {})[sc] = rate
        all_ = out.setdefault((c, ""), {})
        all_[sc] = max(all_.get(sc, 0.0), rate)
    return out



def verdict_table(pres: list[dict], rows: pd.DataFrame, st: dict, extra: list[dict] | None = None,
                  power: pd.DataFrame | None = None, rows_of_runs=None, json_of_runs=None) -> pd.DataFrame:
    """verdict.csv: the claims that read the runs, the per-measure claims, and ``extra`` rows
    (floors, scale, top-down, prediction; the mixture protocol) with their p already computed;
    with ``rows_of_runs(runs) -> per-run table``, each run-decided row's stability over seed
    subsets (``stability``); with ``json_of_runs(runs, per-run table) -> {summary JSON file: content}`` too,
    the summary-JSON rows' stability (those files recomputed on each subset)."""
    full = finish(behaviour_claims(pres, st) + precursor_claims(rows, st) + list(extra or []), st, power)
    if rows_of_runs is None:
        return full

    def rows_of(sub):
        per_run = rows_of_runs(sub)
        return (behaviour_claims(sub, st) + precursor_claims(per_run, st)
                + (json_claims(json_of_runs(sub, per_run), st) if json_of_runs is not None else []))
    return stability(pres, st, full, rows_of, power)


# ------------------------------------------------------------------ stability
ROW_KEY = ["claim", "measure", "variant", "event", "protocol", "statistic"]


def seed_subsets(pres: list[dict], unit_cols=CELLS) -> list[tuple[str, list[dict]]]:
    """(name, runs) of the reruns the stability check makes: two disjoint halves of the seeds
    (within each cell, seeds in ascending order: even positions in half A, odd in half B; a
    cell with one seed is only in half A) and, where a cell has three seeds or more, leave one
    seed position out (cells with fewer keep all theirs)."""
    by_cell: dict = {}
    for p in pres:
        by_cell.setdefault(tuple(p.get(c) for c in unit_cols), []).append(p)
    for runs in by_cell.values():
        runs.sort(key=lambda p: (p.get("seed") is None, p.get("seed")))
    pos = {id(p): i for runs in by_cell.values() for i, p in enumerate(runs)}
    big = {id(p) for runs in by_cell.values() if len(runs) >= 3 for p in runs}
    out = [("seed half A", [p for p in pres if pos[id(p)] % 2 == 0]),
           ("seed half B", [p for p in pres if pos[id(p)] % 2 == 1])]
    n_max = max((len(r) for r in by_cell.values()), default=0)
    if n_max >= 3:
        out += [(f"without seed position {k}", [p for p in pres if not (id(p) in big and pos[id(p)] == k)])
                for k in range(n_max)]
    return out


def seed_half(pres: list[dict], half: str) -> list[dict]:
    """The runs of one seed half (``half`` "A" or "B"), exactly as ``seed_subsets`` splits them
    for the stability check, so a summary of these runs alone reproduces that check's rerun.
    Control runs are split on their own (within a cell, by seed): a one-seed control is in
    half A."""
    if half not in ("A", "B"):
        raise ValueError(f"seed half must be 'A' or 'B', got {half!r}")
    from .load import is_control
    name = f"seed half {half}"
    out = []
    for group in ([p for p in pres if not is_control(p)], [p for p in pres if is_control(p)]):
        if group:
            out += dict(seed_subsets(group)).get(name, [])
    keep = {id(p) for p in out}
    return [p for p in pres if id(p) in keep]


def _se(r: dict):
    """The standard error implied by a row's interval ((hi - lo) / (2 z) at its level); None
    without one."""
    lo, hi = pd.to_numeric(r.get("ci_lo"), errors="coerce"), pd.to_numeric(r.get("ci_hi"), errors="coerce")
    level = pd.to_numeric(r.get("ci_level"), errors="coerce")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    level = float(level) if np.isfinite(level) else 0.95
    return float(hi - lo) / (2 * float(stats.norm.ppf(0.5 + level / 2)))


def agreement(a: dict, b: dict) -> dict:
    """Do two subsets' estimates of one row agree: z = (a - b) / sqrt(se_a^2 + se_b^2) from their
    intervals, two-sided p. {"z", "p"} (None without both estimates and intervals)."""
    va, vb = pd.to_numeric(a.get("value"), errors="coerce"), pd.to_numeric(b.get("value"), errors="coerce")
    sa, sb = _se(a), _se(b)
    if not (np.isfinite(va) and np.isfinite(vb)) or sa is None or sb is None or sa + sb <= 0:
        return {"z": None, "p": None}
    z = float(va - vb) / math.sqrt(sa ** 2 + sb ** 2)
    return {"z": z, "p": float(2 * stats.norm.sf(abs(z)))}


def _estimate(r: dict | None) -> str:
    if r is None:
        return "no row"
    v, lo, hi = (pd.to_numeric(r.get(k), errors="coerce") for k in ("value", "ci_lo", "ci_hi"))
    txt = f"{v:.3g}" if np.isfinite(v) else "NA"
    if np.isfinite(lo) and np.isfinite(hi):
        txt += f" [{lo:.3g}, {hi:.3g}]"
    return txt + f" (n {int(r.get('n_units') or 0)})"


def stability(pres: list[dict], st: dict, full: pd.DataFrame, rows_of, power: pd.DataFrame | None = None
              ) -> pd.DataFrame:
    """``full`` (verdict.csv's rows) with ``stable`` and ``stability`` for the rows the runs
    decide (the behaviour and per-measure claims, and the summary-JSON claims when
    ``rows_of`` recomputes them), as numbers: each row recomputed on every subset of
    ``seed_subsets``; ``stability`` gives each subset's estimate and interval and the test of
    the two seed halves' agreement (``agreement``); ``stable``: the halves agree (p >= alpha),
    None where it cannot be tested. No word depends on it: a real effect of moderate size
    reaches significance in one half and not the other most of the time, which is power, not
    replication. ``rows_of(runs)``: the raw rows of those claims on a subset (a row ``rows_of``
    never gives, a mixture row: None). Control runs are split on their own, so a shuffled
    control never takes a seed position of its cell. ``power`` is unused (kept for callers)."""
    from .load import is_control
    real, ctrl = [p for p in pres if not is_control(p)], [p for p in pres if is_control(p)]
    ctrl_subsets = dict(seed_subsets(ctrl)) if ctrl else {}
    subsets = {name: sub + ctrl_subsets.get(name, ctrl) for name, sub in seed_subsets(real)}
    alpha = float(st["alpha"])
    got_rows = {}
    for name, sub in subsets.items():
        if not sub:
            continue
        got_rows[name] = {tuple(r[k] if r.get(k) == r.get(k) and r.get(k) is not None else "" for k in ROW_KEY): r
                          for r in rows_of(sub)}
    full = full.copy()
    stable, text = [], []
    for r in full.to_dict("records"):
        key = tuple(r[k] if r[k] == r[k] and r[k] is not None else "" for k in ROW_KEY)
        if not any(key in w for w in got_rows.values()):          # not recomputed on subsets (a mixture row)
            stable.append(None)
            text.append("")
            continue
        got = {n: w.get(key) for n, w in got_rows.items()}
        a, b = got.get("seed half A"), got.get("seed half B")
        ag = agreement(a, b) if a is not None and b is not None else {"z": None, "p": None}
        stable.append(None if ag["p"] is None else bool(ag["p"] >= alpha))
        text.append("; ".join(f"{n}: {_estimate(v)}" for n, v in got.items())
                    + (f"; halves agree: z {ag['z']:.2f}, p {ag['p']:.3f}" if ag["p"] is not None
                       else "; halves' agreement not testable (an estimate or interval missing)"))
    full["stable"], full["stability"] = stable, text
    return full
