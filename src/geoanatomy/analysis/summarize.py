"""Entry points for ``geoanatomy summarize PART`` (one Snakemake rule per part).

The parts, what each reads and the files it writes under results/summary/, are the registry
``analysis.parts``; ``run`` runs one by name with the writer it names (``WRITERS``, each
taking a ``Job``).

Mixture units (precursor.json with ``protocol: mixture``, geoanatomy.mixture) are left out of
every part but ``verdict`` and ``protocols``, which set the two protocols side by side with the
mixture's models as units (analysis.protocols).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from ..files import atomic_write_json, atomic_write_text
from . import (behaviour, figures_runs, figures_summary, floors, parts, power, prediction, protocols, rates, scale,
               topdown)
from . import benchmark, figstyle, figures_benchmark, figures_verdict, verdict
from .load import check_pooling, class_counts, clear_gap, load_precursors, min_gap_frac, settings_mix
from .tables import header_lines, read_table, tables_html, write_csv


@dataclass(frozen=True)
class Job:
    """What a part's writer gets: every loaded unit (``units``) and its split into
    single-task runs (``pres``) and mixture units (``mix``), the output folder, the
    ``summary:`` settings, and the optional inputs of some parts."""
    units: list
    pres: list
    mix: list
    out: Path
    st: dict
    metrics: tuple = ()
    pythia: str | None = None
    scale_json: str | None = None
    curves: tuple = ()
    threads: int = 1


def machines_line(pres) -> str:
    """The machines the runs were trained on (precursor.json ``machine``, from train.json): each
    fingerprint with its CPU, instruction set and BLAS and how many runs; pooled fingerprints
    are said to be mixed (same config and seed give the same numbers only on one)."""
    fps: dict = {}
    for p in pres:
        m = p.get("machine") or {}
        key = m.get("fingerprint") or "not recorded"
        what = ", ".join(str(m.get(k)) for k in ("cpu_model", "cpu_capability", "blas") if m.get(k))
        e = fps.setdefault(key, {"n": 0, "what": what + (f", env {m['env']}" if m.get("env") else "")})
        e["n"] += 1
    parts = [f"{k} ({v['what']}) x{v['n']}" if v["what"] else f"{k} x{v['n']}" for k, v in fps.items()]
    lead = "machines: MIXED float paths, " if len(fps) > 1 else "machine: "
    return lead + "; ".join(parts)


def _n_line(pres) -> str:
    c = class_counts(pres)
    return (f"n = {len(pres)} runs ({', '.join(f'{k} {v}' for k, v in c.items())}); "
            f"sizes {sorted({p['size'] for p in pres})}; acquired {sum(bool(p['acquired']) for p in pres)}, "
            f"never acquired {sum(not p['acquired'] for p in pres)}; {machines_line(pres)}"
            + (f"; settings: MIXED ({'; '.join(mix)})" if (mix := settings_mix(pres)) else "")
            + (f"; {len(old)} runs read from tables of an earlier format without a manifest (legacy_tables: "
               f"{', '.join(p['run'] for p in old[:5])})" if (old := [p for p in pres if p.get("legacy_tables")])
               else ""))


def _provenance(pres, st) -> dict:
    return {"n_runs": len(pres), "runs_by_difficulty": class_counts(pres), "settings": st,
            "inputs": "precursor.json of every run in the config grid"}


def write_tables(job: Job) -> list[str]:
    pres, out, st = job.pres, Path(job.out), job.st
    nl = _n_line(pres)
    rows = rates.measure_rows(pres, st["coincide_log10_tol"])
    write_csv(rows, out / "transitions.csv", "geoanatomy summary: transitions.csv",
              ["one row per run and measure (geometric measures present in the run, then the references"
               " loss_plateau_exit and logprob_emergence): transition step, precursor verdict, gap = t_acq - t_tr.",
               f"coincides_plateau_exit: |log10(t_tr + 1) - log10(t_exit + 1)| <= {st['coincide_log10_tol']} decades"
               " (t_exit = loss_plateau_exit_step); empty when either step is missing.", nl])
    pr = rates.precursor_rates(rows, st)
    write_csv(pr, out / "precursor_rates.csv", "geoanatomy summary: precursor_rates.csv",
              [n.format(tol=st["coincide_log10_tol"]) for n in rates.RATES_NOTES] + [nl])
    write_csv(rates.paired_leads(rows, st), out / "paired_leads.csv", "geoanatomy summary: paired_leads.csv",
              ["per measure x class: lead of the measure's transition over the loss-plateau exit of the same run,"
               " d = t_exit - t_transition (steps; > 0: the measure fires first) and in decades"
               " (log10(t_exit + 1) - log10(t_tr + 1)); n_pairs = runs with both events (a geometric measure must have"
               " transitioned); wins/losses/ties and the exact two-sided sign test p (ties dropped);"
               f" median with a percentile bootstrap 95% interval over runs ({st['n_bootstrap']} resamples).",
               "shuffled-label control runs and diverged runs left out.", nl])
    write_csv(rates.control_rows(rows), out / "controls.csv", "geoanatomy summary: controls.csv",
              ["false alarms in shuffled-label control runs (answers permuted across inputs: nothing to acquire):"
               " per measure, the runs whose transition fired anyway (a geometric measure collapsed or rose by the"
               " events rule; a reference reached its event).", nl])
    fl = floors.collapse_floors(pres)
    write_csv(fl, out / "collapse_floors.csv", "geoanatomy summary: collapse_floors.csv",
              ["one row per study run and geometric measure at its headline layer/position/variant"
               " (shuffled-label control runs left out; seed = replicate of its task x level x size cell);"
               " floor = minimum over checkpoints, floor_step = first step reaching it, floor_over_init = floor / "
               "value at step 0,"
               " floor_step_frac = floor_step / training steps; collapsed: floor <= (1 - collapse_drop) * init ("
               "detectors.py).",
               "extreme = the level floor_spread and scale_invariance use: the floor for collapsing measures,"
               " the peak for rising ones (direction 'rise': hessian_top, llc); n_flagged = points left out"
               " (LLC negative or chains disagree, power iteration not converged).", nl])
    sp = floors.floor_spread(fl, st)
    write_csv(sp, out / "floor_spread.csv", "geoanatomy summary: floor_spread.csv",
              ["per measure x level x task: cell floors across sizes (smallest first; one value per task x level x size"
               " cell = median floor over its seeds, seeds per size in n_seeds_per_size), SD of log10(floor) across "
               "sizes,",
               f" test: {floors.TREND_TEST} (n = sizes = cells); p_raw and p_holm (family: the tasks of one measure and"
               f" level); trend_with_capacity uses p_holm at alpha {st['alpha']}. Diverged and control runs left "
               f"out.", nl])
    atomic_write_json(out / "floor_summary.json", floor_summary_json(pres, st, fl, sp))
    td = topdown.top_down(pres, st["topdown_require_collapse"])
    tds = topdown.top_down_summary(td, st)
    kn = "; ".join(f"{m}: top-down {v['all']['top_down']} determined runs (strict {v['all']['top_down_strict']}),"
                   f" bottom-up {v['all']['bottom_up']}, {v['all']['tied_tau0']} tied (tau = 0),"
                   f" {v['all']['undetermined']} undetermined, {v['n_diverged_runs_excluded']} diverged excluded;"
                   f" sign test p = {v['all']['sign_test_p']}; cells {v['cells_all']['top_down']}"
                   f" (seeds per cell {v['cells_all']['seeds_per_cell']})" for m, v in tds.items())
    write_csv(td, out / "top_down.csv", "geoanatomy summary: top_down.csv",
              [ln.strip() for ln in topdown.__doc__.strip().splitlines() if ln.strip()]
              + [f"k/n: {kn or 'no per-layer data'}", nl])
    atomic_write_json(out / "top_down_summary.json", top_down_json(pres, st, tds))
    em = behaviour.emergence(pres)
    em_ok = em[~em["diverged"].astype(bool)]
    k = int(em_ok["logprob_before_acquisition"].fillna(False).astype(bool).sum())
    n = int(em_ok["lead_logprob_steps"].notna().sum())
    write_csv(em, out / "emergence.csv", "geoanatomy summary: emergence.csv",
              ["one row per study run (shuffled-label control runs left out): lead_logprob_steps = acquisition_step - "
               "logprob_emergence_step,"
               " lead_plateau_exit_steps = acquisition_step - loss_plateau_exit_step (positive = before acquisition).",
               "acquisition: accuracy_norm >= threshold for persist checkpoints; log-prob emergence: per-token answer"
               " log-prob above the input-blind predictor by logprob_margin nats for persist checkpoints"
               " (detectors.py).",
               f"log-prob emergence before acquisition in {k}/{n} non-diverged runs with both events (n = runs;"
               f" seeds counted as runs; no test).", nl])
    pb = behaviour.probes(pres)
    n_with = int(pb["run"].nunique()) if len(pb) else 0
    write_csv(pb, out / "probes.csv", "geoanatomy summary: probes.csv",
              ["one row per run and layer: probe_acquisition_step from the run's 'probes' entry,"
               " lead_steps = acquisition_step - probe_acquisition_step (positive: the probe reads the answer first);"
               " shuffled-label control runs are flagged in column control (descriptive, no test).",
               f"runs with probe results: {n_with} of {len(pres)}"
               + ("" if n_with else " (no probes entry in any precursor.json: empty table, enable the probes "
                                    "stage)"), nl])
    return [str(out / f) for f in parts.TABLES.files()]


# ---- the summary's JSON files (parts.STATISTICS): one function each, used by the parts that
# write them and by the verdict's stability check, which recomputes them on seed subsets
def floor_summary_json(pres, st, fl=None, sp=None) -> dict:
    fl = floors.collapse_floors(pres) if fl is None else fl
    sp = floors.floor_spread(fl, st) if sp is None else sp
    return {**floors.floor_summary(fl, sp, st), **_provenance(pres, st)}


def top_down_json(pres, st, tds=None) -> dict:
    if tds is None:
        tds = topdown.top_down_summary(topdown.top_down(pres, st["topdown_require_collapse"]), st)
    return {"method": topdown.__doc__.strip(), "test": topdown.SIGN_TEST, "measures": tds, **_provenance(pres, st)}


def scale_json(pres, st, pythia=None) -> dict:
    return {**scale.scale_invariance(pres, st, pythia), **_provenance(pres, st)}


def prediction_json(pres, st, rows=None) -> dict:
    rows = rates.measure_rows(pres, st["coincide_log10_tol"]) if rows is None else rows
    return {**prediction.prediction(rows, st), **_provenance(pres, st)}


STATISTICS_OF = {"floor_summary.json": floor_summary_json, "top_down_summary.json": top_down_json,
                 "scale_invariance.json": scale_json, "prediction.json": prediction_json}
assert set(STATISTICS_OF) == set(parts.STATISTICS), "one function per summary JSON file"


def statistics_of(pres, st, rows=None) -> dict:
    """Every summary JSON file's content from ``pres`` alone (no Pythia file), in memory;
    ``rows``: their per-run table (``rates.measure_rows``) when the caller has it."""
    return {f: (prediction_json(pres, st, rows) if f == "prediction.json" else STATISTICS_OF[f](pres, st))
            for f in parts.STATISTICS}


def write_scale(job: Job) -> list[str]:
    atomic_write_json(Path(job.out) / "scale_invariance.json", scale_json(job.pres, job.st, job.pythia))
    return [str(Path(job.out) / "scale_invariance.json")]


def write_prediction(job: Job) -> list[str]:
    atomic_write_json(Path(job.out) / "prediction.json", prediction_json(job.pres, job.st))
    return [str(Path(job.out) / "prediction.json")]


def classes_line(pres: list[dict]) -> str:
    """Where the runs' easy/hard classes came from (precursor.json ``difficulty_source``): the
    calibration class file and its sha256, or the post-hoc rule, or a mix of the two."""
    srcs = [p.get("difficulty_source") or {} for p in pres if not p.get("control")]
    files = sorted({(s.get("classes_file"), s.get("classes_sha256")) for s in srcs if s.get("fixed_before_outcome")})
    n_fixed = sum(bool(s.get("fixed_before_outcome")) for s in srcs)
    if srcs and n_fixed == len(srcs) and len(files) == 1:
        (path, sha), = files
        rule = next(s["rule"] for s in srcs if s.get("fixed_before_outcome"))
        return (f"difficulty classes: fixed before the outcome by calibration runs, class file {path} sha256 {sha} "
                f"({rule}; calibration seeds disjoint from the analysed ones)")
    if n_fixed == 0:
        return ("difficulty classes: post-hoc rule (each run's own acquisition step <= events.easy_max_step), "
                "selected on the outcome the precursor is tested against; set events.classes_file")
    return (f"difficulty classes: MIXED, {n_fixed} of {len(srcs)} runs from class files {files}, the rest by the "
            f"post-hoc rule")


def write_power(job: Job) -> list[str]:
    """verdict_power.csv (analysis.power): each claim's rate of reproduced / not reproduced /
    inconclusive on simulated populations with this grid's design."""
    pres, out, st = job.pres, Path(job.out), job.st
    rows = rates.measure_rows(pres, st["coincide_log10_tol"])
    n_pop = int(st["power_populations"])
    table = power.verdict_power(rows, st, n_pop, tuple(st["power_multiples"]), int(st["seed"]),
                                grids=power.event_grids(pres), workers=job.threads)
    need = power.cells_needed(table, float(st["min_power"]))
    others = ", ".join(power.design_name(k) for k in st["power_multiples"] if k != 1) or "none"
    write_csv(table, out / "verdict_power.csv", "geoanatomy summary: verdict_power.csv",
              [ln.strip() for ln in power.__doc__.strip().splitlines()[:3]]
              + [f"simulated populations: {n_pop} per scenario on the grid's design (a quarter of"
                 f" that, alternatives only, on the other designs: {others}); inside each:"
                 f" {power.POWER_SETTINGS['n_permutations']} permutations,"
                 f" {power.POWER_SETTINGS['n_bootstrap']} bootstrap resamples; alpha {st['alpha']}, n_min"
                 f" {st['verdict_min_units']} units.",
                 "scenarios: " + "; ".join(power.SCENARIO_TEXT[s] for s in power.SCENARIOS) + ".",
                 "simulated steps moved onto each run's checkpoints (expensive measures: those they were measured"
                 " at): onsets and lead events to the next one, floors and peaks to the nearest, so ties fall as"
                 " on the grid.",
                 "role null: the rate of reproduced is the test's false rate; role alternative: its power.",
                 "cells for power >= " + str(st["min_power"]) + ": "
                 + "; ".join(f"{c}{' (' + e + ')' if e else ''}: {n}" for (c, e), n in need.items()),
                 _n_line(pres)])
    return [str(out / "verdict_power.csv")]


