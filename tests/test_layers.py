"""The import structure of src/geoanatomy, imports inside functions included (read from the
source with ast, so a lazy import counts as an arrow): every arrow points to the module's own
floor or below, no two modules import each other through any path, and nothing dispatches
across layers by name (importlib.import_module, globals()[...])."""
import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "geoanatomy"

# the floors of docs/where-things-go.md ("Layout of src/geoanatomy/"), bottom first
FLOORS = [
    {"version", "errors", "files", "manifest", "runtime", "spec", "schedule", "tasks", "sizes", "throughput",
     "model", "detectors", "table", "checkpoints", "baselines", "classes"},
    {"measures", "defaults", "precursor", "config", "mixture", "cost"},
    {"stages", "plots", "export", "hf"},
    {"analysis", "report"},
    {"pythia", "monitor", "scan"},
    {"cli", "api"},
    {"geoanatomy"},          # the package root: the public facade (open_run, open_summary), imported by none
]
FLOOR = {c: i for i, f in enumerate(FLOORS) for c in f}


def _modules() -> dict:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (p, is_pkg)
    return out


def _imports(mods: dict) -> dict:
    """{module: {imported module}} over every import statement, at any depth."""
    def resolve(name):
        while name and name not in mods:
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return name
    graph = {}
    for m, (p, is_pkg) in mods.items():
        pkg = m if is_pkg else m.rsplit(".", 1)[0]
        targets = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if mod.startswith("geoanatomy"):
                    # `from pkg import sub` depends on the submodule; `from pkg import name` on pkg
                    targets |= {f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else resolve(mod) for a in node.names}
            elif isinstance(node, ast.Import):
                targets |= {resolve(a.name) for a in node.names if a.name.startswith("geoanatomy")}
        graph[m] = {t for t in targets if t and t != m}
    return graph


def _component(m: str) -> str:
    return m.split(".")[1] if "." in m else m


_GRAPH = {}


def _graph() -> dict:
    """The package's import graph, read once per session."""
    if not _GRAPH:
        _GRAPH.update(_imports(_modules()))
    return _GRAPH


def test_every_component_has_a_floor():
    assert {_component(m) for m in _modules()} <= set(FLOOR), {_component(m) for m in _modules()} - set(FLOOR)


def test_no_arrow_points_up():
    graph = _graph()
    up = sorted((m, t) for m, ts in graph.items() for t in ts
                if FLOOR[_component(t)] > FLOOR[_component(m)])
    assert not up, up


def test_no_import_circle():
    graph = _graph()
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v, counter=[0]):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_nothing_dispatches_by_name():
    bad = []
    for m, (p, _) in _modules().items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = (f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "")
                if name in ("import_module", "__import__", "globals"):
                    bad.append((m, name, node.lineno))
    assert not bad, bad


def test_the_layers_test_can_fail(tmp_path):
    """The graph reader sees a lazy upward import and a circle in hand-made modules."""
    global SRC
    pkg = tmp_path / "geoanatomy"
    (pkg / "tasks").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "tasks" / "__init__.py").write_text("def f():\n    from ..cli import main\n")
    (pkg / "cli.py").write_text("from .tasks import f\n")
    old, SRC = SRC, pkg
    try:
        graph = _imports(_modules())
    finally:
        SRC = old
    assert graph["geoanatomy.tasks"] == {"geoanatomy.cli"}
    assert graph["geoanatomy.cli"] == {"geoanatomy.tasks"}


def test_the_outside_model_branches_are_peers():
    """pythia, monitor and scan share the hub module (hf.hub) and the figures (plots) from below
    and never import each other, so they do not stack into floors of their own."""
    peers = {"pythia", "monitor", "scan"}
    across = sorted((m, t) for m, ts in _graph().items() for t in ts
                    if _component(m) in peers and _component(t) in peers and _component(t) != _component(m))
    assert not across, across


def test_the_import_graph_is_at_most_nine_floors_deep():
    """The longest chain of components (each importing the next) spans at most 9 floors."""
    comp = {}
    for m, ts in _graph().items():
        comp.setdefault(_component(m), set()).update(_component(t) for t in ts if _component(t) != _component(m))
    depth: dict = {}

    def d(c, seen=()):
        if c not in depth:
            depth[c] = 1 + max((d(t, seen + (c,)) for t in comp.get(c, ()) if t not in seen), default=0)
        return depth[c]
    deepest = max(d(c) for c in comp)
    assert deepest <= 9, {c: v for c, v in sorted(depth.items(), key=lambda kv: -kv[1])[:5]}
