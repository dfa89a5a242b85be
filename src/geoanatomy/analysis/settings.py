"""The ``summary:`` settings as one frozen object, built once from ``defaults.DEFAULTS`` and
handed down to every part, claim and statistic (which read keys, never fall back to a
literal of their own: a default has one home).
"""
from __future__ import annotations

from ..defaults import DEFAULTS, Settings


def summary_settings(user: dict | None = None) -> Settings:
    """The ``summary`` block's defaults updated by ``user`` (the rules pass the resolved
    block); unknown keys are an error naming them, types and ranges are the config schema's."""
    out = dict(DEFAULTS["summary"])
    extra = sorted(set(user or {}) - set(out))
    if extra:
        raise ValueError(f"summary settings: unknown keys {extra}; allowed: {sorted(out)}")
    if user:
        from ..config.schema import validate_block
        validate_block("summary", dict(user))
    out.update(user or {})
    return Settings(out, "summary")