def _curves_of(job: Job) -> dict:
    """{run: (curves, costs)} of the single-task runs' signal_curves.csv files given."""
    names = {p["run"] for p in job.pres}
    return {k: v for k, v in benchmark.read_curves(job.curves).items() if k in names}


def write_benchmark(job: Job) -> list[str]:
    """precursor_benchmark.csv and figures/precursor_benchmark.png (analysis.benchmark): every
    signal of the registry scored as a detector on the runs whose signal_curves.csv is given."""
    out, st = Path(job.out), job.st
    curves = _curves_of(job)
    table = benchmark.benchmark_table([p for p in job.pres if p["run"] in curves], curves, st)
    runs = benchmark.run_table(job.pres)
    n_neg = int(runs["negative"].sum()) if len(runs) else 0
    n_ctrl = int(runs["control"].sum()) if len(runs) else 0
    write_csv(table, out / "precursor_benchmark.csv", "geoanatomy summary: precursor_benchmark.csv", [
        "one row per signal x event kind (onset, extreme of the matched detector; direction fixed in the signal "
        "registry): " + " ".join(benchmark.__doc__.split("\n\n")[1].split()),
        f"runs with curves: {len(curves)} of {len(job.pres)}; negatives: {n_neg} runs ({n_ctrl} shuffled-answer "
        f"controls, {n_neg - n_ctrl} runs that never acquire); intervals: {st['n_bootstrap']} cell-bootstrap "
        f"resamples (lead, AUROC), Clopper-Pearson over negative runs (false alarms), Fisher-z one-sided 95% bounds "
        f"(gain); detector settings: " + "; ".join(f"{k} {v or 'defaults'}" for k, v in benchmark.SETTINGS.items()),
        "cpu_ms_per_checkpoint: median over runs of the CPU milliseconds per checkpoint the stage that computed the "
        "signal recorded (signals computed together share one figure: the forward pass for loss and log-prob, every "
        "layer's RankMe together); NaN: not recorded.", machines_line(job.pres)])
    fig = figures_benchmark.draw(table, out / "figures" / "precursor_benchmark.png",
                                 f"precursor benchmark: {len(curves)} runs, {n_neg} negatives; onset events, "
                                 f"ranked by AUROC")
    return [str(out / "precursor_benchmark.csv"), *fig]


