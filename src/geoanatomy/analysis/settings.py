"""The ``summary:`` settings as one frozen object, built once from ``defaults.DEFAULTS`` and
handed down to every part, claim and statistic (which read keys, never fall back to a
literal of their own: a default has one home).
"""
from __future__ import annotations

from ..defaults import DEFAULTS


class Settings(dict):
    """A read-only dict: every key of its block present (the defaults filled in), none
    changeable after it is built (``replace`` gives a new one). JSON-serialisable as a dict."""

    def _frozen(self, *a, **k):
        raise TypeError("settings are frozen: build new ones with .replace(key=value)")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = _frozen   # type: ignore[assignment]

    def replace(self, **changes) -> "Settings":
        """A copy with ``changes`` (known keys only)."""
        unknown = sorted(set(changes) - set(self))
        if unknown:
            raise ValueError(f"summary settings: unknown keys {unknown}; allowed: {sorted(self)}")
        return Settings({**self, **changes})

    def __reduce__(self):                      # pickles (multiprocessing) as a plain copy
        return (Settings, (dict(self),))


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
    return Settings(out)
