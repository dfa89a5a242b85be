"""Cross-run analysis: the study's tables, scale invariance, prediction limits, figures.

Reads the per-run ``precursor.json`` files (and, for figures, ``metrics.csv``)
and writes ``results/summary/``. Pure pandas/numpy/scipy/matplotlib: no torch,
so the summary rules start fast and run anywhere.

Modules (one purpose each):

* ``load``             read and check precursor.json files; size/task ordering; run facts
* ``stats``            exact permutation Spearman, pairwise concordance, quantiles
* ``rates``            per-measure long table (+ reference measures), precursor_rates.csv
* ``floors``           collapse_floors.csv, floor_spread.csv, floor_summary.json
* ``topdown``          top_down.csv (+ its k/n summary)
* ``scale``            scale_invariance.json (toy sizes and Pythia)
* ``prediction``       prediction.json (concordance within classes, order reversals)
* ``behaviour``        emergence.csv, probes.csv
* ``protocols``        single-task runs vs mixture units: protocols.csv, protocol_rates.csv and
                       the mixture rows of verdict.csv (models as units)
* ``tables``           writing CSVs with '#' provenance headers; tables.html for the report
* ``figstyle``         shared figure helpers (Agg backend, colours, PNG + SVG saving)
* ``figures_runs``     per-run small multiples: trajectories, layer x step heatmaps, probes
* ``figures_summary``  figures from the tables: floors by task, lead/lag, rho matrices
* ``nulls``            clock and permutation nulls, sign test, paired leads, bootstrap of a median
* ``units``            one row per unit (task x level x size cell, seeds nested) and measure:
                       the medians every claim reads
* ``timing``           timing beyond the loss curve (partial rank correlation, Freedman-Lane,
                       leave-one-out gain, the clock), lag and equivalence tests, label permutation
* ``verdict``          verdict.csv: the claims (one entry each), the rules that turn a statistic
                       into a word, stability over seed halves
* ``power``            verdict_power.csv: each claim's false rate and power on simulated
                       populations with the grid's own design
* ``parts``            the registry of summary parts: inputs, output files, report captions,
                       writer (standard library only; the Snakefile reads it)
* ``summarize``        the entry points the CLI and the Snakemake rules call

Settings (``summary:`` block of the config; defaults in ``geoanatomy.config.DEFAULTS``):

coincide_log10_tol
    A transition "coincides with the loss-plateau exit" when
    |log10(t_tr + 1) - log10(t_exit + 1)| <= tol (decades; 0.1 = within a
    factor 1.26 of the exit step).
exact_max_n
    Spearman p-values enumerate all n! permutations up to this n (10! = 3628800, in
    blocks, bounded memory); above it a seeded Monte Carlo with ``n_resamples`` draws.
n_permutations, n_bootstrap
    Acquisition-step permutations for the precursor nulls (``nulls``) and bootstrap
    resamples for intervals (cells resampled, seeds nested; ``verdict``).
alpha, verdict_min_units
    Test level of every verdict (after Holm within a family); a claim resting on fewer
    units (cells) than verdict_min_units is inconclusive (``verdict``).
topdown_require_collapse
    Top-down layer order uses only layers whose curve collapsed (a flat curve's
    argmin is noise).
headline_variant, mean_direction_rho
    The RankMe variant of the headline rows (centred); an uncentred row whose curve follows
    the mean share (median rank correlation >= mean_direction_rho) says "mean-direction".
equivalence_decades, slope_equivalence, mod_floor_reference
    delta of the equivalence tests (lags, the MOD floor against mod_floor_reference = 2.0) and
    of the floor-slope test (decades of floor per decade of parameters).
min_power, power_populations, power_multiples
    verdict_power.csv: populations per scenario, the repeated designs; a claim with power
    below min_power is marked underpowered (``power``).
"""


