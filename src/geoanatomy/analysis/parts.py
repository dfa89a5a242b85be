"""The parts of the cross-run summary: what each reads, the files it writes under
results/summary/ (with their ``snakemake --report`` captions) and the function that writes
them. One registry for ``workflow/rules/analysis.smk`` (one rule ``summary_<name>`` per
part) and for ``geoanatomy summarize`` (``analysis.summarize`` runs a part by name; ``all``
runs them in this order, each after the parts whose files it reads).

Standard library only: the Snakefile imports this module at parse time.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Output:
    """A file a part writes, relative to results/summary/ (``{level}``: one file per level),
    and its report entry: caption workflow/report/<caption>.rst, category, labels (templates
    with ``{level}``). caption None: not in the report."""
    path: str
    caption: str | None = None
    category: str = ""
    labels: dict = field(default_factory=dict, compare=False)

    def expand(self, levels=()) -> list[tuple[str, dict]]:
        """(path, labels) of each file (one per level when the path has ``{level}``)."""
        if "{level}" not in self.path:
            return [(self.path, dict(self.labels))]
        return [(self.path.format(level=lv), {k: v.format(level=lv) for k, v in self.labels.items()})
                for lv in levels]


@dataclass(frozen=True)
class Input:
    """Files a part reads: ``where`` "unit" (RESULTS/<run or mixture unit>/FILE), "run"
    (RESULTS/<training run>/FILE) or "summary" (results/summary/FILE, another part's output);
    ``flag``: the ``geoanatomy summarize`` option that passes them ("": the part reads them
    from its --out folder); ``optional``: listed only when the branch that makes it runs or
    the file exists (pythia_scale.json)."""
    key: str
    files: tuple
    where: str
    flag: str = ""
    optional: bool = False


@dataclass(frozen=True)
class Part:
    """One summary part: ``geoanatomy summarize NAME`` and the rule ``summary_NAME``.
    writer: the function in analysis.summarize that writes the outputs; settings: whether it
    takes the ``summary:`` config block; mixtures_only: its files are targets only when the
    grid has mixture blocks; mem_mb, runtime (minutes): the rule's SLURM resources; threads: the
    rule's threads (Snakemake gives at most --cores; the writer gets the number it was given)."""
    name: str
    inputs: tuple
    outputs: tuple
    writer: str
    settings: bool = True
    mixtures_only: bool = False
    mem_mb: int = 1024
    runtime: int = 15
    threads: int = 1

    def files(self, levels=()) -> list[str]:
        """Every output path (relative to results/summary/)."""
        return [p for o in self.outputs for p, _ in o.expand(levels)]

    @property
    def reads_runs(self) -> bool:
        return any(i.where == "unit" for i in self.inputs)


def _tables(*entries) -> tuple:
    return tuple(Output(path, caption, "2 Tables", {"table": label}) for path, caption, label in entries)


PRECURSORS = Input("pre", ("precursor.json",), "unit", "--precursors")

TABLES = Part("tables", (PRECURSORS,), _tables(
    ("precursor_rates.csv", "precursor_rates", "precursor rates"),
    ("paired_leads.csv", "paired_leads", "paired leads over the loss curve's event of the same kind (onset, extreme)"),
    ("controls.csv", "controls", "shuffled-label controls"),
    ("transitions.csv", "transitions", "transitions (per run)"),
    ("collapse_floors.csv", "collapse_floors", "collapse floors (per run)"),
    ("floor_spread.csv", "floor_spread", "floor spread (per task)"),
    ("top_down.csv", "top_down", "top-down layer order"),
    ("emergence.csv", "emergence", "log-prob emergence"),
    ("probes.csv", "probes_table", "probe acquisition"),
) + (Output("floor_summary.json"), Output("top_down_summary.json")), "write_tables")
SCALE = Part("scale", (PRECURSORS, Input("pythia", ("pythia_scale.json",), "summary", "--pythia", optional=True)),
             (Output("scale_invariance.json", "scale_invariance", "3 Statistics", {"result": "scale invariance"}),),
             "write_scale")
PREDICTION = Part("prediction", (PRECURSORS,),
                  (Output("prediction.json", "prediction", "3 Statistics", {"result": "prediction limits"}),),
                  "write_prediction")
STATISTICS = tuple(f for p in (TABLES, SCALE, PREDICTION) for f in p.files() if f.endswith(".json"))
POWER = Part("power", (PRECURSORS,), _tables(
    ("verdict_power.csv", "verdict_power", "power and false rate of every claim on this grid's design"),
), "write_power", runtime=60, threads=8)
CURVES = Input("curves", ("signal_curves.csv",), "unit", "--curves")
BENCHMARK = Part("benchmark", (PRECURSORS, CURVES), (
    Output("precursor_benchmark.csv", "precursor_benchmark", "0 Verdict", {"table": "precursor benchmark"}),
    Output("figures/precursor_benchmark.png", "precursor_benchmark_figure", "1 Figures",
           {"figure": "precursor benchmark"})), "write_benchmark", runtime=30)
VERDICT = Part("verdict", (PRECURSORS, CURVES, Input("json", STATISTICS + tuple(POWER.files()), "summary")),
               (Output("verdict.csv", "verdict", "0 Verdict", {"table": "verdict per claim"}),), "write_verdict")
# the answer first: the headline test in one figure and the table it draws (analysis.figures_headline)
HEADLINE = Part("headline", (PRECURSORS, Input("verdict", ("verdict.csv",), "summary")), (
    Output("headline.png", "headline", "0 Verdict", {"figure": "headline: the answer in one figure"}),
    Output("headline.csv", "headline_table", "0 Verdict", {"table": "headline: what the figure draws, per cell"})),
    "write_headline")
PROTOCOLS = Part("protocols", (PRECURSORS,), _tables(
    ("protocols.csv", "protocols", "single-task vs mixture protocol"),
    ("protocol_rates.csv", "protocol_rates", "precursor rates per protocol"),
) + (Output("figures/protocols.png", "protocols_figure", "1 Figures", {"figure": "protocols"}),
     ), "write_protocols", mixtures_only=True)


def _figure(path, caption, label) -> Output:
    return Output(f"figures/{path}", caption, "1 Figures", {"figure": label})


FIGURES = Part("figures", (PRECURSORS, Input("metrics", ("metrics.csv",), "run", "--metrics"),
                           Input("scale", ("scale_invariance.json",), "summary", "--scale-json")), (
    _figure("trajectories_{level}.png", "trajectories", "trajectories {level}"),
    _figure("rankme_heatmap_{level}.png", "rankme_heatmap", "RankMe heatmap {level}"),
    _figure("floors_by_task.png", "floors_by_task", "floors by task"),
    _figure("lead_lag.png", "lead_lag", "lead/lag"),
    _figure("probes.png", "probes", "probes vs behaviour"),
    _figure("rho_matrix.png", "rho_matrix", "rho matrix"),
), "write_figures", mem_mb=2048, runtime=30)

# The verdict drawn, one figure per family of claims (each claim names its family:
# analysis.claims, Claim.figure), from verdict.csv alone.
FIGURE_FAMILIES = ("timing", "lags", "floors", "topdown", "prediction")
CLAIM_FIGURES = Part("claims", (Input("verdict", ("verdict.csv",), "summary"),), tuple(
    _figure(f"verdict_{fam}.png", "verdict_figures", f"verdict: {fam}")
    for fam in FIGURE_FAMILIES), "write_claim_figures")

# tables.html: the verdict first, then the protocol tables, the other tables, the JSON files
HTML_SECTIONS = (tuple(f for p in (VERDICT, HEADLINE, BENCHMARK, POWER, PROTOCOLS, TABLES) for f in p.files()
                       if f.endswith(".csv"))
                 + STATISTICS)
HTML = Part("html", (Input("tables", HTML_SECTIONS, "summary"),), _tables(
    ("tables.html", "tables_html", "all tables on one page"),
), "write_html", settings=False)

PARTS = (TABLES, SCALE, PREDICTION, POWER, BENCHMARK, VERDICT, HEADLINE, PROTOCOLS, FIGURES, CLAIM_FIGURES, HTML)
BY_NAME = {p.name: p for p in PARTS}
MIXTURE_FILES = frozenset(f for p in PARTS if p.mixtures_only for f in p.files())


def targets(levels=(), mixtures: bool = True) -> list[str]:
    """Every file of every part (relative to results/summary/), without the mixture-only
    parts' files when the grid has no mixture blocks."""
    return [f for p in PARTS if mixtures or not p.mixtures_only for f in p.files(levels)]
