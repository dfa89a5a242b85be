"""Pythia validation branch: real EleutherAI Pythia checkpoints, revision by revision.

The ``pythia:`` config block (settings, checks, per-model job specs) and the 154 published
revisions with their selection live with the config, torch-free: geoanatomy.config.pythia and
geoanatomy.config.pythia_revisions. Modules (no torch import at package import time):

benchmarks   seven diagnostic multiple-choice sets (data/*.jsonl) + logical-deduction puzzles
deduction    seeded BIG-Bench-Hard-style logical-deduction generator with a brute-force solver
loading      transformers loading from a hub id + revision or a local directory per step;
             Hugging Face cache clean-up
fingerprint  sha256 of a checkpoint's weights; duplicate revisions (a weight set is measured
             once, as the latest revision holding it; step0 equal to main stops the run)
scoring      option log-likelihoods and hidden states at the last prompt token
measure      the rows of one checkpoint on a probe set (the Pythia extraction and the
             checkpoint scanner, ``geoanatomy.scan``, share it)
extract      one model: every revision -> metrics.csv, duplicates.json, extract.json
events       per-benchmark precursor.json + trajectory figure (same event detection as the
             algorithmic runs)
scale        cross-size Spearman correlations (chance-normalised accuracy, cap-normalised
             RankMe within last-token strata) with exact permutation p-values
(any Hugging Face causal LM: safe loading, named hidden states, generic scoring in ``geoanatomy.hf``;
the command line is ``geoanatomy.cli.pythia``: ``geoanatomy pythia extract|events|scale|revisions``)
"""