def robust_column(job: Job, v, power):
    """verdict.csv's ``robust`` and ``robust_words`` columns: each timing row recomputed with
    every event re-detected under the benchmark's other detector settings (analysis.benchmark:
    SETTINGS; the curves of signal_curves.csv); robust = the same word under all of them.
    Other rows and grids without curves: empty."""
    from .claims import CLAIMS
    v = v.copy()
    v["robust"], v["robust_words"] = None, ""
    curves = _curves_of(job)
    timing = {c.name for c in CLAIMS if c.figure == "timing"}
    is_t = v["claim"].isin(timing) & (v["protocol"] == "single-task")
    if not curves or len(curves) < len(job.pres) or not is_t.any():
        v.loc[is_t, "robust_words"] = "not computed: signal_curves.csv missing for some runs"
        return v
    st = job.st
    key = verdict.ROW_KEY
    words = {}
    for setting in benchmark.SETTINGS:
        if setting == "matched":
            continue
        alt = [benchmark.redetect(p, curves[p["run"]][0], setting) for p in job.pres]
        rows = rates.measure_rows(alt, st["coincide_log10_tol"])
        t = verdict.finish(verdict.precursor_claims(rows, st), st, power)
        words[setting] = {tuple(r[k] for k in key): r["verdict"] for _, r in t.iterrows()}
    for i in v.index[is_t]:
        k = tuple(v.loc[i, c] for c in key)
        got = {s: w.get(k) for s, w in words.items()}
        if all(w is None for w in got.values()):     # a measure whose curve signal_curves.csv does not hold
            v.loc[i, "robust_words"] = f"not computed: no curve of {v.loc[i, 'measure']} in signal_curves.csv"
            continue
        v.loc[i, "robust_words"] = "; ".join(f"{s} {w or 'no row'}" for s, w in got.items())
        v.loc[i, "robust"] = all(w == v.loc[i, "verdict"] for w in got.values())
    return v


