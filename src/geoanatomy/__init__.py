"""geoanatomy: watch transformers learn (geometry of representations before behaviour).

Library layout: tasks (data), model (GPT), train (dense checkpoints), measures
(RankMe, ...), extract (per-checkpoint table), events (acquisition, collapse,
precursor), plots, cli (what the Snakemake rules call); ``open_run``, ``open_summary`` and ``events_table``
(``geoanatomy.api``): the results as Python objects. The package root is the public facade, at
the top of the layers: no module of the package imports it.
"""
from .version import __version__  # noqa: F401  (the public version)


def open_run(path):
    """A run folder's results as Python objects (``geoanatomy.api.Run``; docs/python-api.md)."""
    from .api import open_run as _open
    return _open(path)


def open_summary(path):
    """A summary folder's tables (``geoanatomy.api.Summary``; docs/python-api.md)."""
    from .api import open_summary as _open
    return _open(path)


def events_table(results):
    """Every run's events under a results folder as one DataFrame (``geoanatomy.api.events_table``)."""
    from .api import events_table as _events
    return _events(results)
