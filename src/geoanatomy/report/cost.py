"""The cost table of docs/slurm.md: hours per run and stage, checkpoint disk and the grid's
totals for a config (``cost.cost_table``), as markdown.

    geoanatomy report cost config/paper.yaml
"""
from __future__ import annotations

from ..cost import cost_table, peak_disk_mb


def cost_table_markdown(cfg: dict) -> str:
    """The docs' cost table for a config (hours per run, then totals for the grid)."""
    rows = cost_table(cfg)
    out = ["| size | params | runs | steps / checkpoints | CPU s/step, 1 thread | GPU s/step (assumed) "
           "| train | metrics | measures | probes | checkpoints per run (kept) | grid total | GPU-h packed |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def pack(r: dict) -> str:
        if not r["jobs_per_gpu"]:
            return f"{r['gpu_hours_packed']:.1f} (not packed)" if r["gpu_hours"] else "-"
        how = ", ".join(f"{st} {k} per GPU" for st, k in r["jobs_per_gpu"].items())
        return f"{r['gpu_hours_packed']:.1f} ({how})"

    def cell(dev: str, h: float, n: int) -> str:
        return "-" if h == 0 else f"{h / n:.2g} {dev.upper()}-h"

    for r in rows:
        n = r["runs"]
        st = r["stages"]
        steps = "/".join(map(str, r["steps"])) + " / " + "/".join(map(str, r["checkpoints"]))
        out.append(
            f"| {r['size']} | {r['n_params'] / 1e6:.2f}M | {n} | {steps} | {r['cpu_s_per_step_ref']:.3f} "
            f"({'measured' if r['measured'] else 'extrapolated'}) | {r['gpu_s_per_step_ref']:.3f} | "
            + " | ".join(cell(*st[s], n) for s in ("train", "metrics", "measures", "probes"))
            + f" | {r['disk_gb'] / n:.1f} GB ({r['kept_gb'] / n:.2g} GB kept) | {r['cpu_hours']:.0f} CPU-h + "
              f"{r['gpu_hours']:.1f} GPU-h | {pack(r)} |")
    tot_c, tot_g, tot_d, tot_k = (sum(r[k] for r in rows) for k in ("cpu_hours", "gpu_hours", "disk_gb", "kept_gb"))
    tot_p = sum(r["gpu_hours_packed"] for r in rows)
    peak = peak_disk_mb(cfg) / 1e6
    disk = (f"{tot_d / 1e3:.2f} TB" if tot_k == tot_d else
            f"{tot_d / 1e3:.2f} TB if every run kept all; {tot_k / 1e3:.2f} TB kept; peak {peak:.2f} TB")
    out.append(f"| **all** | | {sum(r['runs'] for r in rows)} | | | | | | | | {disk} | "
               f"**{tot_c:.0f} CPU-h + {tot_g:.0f} GPU-h** | **{tot_p:.0f} GPU-h** |")
    return "\n".join(out)