def write_verdict(job: Job) -> list[str]:
    """verdict.csv (analysis.verdict): the precursor and behaviour claims from the runs, the
    floors / scale / top-down / prediction claims from the JSON files the other parts wrote;
    with mixture units, the same claims for the mixture protocol (analysis.protocols)."""
    pres, mix, out, st = job.pres, job.mix, Path(job.out), job.st
    rows = rates.measure_rows(pres, st["coincide_log10_tol"])
    jsons = {f: json.loads((out / f).read_text()) for f in parts.STATISTICS if (out / f).exists()}
    extra = ((verdict.json_claims(jsons, st) if pres else [])          # no single-task run: no single-task row
             + (protocols.mixture_claims(list(mix), st) if mix else []))
    pw = read_table(out / "verdict_power.csv") if (out / "verdict_power.csv").exists() else None
    v = verdict.verdict_table(pres, rows, st, extra, pw,
                              rows_of_runs=lambda sub: rates.measure_rows(sub, st["coincide_log10_tol"]),
                              json_of_runs=lambda sub, per_run: statistics_of(sub, st, per_run))
    v = robust_column(job, v, pw)
    from .freeze import check
    frozen = check({"summary": st, "events": pres[0]["events_settings"]}) if pres else ""
    if frozen:                                   # only a grid whose config names a frozen-rules file
        v["frozen"] = frozen
    st_rows = v["stable"].dropna()
    write_csv(v, out / "verdict.csv", "geoanatomy summary: verdict.csv",
              ["one row per claim of the study (per measure, RankMe variant and event kind where it applies):"
               " reproduced / not reproduced / inconclusive by the rule the row names: " + verdict.RULE + ".",
               f"alpha {st['alpha']}; n_min {st['verdict_min_units']} units; p one-sided in the claimed"
               " direction (TOST for equivalence rows), Holm-adjusted within each family; units: task x level x size"
               " cells (one number per cell, the median over its seeds); intervals at ci_level over cells;"
               " n_units = cells, n_runs = runs in them.",
               f"power, false_rate: verdict_power.csv (simulated populations on this design); underpowered ="
               f" power < {st['min_power']}; headline: the RankMe variant summary.headline_variant"
               f" ({st['headline_variant']}); 'mean-direction' in detail: an uncentred RankMe whose"
               f" curve follows the mean share (median rank correlation >= {st['mean_direction_rho']}).",
               "shuffled-label control runs and diverged runs are left out (controls.csv reports the controls).",
               "robust / robust_words (timing rows): the row recomputed with every event re-detected under the "
               "precursor benchmark's other detector settings (" + ", ".join(k for k in benchmark.SETTINGS
                                                                             if k != "matched")
               + "; the measures whose curves signal_curves.csv holds); robust = the same word under each.",
               "stable / stability: each single-task row (the summary JSON rows from those files recomputed on the"
               " subset) recomputed on disjoint halves of the seeds (within a cell,"
               " seeds in order: even positions half A, odd half B; one-seed cells only in A) and leaving one seed"
               " position out where a cell has 3+; stability gives each subset's estimate and interval and the z test"
               " of the halves' agreement; stable = the halves agree (p >= alpha); no word depends on it. "
               f"{int((~st_rows.astype(bool)).sum())} of {len(st_rows)} testable rows whose halves disagree.",
               classes_line(pres), _n_line(pres)] + ([f"protocol = mixture: {protocols.MIXTURE_NOTE}; "
                                                      f"{_mix_line(mix)}"] if mix else []))
    return [str(out / "verdict.csv")]


