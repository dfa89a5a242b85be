"""The study's definitions, in one place (torch-free; above ``geoanatomy.detectors``, the
detectors, and ``geoanatomy.measures.registry``, the expensive measures' facts).

``rules``: the precursor rule, the difficulty classes, a measure's precursor verdict and
the precursor.json schema version. ``entries``: the parts of a record from a table's curves
(RankMe entries of both variants, expensive-measure entries, probe entries). ``record``: the
one home of precursor.json's builders (the workflow's ``events_record``, the Pythia branch's
``pythia_record``, the scanner's and the monitor's ``report_record``).
"""
# name -> the submodule that defines it, imported on first use (PEP 562): a stage that only
# seals a record (``precursor.seal``: the trainer) starts without scipy.stats, which
# ``entries`` imports (0.5 s of every training job's start, measured with -X importtime)
_HOME = {**dict.fromkeys(("PER_POINT", "RANKME_ENTRIES", "RISE_NAMES", "headline_entry", "layer_events",
                          "mean_shares", "measure_entries", "measure_entry", "probe_entry", "rankme_entry"),
                         "entries"),
         **dict.fromkeys(("events_record", "pythia_record", "report_record"), "record"),
         **dict.fromkeys(("SCHEMA_VERSION", "difficulty", "easy_max_of_budget", "is_precursor",
                          "precursor_verdict"), "rules")}


def __getattr__(name: str):
    home = _HOME.get(name)
    if home == "entries":
        from . import entries as module
    elif home == "record":
        from . import record as module
    elif home == "rules":
        from . import rules as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)


__all__ = ["SCHEMA_VERSION", "is_precursor", "difficulty", "easy_max_of_budget", "precursor_verdict",
           "RANKME_ENTRIES", "RISE_NAMES", "PER_POINT", "mean_shares", "layer_events", "headline_entry",
           "rankme_entry", "measure_entry", "measure_entries", "probe_entry", "events_record", "pythia_record",
           "report_record"]
