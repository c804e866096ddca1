"""The import graph of ``src/openmle`` points down: layers, no cycles, no private reach-ins.

Built with :mod:`ast` from the source: every ``import``, lazy ones inside functions included,
and every ``importlib.import_module("openmle...")`` (a literal, or a module-level string
constant); only ``if TYPE_CHECKING:`` blocks are skipped, since they never run. Checks:

- no cycle between modules, lazy or not, except the pairs in ``ALLOWED_CYCLES`` (each with the
  reason);
- no cycle between packages (``openmle.search``, ``openmle.priors``, ...), lazy or not;
- a package imports only packages of a lower layer (``LAYERS``), except the edges in
  ``ALLOWED_UPWARD`` (each with the reason). A package not named in ``LAYERS`` (a new one) sits
  on top: it may import everything, and nothing listed may import it;
- no package imports another package's private module (``openmle.gym._grader``): it uses the
  public surface, which holds the documented kit it offers upward.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping, Set
from pathlib import Path

import openmle

SRC = Path(openmle.__file__).parent

LAYERS: dict[str, int] = {
    # 0: leaves (no openmle imports but the error tree)
    "openmle.errors": 0,
    "openmle._version": 0,
    "openmle._exports": 0,
    "openmle._embedded": 0,
    "openmle._readback": 0,
    "openmle._writeback": 0,
    "openmle._trees": 0,
    "openmle._validation": 1,
    "openmle._compat": 1,
    "openmle._leaderboard": 1,
    "openmle._signature": 1,
    "openmle._summary_contract": 1,
    # values and protocols
    "openmle._types": 2,
    "openmle._wire": 3,
    "openmle._task_protocol": 3,
    "openmle._protocols": 3,
    "openmle._runlog": 4,
    # the pure libraries
    "openmle.rewards": 5,
    "openmle.operators": 5,
    "openmle.testing": 5,
    # the tracking seam (the protocol, JSONL, third-party trackers imported lazily): the search,
    # the bench and the trainers report through it
    "openmle.tracking": 5,
    # tasks, then the adapters that run them
    "openmle.gym": 6,
    "openmle.backends": 7,
    # what runs on the adapters: the search, and the job service (JobServiceSandbox's server)
    "openmle.search": 8,
    "openmle.service": 8,
    # priors sit on the search (RunDir, SearchPriors); the search takes rendered priors
    "openmle.priors": 9,
    "openmle.train": 10,
    "openmle.bench": 10,
    "openmle.builder": 10,
    # entry points
    "openmle": 11,
    "openmle._cli": 12,
    "openmle.__main__": 13,
}

ALLOWED_CYCLES: dict[frozenset[str], str] = {}
"""Module pairs allowed to import each other (none today)."""

ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    ("openmle.backends", "openmle.train"): (
        "deprecated aliases of the names that moved to openmle.train (the backends' module "
        "__getattr__, importlib; removed in openmle 0.2.0); nothing else"
    ),
    ("openmle.gym", "openmle.service"): (
        "openmle.gym.service, the deprecated alias module of openmle.service (importlib; "
        "removed in openmle 0.2.0); nothing else"
    ),
}
"""Package edges allowed to point up or sideways, with the reason."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _callee(func: ast.expr) -> str:
    """The last name of a call's target (``importlib.import_module`` -> ``import_module``)."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _targets(node: ast.AST, package: str, constants: dict[str, ast.expr]) -> list[str]:
    """The dotted names ``node`` imports: an ``import``, a ``from ... import`` (relative ones
    resolved against ``package``) or an ``importlib.import_module(...)`` call."""
    if isinstance(node, ast.Call) and _callee(node.func).endswith("import_module"):
        arg: ast.expr | None = node.args[0] if node.args else None
        if isinstance(arg, ast.Name):
            arg = constants.get(arg.id)
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return [arg.value]
        return []
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            up = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*up, base] if base else up)
        return [f"{base}.{a.name}" for a in node.names]
    return []


@functools.cache
def _graph() -> Mapping[str, frozenset[str]]:
    """Module -> the ``openmle`` modules it imports (parsed once per session; read-only)."""
    files = {_module_name(f): f for f in SRC.rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        constants: dict[str, ast.expr] = {  # module-level NAME = "..." (an importlib target)
            t.id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        skipped: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped.update(id(sub) for sub in ast.walk(node))
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets = _targets(node, package, constants)
            for target in targets:
                hit = known(target)
                if hit is not None and hit != mod:
                    edges[mod].add(hit)
    return {m: frozenset(t) for m, t in edges.items()}


def _cycles(edges: Mapping[str, Set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, todo = work[-1]
            if todo:
                w = todo.pop()
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, sorted(edges[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_cycle_between_modules() -> None:
    edges = _graph()
    bad = []
    for comp in _cycles(edges):
        if len(comp) == 2 and frozenset(comp) in ALLOWED_CYCLES:
            continue
        inner = [f"{a} -> {b}" for a in comp for b in sorted(edges[a] & set(comp))]
        bad.append("; ".join(inner))
    assert not bad, "import cycles (cut one direction, or allow it with a reason):\n" + "\n".join(
        bad
    )


def test_no_import_cycle_between_packages() -> None:
    """Packages form no cycle either (lazy and importlib imports counted): a package that needs
    something from above takes it as a value (the search takes rendered priors)."""
    edges: dict[str, set[str]] = {}
    for mod, targets in _graph().items():
        edges.setdefault(_package(mod), set()).update(
            _package(t) for t in targets if _package(t) != _package(mod)
        )
    for pkg in {t for ts in edges.values() for t in ts}:
        edges.setdefault(pkg, set())
    # The deprecated aliases point up on purpose (ALLOWED_UPWARD) and are not part of a design.
    for a, b in ALLOWED_UPWARD:
        edges[a].discard(b)
    assert _cycles(edges) == [], _cycles(edges)


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[2:])


def test_no_package_imports_another_packages_private_module() -> None:
    """A package uses another package's public surface or documented kit, never its
    ``_private`` modules (``openmle._types`` and other top-level private modules are the
    shared foundation, not a package's)."""
    bad = sorted(
        f"{mod} -> {target}"
        for mod, targets in _graph().items()
        for target in targets
        if _package(mod) != _package(target)
        and _package(target) != "openmle"
        and not _package(target).split(".")[1].startswith("_")
        and _private(target)
    )
    assert not bad, "use the package's public surface or its kit:\n" + "\n".join(bad)


def test_packages_import_only_lower_layers() -> None:
    top = max(LAYERS.values()) + 1
    bad = []
    for mod, targets in _graph().items():
        a = _package(mod)
        for target in targets:
            b = _package(target)
            if a == b or (a, b) in ALLOWED_UPWARD:
                continue
            if LAYERS.get(b, top) >= LAYERS.get(a, top):
                bad.append(
                    f"{mod} -> {target} ({a} layer {LAYERS.get(a, top)}, {b} layer "
                    f"{LAYERS.get(b, top)})"
                )
    assert not bad, "imports that point up or sideways:\n" + "\n".join(sorted(bad))


def test_the_checker_sees_lazy_imports_and_cycles() -> None:
    """The graph includes imports inside functions, and the cycle finder finds a cycle."""
    edges = _graph()
    assert "openmle.gym" in edges["openmle.search._entry"]  # a lazy import in a function
    assert "openmle.train" in edges["openmle.backends"]  # importlib.import_module("openmle.train")
    assert "openmle.service" in edges["openmle.gym.service"]  # import_module(_NEW), a constant
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


RUNS_LAYER = "openmle.search._runs"
"""Inside ``openmle.search``: the runs layer (export, report, SFT export) sits on the core. The
package's ``__init__`` (the facade) re-exports it; no other search module may import it."""


def test_the_search_core_does_not_import_the_runs_layer() -> None:
    def in_runs(module: str) -> bool:
        return module == RUNS_LAYER or module.startswith(RUNS_LAYER + ".")

    edges = _graph()
    core = [
        m
        for m in edges
        if m.startswith("openmle.search.") and not in_runs(m) and m != "openmle.search"
    ]
    assert "openmle.search._loop" in core and "openmle.search._rundir" in core
    bad = [f"{m} -> {t}" for m in core for t in sorted(edges[m]) if in_runs(t)]
    assert not bad, "the search core imports the runs layer:\n" + "\n".join(bad)
    # the layer is really there and really on top of the core
    assert "openmle.search._rundir" in edges[f"{RUNS_LAYER}.sft_export"]
    assert f"{RUNS_LAYER}.sft_export" in edges["openmle.search"]


def test_cards_are_a_leaf_value() -> None:
    """Experience cards import no board (the board makes cards, not the other way round)."""
    edges = _graph()
    assert edges["openmle.search._cards"] <= {
        "openmle._exports",
        "openmle._types",
        "openmle._validation",
        "openmle.errors",
        "openmle.search._families",
    }, sorted(edges["openmle.search._cards"])
    assert "openmle.search._cards" in edges["openmle.search._board"]


def test_gym_does_not_import_rewards() -> None:
    """The leaderboard CSV reader is one function with the leaderboard maths
    (``openmle._leaderboard``); task packages read leaderboards without the reward library."""
    edges = _graph()
    bad = [
        f"{m} -> {t}"
        for m in edges
        if _package(m) == "openmle.gym"
        for t in sorted(edges[m])
        if _package(t) == "openmle.rewards"
    ]
    assert not bad, "\n".join(bad)
    assert "openmle._leaderboard" in edges["openmle.gym._package"]


VALIDATOR_COPIES = frozenset({"_positive_int", "_nonneg_int", "_count", "_finite", "_str_tuple"})
"""Names of the validator/converter factories that were copied per module; they live once in
``openmle._validation`` (``int_at_least``, ``finite_or_none``, ``str_tuple``)."""


def test_validator_factories_live_once() -> None:
    bad = [
        f"{path.relative_to(SRC)}:{node.lineno} {node.name}"
        for path in sorted(SRC.rglob("*.py"))
        for node in ast.parse(path.read_text(), filename=str(path)).body  # module level
        if isinstance(node, ast.FunctionDef) and node.name in VALIDATOR_COPIES
    ]
    assert not bad, "use openmle._validation instead of a local copy:\n" + "\n".join(bad)