def write_headline(job: Job) -> list[str]:
    """headline.png and headline.csv (analysis.figures_headline): the headline test in one
    figure, from the runs and verdict.csv; the runs' and machines' line in the PNG's metadata."""
    from . import figures_headline as fh
    pres, out, st = job.pres, Path(job.out), job.st
    v = read_table(out / "verdict.csv")
    t = fh.headline_table(pres, st)
    rows = fh.timing_rows(v)
    write_csv(t, out / "headline.csv", "geoanatomy summary: headline.csv",
              [f"what headline.png's left panel draws: one row per study cell (control empty; the median over its"
               f" seeds, as the timing claims read it: analysis.units) of the headline RankMe variant"
               f" ({st['headline_variant']}, measure {fh.headline_measure(st)}), then one row per shuffled-label"
               " control run; t_acq = acquisition step (+inf: most seeds never acquired; NaN: a control that never"
               " acquired), t_floor = the RankMe floor step (the median over the acquired seeds whose RankMe"
               " collapsed; for a control its own), t_loss_onset / t_loss_extreme = the loss curve's events"
               " (the median over the acquired seeds).",
               f"the right panel draws verdict.csv's rows of claim '{fh.CLAIM}' for the RankMe variants, the primary"
               f" row first ({len(rows)} rows).", _n_line(pres)])
    about = {"Title": fh.answer(rows.iloc[0].to_dict() if len(rows) else None, str(st["headline_variant"]))[0],
             "Description": _n_line(pres), "Source": "geoanatomy summarize headline (analysis.figures_headline)"}
    files = figstyle.save(fh.draw_headline(t, v, st, fh.verdict_counts(v)), out / "headline.png", about=about)
    return [str(out / "headline.csv"), *files]


