"""Geometric measures of representations and of the loss landscape.

RankMe and the mean share: ``measures.rankme``; the per-layer rows of the tables:
``measures.geometry``; the expensive measures: ``MEASURES`` (``measures.registry``).
Importing this package does not import torch: the cost model and the events stage read
the registry at Snakefile parse time and in table-only jobs.
"""
from .registry import DIRECTIONS, HEADLINE_VARIANT, MEASURES, TABLE_MEASURES, Measure, TableMeasure, measure

__all__ = ["MEASURES", "TABLE_MEASURES", "DIRECTIONS", "HEADLINE_VARIANT", "Measure", "TableMeasure", "measure"]
