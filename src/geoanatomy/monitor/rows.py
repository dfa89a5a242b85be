"""The rows of one monitor measurement beyond the geometry: behaviour on the probe batch and
the registry signals a monitor is asked for (``Monitor(signals=...)``)."""
from __future__ import annotations

import torch

from ..measures import signals as sig
from .probe import _nll64


def signal_inputs(probe) -> frozenset:
    """What a monitor hands the registry's signals (``measures.signals.INPUTS``) with this probe:
    the weights and the trailing window always, the hidden states and their heads at the
    probe's index position (if it has one), the labels and per-example losses when it is
    labelled."""
    idx = any(k == "index" for k, _ in probe.positions.values())
    labelled = getattr(probe, "labels", None) is not None
    return frozenset({"weights", "window", "hidden"} | ({"heads"} if idx else set())
                     | ({"labels", "losses"} if idx and labelled else set()))


def monitor_signals(probe=None) -> list[str]:
    """The registry signals a monitor computes with ``probe`` (default: a labelled probe with an
    index position, as ``Probe.from_task`` makes)."""
    from ..measures.signal_registry import offered
    full = frozenset({"weights", "window", "hidden", "heads", "labels", "losses"})
    return offered(full if probe is None else signal_inputs(probe))


def signal_rows(signals, p, window, names, model, step, logits, hidden, heads, idx_pos, ids) -> list[dict]:
    """The requested registry ``signals`` (entries of ``measures.signal_registry``) at one
    measurement: each computation they need, run once on this measurement's ``SignalState``,
    the rows of the requested measures kept; ``p`` the probe, ``window`` the monitor's
    ``SignalWindow`` (None without windowed signals)."""
    from ..measures.signal_registry import computations
    comps = computations(signals)
    if not comps:
        return []
    state = sig.SignalState(model=model, step=step, heads=heads, window=window,
                            position=idx_pos[0] if idx_pos is not None else "none", classes="first labelled token")
    reads = frozenset().union(*(c.reads for c in comps))
    tgt = p.labels.to(ids.device)[:, 1:] if reads & {"labels", "losses"} else None
    if "labels" in reads:
        first = (tgt != -100).float().argmax(1)                              # first labelled position
        state.labels = tgt[torch.arange(len(tgt), device=tgt.device), first].cpu().numpy()
    if "hidden" in reads:
        ar = torch.arange(ids.shape[0], device=ids.device)
        state.layers = [(names[-1], len(hidden) - 1, hidden[-1][ar, idx_pos[1].to(ids.device)])]
    if "heads" in reads:
        state.n_head = int(getattr(getattr(model, "cfg", None), "n_head", None)
                           or getattr(getattr(model, "config", None), "n_head", None)
                           or getattr(getattr(model, "config", None), "num_attention_heads", None))
    if "losses" in reads:
        sel = tgt != -100
        lp = torch.log_softmax(logits[:, :-1].double(), -1).gather(-1, tgt.clamp(min=0)[..., None])[..., 0]
        state.losses = (-(lp * sel).sum(1) / sel.sum(1).clamp(min=1)).detach().cpu().numpy()
    if "window" in reads:
        window.feed(step, model, state.losses)
    want = {s.measure for s in signals}
    return [r for c in comps for r in c.rows(state) if r["measure"] in want]


def behaviour_rows(p, logits, ids, am, base) -> list[dict]:
    """Loss (and with a labelled probe accuracy, token accuracy, normalised accuracy) of the
    probe batch from its logits."""
    B = ids.shape[0]
    labelled = p.labels is not None
    if labelled:
        tgt = p.labels.to(ids.device)[:, 1:]
    else:
        tgt = ids[:, 1:].clone()
        if am is not None:
            tgt[am[:, 1:] == 0] = -100
    lg = logits[:, :-1]
    sel = tgt != -100                                                       # (B, T-1)
    nll = _nll64(lg[sel], tgt[sel])
    pos = "answer" if labelled else "tokens"
    beh = {**base, "layer": "output", "layer_index": -1, "n_samples": B}
    rows = [{**beh, "measure": "loss", "position": pos, "variant": "probe", "value": float(nll.mean()),
             "settings": {"definition": ("mean cross-entropy over the labelled tokens" if labelled else
                                         "mean next-token loss over every non-padding token")
                          + " of the probe batch", "dtype": "float64", "n_tokens": int(sel.sum())}}]
    if not labelled:
        return rows
    right = (lg.argmax(-1) == tgt) | ~sel                                   # (B, T-1)
    has = sel.any(1)
    acc = float(right.all(1)[has].double().mean())
    rows += [{**beh, "measure": "accuracy", "position": "answer", "variant": "", "value": acc,
              "settings": {"definition": "every labelled token of a row predicted right (argmax)"}},
             {**beh, "measure": "token_accuracy", "position": "answer", "variant": "",
              "value": float((lg.argmax(-1) == tgt)[sel].double().mean())}]
    if p.chance is not None:
        c = float(p.chance)
        rows.append({**beh, "measure": "accuracy_norm", "position": "answer", "variant": "",
                     "value": (acc - c) / (1 - c) if c < 1 else float("nan"), "settings": {"chance": c}})
    return rows

    # -------------------------------------------------------------- events