def _mix_line(mix) -> str:
    models = sorted({protocols.model_of(p) for p in mix})
    return (f"mixture units: {len(mix)} combinations of {len(models)} models ({', '.join(models[:12])}"
            f"{' ...' if len(models) > 12 else ''}); acquired {sum(bool(p['acquired']) for p in mix)}")


def write_protocols(job: Job) -> list[str]:
    """protocols.csv and protocol_rates.csv (analysis.protocols): single-task runs and mixture
    units side by side."""
    pres, out, st = job.units, Path(job.out), job.st
    single, mix = protocols.split(pres)
    if not mix:
        print("[summarize protocols] no mixture units: protocols.csv and protocol_rates.csv not written")
        return []
    nl = f"single-task: {_n_line(single) if single else 'no runs'}; {_mix_line(mix) if mix else 'no mixture units'}"
    side = protocols.side_by_side(pres, st)
    write_csv(side, out / "protocols.csv", "geoanatomy summary: protocols.csv", protocols.PROTOCOLS_NOTES + [nl])
    figures_summary.protocols_figure(side, out / "figures" / "protocols.png", st["headline_variant"])
    write_csv(protocols.protocol_rates(pres, st), out / "protocol_rates.csv", "geoanatomy summary: protocol_rates.csv",
              ["precursor_rates.csv's columns for each training protocol (column protocol): single-task runs, then"
               " the combinations of mixture models; units = what the intervals resample (n_units counts them) and"
               " what the permutation null shuffles within.", protocols.MIXTURE_NOTE + "."]
              + [n.format(tol=st["coincide_log10_tol"]) for n in rates.RATES_NOTES[1:]] + [nl])
    return [str(out / f) for f in parts.PROTOCOLS.files()]


