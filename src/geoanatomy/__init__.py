"""geoanatomy: watch transformers learn (geometry of representations before behaviour).

Library layout: tasks (data), model (GPT), train (dense checkpoints), measures
(RankMe, ...), extract (per-checkpoint table), events (acquisition, collapse,
precursor), plots, cli (what the Snakemake rules call).
"""
__version__ = "0.1.0"


def open_run(path):
    """A run folder's results as Python objects (``geoanatomy.api.Run``; docs/python-api.md)."""
    from .api import open_run as _open
    return _open(path)


def open_summary(path):
    """A summary folder's tables (``geoanatomy.api.Summary``; docs/python-api.md)."""
    from .api import open_summary as _open
    return _open(path)
