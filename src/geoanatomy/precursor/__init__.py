"""The study's definitions, in one place (torch-free; above ``geoanatomy.detectors``, the
detectors, and ``geoanatomy.measures.registry``, the expensive measures' facts).

``rules``: the precursor rule, the difficulty classes, a measure's precursor verdict and
the precursor.json schema version. ``record``: a run's events record from its curves
(RankMe entries of both variants, expensive-measure entries, probe entries). The events
stage, the Pythia branch and the scanner read their tables and call these.
"""
from .record import (PER_POINT, RANKME_ENTRIES, RISE_NAMES, headline_entry, layer_events, mean_shares,
                     measure_entries, measure_entry, probe_entry, rankme_entry, events_record)
from .rules import SCHEMA_VERSION, difficulty, easy_max_of_budget, is_precursor, precursor_verdict

__all__ = ["SCHEMA_VERSION", "is_precursor", "difficulty", "easy_max_of_budget", "precursor_verdict",
           "RANKME_ENTRIES", "RISE_NAMES", "PER_POINT", "mean_shares", "layer_events", "headline_entry",
           "rankme_entry", "measure_entry", "measure_entries", "probe_entry", "events_record"]