def write_figures(job: Job) -> list[str]:
    """The summary figures. The per-run curves (trajectories, heatmaps, probe curves) read every
    run's metrics.csv; given none at all (a snapshot of a grid's precursor.json files, as
    docs/study/data holds), they are left out, said so in the log; given some, every run needs
    its own (a missing one is an error naming it)."""
    pres, metrics_paths, scale_json, out, st = job.pres, job.metrics, job.scale_json, Path(job.out), job.st
    fig = out / "figures"
    written = []
    if metrics_paths:
        metrics = figures_runs.load_metrics(pres, metrics_paths)
        for lv in figures_runs.levels(pres):
            written += figures_runs.trajectories(pres, metrics, lv, fig / f"trajectories_{lv}.png")
            written += figures_runs.heatmaps(pres, metrics, lv, fig / f"rankme_heatmap_{lv}.png")
        written += figures_runs.probe_curves(pres, metrics, fig / "probes.png", behaviour.probes(pres))
    else:
        print("[summarize figures] no metrics.csv given: the per-run curves (trajectories, heatmaps, probe curves)"
              " are left out; the figures of precursor.json alone follow")
    written += figures_summary.floors_by_task(floors.collapse_floors(pres), fig / "floors_by_task.png")
    written += figures_summary.lead_lag(rates.measure_rows(pres, st["coincide_log10_tol"]), fig / "lead_lag.png")
    sc = json.loads(Path(scale_json).read_text()) if scale_json else scale.scale_invariance(pres, st)
    written += figures_summary.rho_matrix(sc, fig / "rho_matrix.png")
    return written


