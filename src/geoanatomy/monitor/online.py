"""Causal (online) event detectors of the monitor: collapse / floor / recovery of a falling
curve (``OnlineCollapse``) and acquisition (``OnlineAcquisition``), each the pipeline's
detector (``events.curve_entry``, ``events.acquisition_step``) on the curve so far."""
from __future__ import annotations

from .. import detectors as ev

PROVISIONAL_NOTE = ("online events: at step t only the curve measured up to t is used; the collapse and the "
                    "floor are provisional (measured against the lowest value so far) until a recovery, held "
                    "for `persist` measurements, confirms them; a run that never recovers ends with a "
                    "provisional floor. The final events equal the offline detectors' on the recorded curve.")


# ------------------------------------------------------------------------------ online events
class OnlineCollapse:
    """Causal collapse / floor / recovery of one falling curve (package doc): ``update`` feeds
    one point and returns the newly reported events."""

    KEYS = ("collapse", "floor", "recovery")

    def __init__(self, label: str, cfg_events: dict, constant: bool = False):
        self.label, self.e, self.constant = label, cfg_events, constant
        self.steps: list[int] = []
        self.values: list[float] = []
        self.entry: dict = ev.curve_entry([], [], "down", cfg_events)
        self.confirmed: dict | None = None
        self.reported: dict = {}

    def current(self) -> dict:
        """{collapse, floor, recovery} steps of the curve so far (None where not an event)."""
        e = self.entry
        if not e.get("collapsed"):
            return {k: None for k in self.KEYS}
        return {k: e.get(f"{k}_step") for k in self.KEYS}

    def update(self, step: int, value: float) -> list[dict]:
        self.steps.append(int(step))
        self.values.append(float(value))
        self.entry = ev.curve_entry(self.steps, self.values, "down", self.e, constant=self.constant)
        now, out = self.current(), []
        ext = self.entry.get("floor")
        if self.confirmed is not None and now != self.confirmed:
            out.append(self._rec(step, "revised", now["floor"], "provisional",
                                 f"the curve fell below the confirmed floor ({self.confirmed}); now {now}; "
                                 f"the events are provisional again"))
            self.confirmed = None
        if self.confirmed is None:
            if now["recovery"] is not None:
                if now["collapse"] != self.reported.get("collapse"):
                    moved = self.reported.get("collapse")
                    out.append(self._rec(step, "collapse", now["collapse"], "confirmed",
                                         "confirmed by the recovery" + (f" (first reported at step {moved})"
                                                                        if moved is not None else "")))
                out.append(self._rec(step, "floor", now["floor"], "confirmed",
                                     f"value {ext:.4g}, confirmed by the recovery at step {now['recovery']}"))
                out.append(self._rec(step, "recovery", now["recovery"], "confirmed",
                                     f"back by {self.e['return_frac']:g} of the drop for {self.e['persist']} "
                                     f"measurements"))
                self.confirmed = dict(now)
                self.reported.update(now)
            elif now["collapse"] is not None and "collapse" not in self.reported:
                out.append(self._rec(step, "collapse", now["collapse"], "provisional",
                                     f"held for {self.e['persist']} measurements; provisional: measured against "
                                     f"the lowest value so far ({ext:.4g}), it moves if the curve falls further"))
                self.reported["collapse"] = now["collapse"]
        return out

    def _rec(self, t, event, step, status, detail) -> dict:
        return {"reported_at": int(t), "curve": self.label, "event": event, "step": step, "status": status,
                "detail": detail}

    def state(self) -> dict:
        """The curve's events now: ``curve_entry`` of the curve so far plus a status per event."""
        now = self.current()
        conf = self.confirmed is not None
        status = {k: (None if now[k] is None else ("confirmed" if conf else "provisional")) for k in self.KEYS}
        return {**self.entry, "status": status, "n_points": len(self.steps)}


class OnlineAcquisition:
    """Causal acquisition (``events.acquisition_step``, a fixed threshold): reported once."""

    def __init__(self, label: str, cfg_events: dict, constant: bool = False):
        self.label, self.e, self.constant = label, cfg_events, constant
        self.steps: list[int] = []
        self.values: list[float] = []
        self.step_found: int | None = None

    def update(self, step: int, value: float) -> list[dict]:
        self.steps.append(int(step))
        self.values.append(float(value))
        if self.step_found is not None:
            return []
        t = ev.acquisition_step(self.steps, self.values, self.e["acquisition_threshold"], self.e["persist"])
        if t is None:
            return []
        self.step_found = t
        return [{"reported_at": int(step), "curve": self.label, "event": "acquisition", "step": t,
                 "status": "confirmed", "detail": f"chance-normalised accuracy >= {self.e['acquisition_threshold']:g} "
                                                  f"for {self.e['persist']} measurements"}]
