"""The rows of one monitor measurement beyond the geometry: behaviour on the probe batch and
the registry signals a monitor is asked for (``Monitor(signals=...)``)."""
from __future__ import annotations

import torch

from ..measures import signals as sig
from .probe import _nll64


def signal_rows(signals, p, window, names, model, step, logits, hidden, heads, idx_pos, ids) -> list[dict]:
    """The requested registry ``signals`` at one measurement (``Monitor(signals=...)``); ``p``
    the probe, ``window`` the monitor's ``SignalWindow`` (None without windowed signals)."""
    want, rows = set(signals), []
    if "ildr" in want and idx_pos is not None:
        tgt = p.labels.to(ids.device)[:, 1:]
        first = (tgt != -100).float().argmax(1)                              # first labelled position
        y = tgt[torch.arange(len(tgt), device=tgt.device), first].cpu().numpy()
        Z = hidden[-1][torch.arange(len(tgt), device=tgt.device), idx_pos[1].to(ids.device)]
        rows.append(sig._row("ildr", names[-1], len(hidden) - 1, idx_pos[0], "", len(y), sig.ildr(Z, y),
                             {"classes": "first labelled token"}))
    if heads:
        n_head = (getattr(getattr(model, "cfg", None), "n_head", None)
                  or getattr(getattr(model, "config", None), "n_head", None)
                  or getattr(getattr(model, "config", None), "num_attention_heads", None))
        rows += sig.head_rank_rows(heads, int(n_head), idx_pos[0])
    if "stable_rank" in want:
        rows += sig.stable_rank_rows(model)
    if want & {"update_gap", "loss_cov_heat", "loss_cov_pr"}:
        losses = None
        if want & {"loss_cov_heat", "loss_cov_pr"}:
            tgt = p.labels.to(ids.device)[:, 1:]
            sel = tgt != -100
            lp = torch.log_softmax(logits[:, :-1].double(), -1).gather(-1, tgt.clamp(min=0)[..., None])[..., 0]
            losses = (-(lp * sel).sum(1) / sel.sum(1).clamp(min=1)).detach().cpu().numpy()
        rows += [r for r in window.rows(step, model, losses) if r["measure"] in want]
    return rows


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