def write_claim_figures(job: Job) -> list[str]:
    """figures/verdict_{family}.png from verdict.csv (analysis.figures_verdict)."""
    out = Path(job.out)
    v = read_table(out / "verdict.csv")
    lines = header_lines(out / "verdict.csv")
    # the runs and the machines they came from first, then how the classes were fixed (wrapped, never cut)
    head = ([ln for ln in lines if ln.startswith(("n = ", "machines"))]
            + [ln for ln in lines if ln.startswith("difficulty")])
    return figures_verdict.verdict_figures(v, out / "figures", "; ".join(head))


def write_html(job: Job) -> list[str]:
    out = Path(job.out)
    sections = []
    for f in parts.HTML_SECTIONS:
        p = out / f
        if not p.exists():
            continue
        if f.endswith(".json"):
            d = json.loads(p.read_text())
            sections.append((f, [(d.get("method") or "")[:2000].replace("\n", " ")], d))
        else:
            sections.append((f, header_lines(p)[1:], read_table(p)))
    png = out / "headline.png"
    atomic_write_text(out / "tables.html", tables_html(sections, "geoanatomy summary tables",
                                                       png.read_bytes() if png.is_file() else None))
    return [str(out / "tables.html")]


# each part's writer (parts.Part.writer names it; the registry is standard-library only)
WRITERS = {f.__name__: f for f in (write_tables, write_scale, write_prediction, write_power, write_benchmark,
                                   write_verdict, write_headline,
                                   write_protocols, write_figures, write_claim_figures, write_html)}
assert set(WRITERS) == {p.writer for p in parts.PARTS}, "one writer per summary part"


def run(part: str, precursors, out, st: dict, metrics=(), pythia=None, scale_json=None, log=print,
        curves=(), threads: int = 1) -> list[str]:
    """Run one part (``analysis.parts``) with its writer; the files written. ``threads``: the
    processes a part that simulates may use (the power part; its numbers do not depend on it)."""
    t0 = time.time()
    p = parts.BY_NAME[part]
    units = load_precursors(precursors) if p.reads_runs else []
    if p.reads_runs and not units:
        raise ValueError("summarize: no precursor.json files given")
    check_pooling(units, bool(st["allow_mixed_settings"]))   # refuses a silent mix of settings
    clear_gap(min_gap_frac(u) for u in units)                # and two clear gaps, even when a mix is allowed
    pres, mix = protocols.split(units)            # mixture units: verdict and protocols only
    if part in ("verdict", "benchmark") and pres:   # a confirmation grid: the frozen rules, checked first
        from .freeze import check
        check({"summary": st, "events": pres[0]["events_settings"]})
    files = WRITERS[p.writer](Job(units, pres, mix, Path(out), st, tuple(metrics or ()), pythia, scale_json,
                                  tuple(curves or ()), max(1, int(threads))))
    for f in map(Path, files):     # temporary files of this part's own writes killed before their rename
        for tmp in f.parent.glob(f".{f.name}.*.tmp"):
            tmp.unlink(missing_ok=True)
    if p.reads_runs:
        log(f"[summarize {part}] {_n_line(pres)}" + (f"; {_mix_line(mix)}" if mix else ""))
    log(f"[summarize {part}] wrote {len(files)} files in {time.time() - t0:.2f} s")
    return files
