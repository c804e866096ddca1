"""One registry from spec strings to sandboxes and operator models (openmle.backends)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._plugin_pkg import write_plugin_package
from tests._sandboxes import assert_builds_shipped_sandboxes

from openmle import Job, Outcome, RunResult, Split, backends
from openmle.backends import _registry, make_model, make_sandbox, register_sandbox
from openmle.errors import InvalidArgument


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A package with ``openmle.sandboxes``/``openmle.models`` entry points on sys.path."""
    name = f"kitplugin_{tmp_path.name.replace('-', '_').lower()}"[:60]
    write_plugin_package(tmp_path / "site", name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv(f"{name.upper()}_LOG", str(tmp_path / "log"))
    return name


def test_builtin_sandbox_names() -> None:
    """local, docker, ray and service:URL build the shipped sandboxes; options pass through."""
    assert_builds_shipped_sandboxes(make_sandbox)
    local = make_sandbox("local", keep_workspaces=True)
    assert isinstance(local, backends.LocalSandbox) and local.keep_workspaces is True
    assert _registry.spec_of(local) == "local"


def test_builtin_model_names(tmp_path: Path) -> None:
    """offline, offline-numpy and replay:FILE build the shipped models."""
    assert isinstance(make_model("offline"), backends.OfflineModel)
    assert isinstance(make_model("offline-numpy"), backends.OfflineModel)
    recording = tmp_path / "rec.jsonl"
    recording.write_text("")
    replay = make_model(f"replay:{recording}")
    assert isinstance(replay, backends.ReplayModel)
    assert _registry.spec_of(replay) == f"replay:{recording}"


def test_bad_specs_name_the_choices() -> None:
    """Unknown names list every spelling; bad factories and options are refused clearly."""
    with pytest.raises(InvalidArgument, match=r"local, ray, service:URL, or module:callable"):
        make_sandbox("k8s")
    with pytest.raises(InvalidArgument, match="offline-numpy, openai:URL"):
        make_model("gpt")
    with pytest.raises(InvalidArgument, match="needs an argument: service:URL"):
        make_sandbox("service")
    with pytest.raises(InvalidArgument, match="non-empty ARG"):
        make_sandbox("service:")
    for spec in ("nope", "openmle:", "no_such_module_x:f", "openmle:no_such_attr", ""):
        with pytest.raises(InvalidArgument):
            make_sandbox(spec)
    with pytest.raises(InvalidArgument, match="not a Sandbox"):
        make_sandbox("builtins:dict")
    with pytest.raises(InvalidArgument, match="not an OperatorModel"):
        make_model("builtins:dict")
    with pytest.raises(InvalidArgument, match=r"does not take option\(s\) \['no_such_option'\]:"):
        make_sandbox("local", no_such_option=1, max_concurrency=2)  # names only the unknown


def test_module_callable(plugin: str) -> None:
    """``module:callable`` imports the factory and checks what it returns."""
    sandbox: Any = make_sandbox(f"{plugin}:make")
    assert type(sandbox).__name__ == "FixedSandbox" and sandbox.tag == "factory"
    assert _registry.spec_of(sandbox) == f"{plugin}:make"
    with pytest.raises(InvalidArgument, match="returned int, not a Sandbox"):
        make_sandbox(f"{plugin}:not_a_sandbox")
    model = make_model(f"{plugin}:make_model")
    assert type(model).__name__ == "LoggedModel"


def test_entry_points_register_parts_by_name(plugin: str, tmp_path: Path) -> None:
    """A package's ``openmle.sandboxes``/``openmle.models`` entry points are found by name,
    listed in the error for an unknown name, and the sandbox works."""
    sandbox: Any = make_sandbox(f"{plugin}-box")
    assert sandbox.tag == "entry"
    assert f"{plugin}-box" in _registry.sandbox_names()
    assert f"{plugin}-model" in _registry.model_names()
    with pytest.raises(InvalidArgument, match=f"{plugin}-box"):
        make_sandbox("no-such-box")
    assert type(make_model(f"{plugin}-model")).__name__ == "LoggedModel"

    async def one() -> Outcome:
        result: RunResult = await sandbox.run(Job(code="print(1)", task="t", split=Split.VALID))
        return result.outcome

    assert anyio.run(one) is Outcome.SUCCESS
    assert (tmp_path / "log").read_text() == "entry valid\n"


def test_optional_options_reach_only_factories_that_take_them(plugin: str) -> None:
    """The job service's ``workdir`` goes to factories that take it, and is left out for others."""
    from openmle.service import load_sandbox

    taken: Any = load_sandbox(f"{plugin}-box", workdir=Path("/tmp/w"))
    assert taken.workdir == Path("/tmp/w")
    assert load_sandbox(f"{plugin}:make", workdir=Path("/tmp/w")).workdir is None  # type: ignore[attr-defined]
    local: Any = load_sandbox("local", workdir=Path("/tmp/w"))
    assert local.workdir == Path("/tmp/w")


def test_register_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registered name builds with and without an argument; names are checked, not replaced."""
    monkeypatch.setattr(_registry, "_SANDBOXES", dict(_registry._SANDBOXES))
    made: list[tuple[Any, ...]] = []

    def factory(*args: str, **options: Any) -> backends.LocalSandbox:
        made.append((args, options))
        return backends.LocalSandbox()

    register_sandbox("mine", factory)
    assert isinstance(make_sandbox("mine"), backends.LocalSandbox)
    make_sandbox("mine:arg", keep_workspaces=False)
    assert made == [((), {}), (("arg",), {"keep_workspaces": False})]
    with pytest.raises(InvalidArgument, match="already registered"):
        register_sandbox("local", factory)
    with pytest.raises(InvalidArgument, match="lower-case"):
        register_sandbox("Bad Name", factory)
    with pytest.raises(InvalidArgument, match="callable"):
        register_sandbox("other", 3)  # type: ignore[arg-type]


def test_ray_inner_goes_through_the_registry(plugin: str) -> None:
    """RaySandbox.inner accepts any spec the registry knows, checked when it is made."""
    from openmle.backends._ray import _make_inner

    backends.RaySandbox(inner=f"{plugin}:make")
    with pytest.raises(InvalidArgument):
        backends.RaySandbox(inner="k8s")
    with pytest.raises(InvalidArgument, match="other than ray"):
        backends.RaySandbox(inner="ray")
    inner: Any = _make_inner(f"{plugin}-box", {}, None)
    assert inner.tag == "entry"
    local: Any = _make_inner("local", {"keep_workspaces": True}, lambda ref: None)  # type: ignore[arg-type,return-value]
    assert local.keep_workspaces is True and local.resolver is not None


def test_bench_sandbox_goes_through_the_registry(plugin: str) -> None:
    """The bench takes any sandbox spec whose factory takes its task resolver, and a job
    service (its jobs name the bench's tasks); a factory that takes neither is refused."""
    from openmle.bench import bench_sandbox

    def resolver(ref: str) -> Any:
        raise AssertionError("not called")

    local: Any = bench_sandbox("local")(resolver)
    assert isinstance(local, backends.LocalSandbox) and local.resolver is resolver
    assert isinstance(bench_sandbox("docker")(resolver), backends.DockerSandbox)
    assert callable(bench_sandbox("service:http://127.0.0.1:1"))  # nothing contacted yet
    with pytest.raises(InvalidArgument, match="taking resolver="):
        bench_sandbox(f"{plugin}:make")
    with pytest.raises(InvalidArgument, match="module:callable"):
        bench_sandbox("k8s")
