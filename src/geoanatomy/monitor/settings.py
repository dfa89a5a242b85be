"""The monitor's settings: measurement schedules (``LogThenEvery``), the events block and the
registry signals it is asked for, each checked when the ``Monitor`` is built."""
from __future__ import annotations


DEFAULT_EVERY = 100         # steps between measurements (overhead <= 5%: docs/monitor.md)


# ------------------------------------------------------------------------------ schedules
class LogThenEvery:
    """A measurement schedule: step 0, log-spaced steps below ``k`` (floor(ratio^i): 1, 2, 3,
    5, 7, 11, 17, 25, 38, 57, 86 for ratio 1.5 and k 100), then every ``k`` steps. Events
    early in training (the project's tasks collapse within the first 50 steps) need the dense
    start; it costs a fixed number of extra measurements per run."""

    def __init__(self, k: int = DEFAULT_EVERY, ratio: float = 1.5):
        if k < 1 or ratio <= 1:
            raise ValueError(f"need k >= 1 and ratio > 1, got k={k}, ratio={ratio}")
        self.k, self.ratio = int(k), float(ratio)
        self.early, i = set(), 0
        while int(self.ratio ** i) < self.k:
            self.early.add(int(self.ratio ** i))
            i += 1

    def __call__(self, step: int) -> bool:
        return step % self.k == 0 or step in self.early

    def __repr__(self) -> str:
        return f"LogThenEvery(k={self.k}, ratio={self.ratio:g})"


def log_then_every(k: int = DEFAULT_EVERY, ratio: float = 1.5) -> LogThenEvery:
    """``LogThenEvery(k, ratio)``: pass it as ``Monitor(every=...)``."""
    return LogThenEvery(k, ratio)


def check_events(events: dict | None) -> dict | None:
    """The monitor's ``events`` settings checked like the config's ``events`` block (unknown
    keys and wrong types are a ValueError naming the key; the schema is the config's)."""
    if not events:
        return events
    if not isinstance(events, dict):
        raise ValueError(f"Monitor(events=...) must be a dict of events settings, got {type(events).__name__}")
    from ..config.schema import validate_block
    from ..errors import ConfigError
    try:
        validate_block("events", events)
    except ConfigError as e:
        raise ValueError(f"Monitor(events=...): {str(e).replace('config field ', '')}") from None
    return events


def check_signals(signals, probe) -> tuple:
    """The requested signals as registry entries, each one a monitor with this probe can compute
    (``monitor.rows.signal_inputs``): a ValueError naming an unknown one, or one whose inputs
    this monitor does not offer (the label-reading ones need a labelled probe)."""
    from ..measures.signal_registry import requested
    from .rows import signal_inputs
    if not signals:
        return ()
    try:
        return requested(signals, signal_inputs(probe), "Monitor(signals=...)")
    except ValueError as e:
        if getattr(probe, "labels", None) is None and "labels" in str(e):
            raise ValueError(f"{e}; the label-reading signals need a labelled probe (Probe(..., labels=...) or "
                             f"Probe.from_task); this probe has no labels") from None
        raise
