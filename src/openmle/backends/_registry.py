"""One registry from a spec string to a sandbox or an operator model.

Every place that takes a sandbox by name (``openmle search``/``resume``/``serve``, the job
service's config, the Ray sandbox's inner sandbox) and every ``--model`` goes through
:func:`make_sandbox` / :func:`make_model`, so all accept the same spellings:

- a registered name, ``NAME`` -> ``factory(**options)``; with an argument, ``NAME:ARG`` ->
  ``factory(ARG, **options)`` (``service:URL``, ``replay:FILE``, ``openai:URL#MODEL``);
- ``module:callable`` -> the callable imported from the module, called with ``**options``; the
  module is found as ``python -m`` would find it (installed, or in the current folder; the CLI's
  ``--app-dir DIR`` names another folder);
- a name a third-party package declares as an entry point in group ``openmle.sandboxes``
  (``openmle.models`` for models); the entry point names the factory.

Names are looked up in this order: built-in and :func:`register_sandbox` names, then entry
points, then ``module:callable``. Registrations made in one process are not seen by other
processes (a Ray worker, a job service started elsewhere): there, name the factory by
``module:callable`` or an entry point.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import re
import sys
import weakref
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

from openmle._protocols import OperatorModel, Sandbox
from openmle.errors import InvalidArgument

__all__ = [
    "make_model",
    "make_sandbox",
    "model_names",
    "register_model",
    "register_sandbox",
    "sandbox_names",
    "spec_of",
]

Factory = Callable[..., Any]

SANDBOX_GROUP = "openmle.sandboxes"
MODEL_GROUP = "openmle.models"

_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


# ---------------------------------------------------------------------------------- built-ins


def _service(url: str, **options: Any) -> Any:
    from openmle.backends._jobclient import JobServiceSandbox

    if not url.startswith(("http://", "https://")):
        raise InvalidArgument(
            f"--sandbox service:URL needs http(s)://HOST:PORT (e.g. service:http://{url}); "
            f"got service:{url}"
        )
    return JobServiceSandbox(base_url=url, **options)


def _offline_numpy(**options: Any) -> Any:
    from openmle.backends._offline import OfflineModel

    return OfflineModel(sklearn=False, **options)


def _replay(path: str, **options: Any) -> Any:
    from openmle.backends._replay import ReplayModel

    return ReplayModel(path, **options)


def _openai(target: str, **options: Any) -> Any:
    from openmle import backends

    if "OpenAIModel" not in backends.__all__:
        raise InvalidArgument(
            "model openai:URL needs the OpenAI-compatible backend, which this build of "
            "openmle does not include; use offline or replay:FILE"
        )
    url, _, name = target.partition("#")
    return backends.OpenAIModel(base_url=url, model=name or "default", **options)


# A built-in is a factory or "module:attr", imported when first named (so the factory's own
# signature says which options it takes, and naming one backend imports no other).
_SANDBOXES: dict[str, Factory | str] = {
    "docker": "openmle.backends._docker:DockerSandbox",
    "local": "openmle.backends._local:LocalSandbox",
    "ray": "openmle.backends._ray:RaySandbox",
    "service": _service,
}
_MODELS: dict[str, Factory | str] = {
    "offline": "openmle.backends._offline:OfflineModel",
    "offline-numpy": _offline_numpy,
    "openai": _openai,
    "replay": _replay,
}
# Built-in wrappers passing ``**options`` on to a class: which options they take is the class's.
_WRAPS: dict[Factory, str] = {
    _service: "openmle.backends._jobclient:JobServiceSandbox",
    _replay: "openmle.backends._replay:ReplayModel",
}

# Built-ins that need an argument, with how to spell it (for error messages).
_NEEDS_ARG = {"service": "service:URL", "replay": "replay:FILE", "openai": "openai:URL[#MODEL]"}

# object -> the spec that built it, so a run manifest can record how to rebuild it.
_SPECS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


# -------------------------------------------------------------------------------- public API


def register_sandbox(name: str, factory: Factory) -> None:
    """Make ``name`` a sandbox spec: ``make_sandbox(name)`` calls ``factory(**options)``.

    ``make_sandbox(f"{name}:ARG")`` calls ``factory("ARG", **options)``. The name is known in
    this process only; a package that wants its sandbox found by name everywhere declares an
    entry point in group ``openmle.sandboxes`` instead.

    Raises:
        InvalidArgument: ``name`` is not lower-case letters, digits, ``-`` and ``_``, is
            already registered, or ``factory`` is not callable.
    """
    _register(_SANDBOXES, "sandbox", name, factory)


def register_model(name: str, factory: Factory) -> None:
    """Make ``name`` a ``--model`` spec for an operator model (as :func:`register_sandbox`).

    Entry point group: ``openmle.models``.
    """
    _register(_MODELS, "model", name, factory)


def make_sandbox(spec: str, **options: Any) -> Sandbox:
    """Build the sandbox named by ``spec``: ``local``, ``docker``, ``ray``, ``service:URL``,
    ``module:callable``, a :func:`register_sandbox` name or an ``openmle.sandboxes`` entry
    point; ``options`` are passed to its factory as keywords.

    Raises:
        InvalidArgument: the spec names nothing, the factory does not take these options, or
            it returned something that is not a :class:`~openmle.Sandbox`.
        MissingDependency: the named backend's optional dependency is not installed.
    """
    sandbox: Sandbox = _make(_SANDBOXES, SANDBOX_GROUP, "sandbox", spec, options, {})
    return sandbox


def make_model(spec: str, **options: Any) -> OperatorModel:
    """Build the operator model named by ``spec``: ``offline``, ``offline-numpy``,
    ``replay:FILE``, ``openai:URL[#MODEL]``, ``module:callable``, a :func:`register_model`
    name or an ``openmle.models`` entry point; ``options`` go to its factory as keywords.

    Raises:
        InvalidArgument: the spec names nothing, the factory does not take these options, or
            it returned something that is not an :class:`~openmle.OperatorModel`.
    """
    model: OperatorModel = _make(_MODELS, MODEL_GROUP, "model", spec, options, {})
    return model


# ------------------------------------------------------------------------- internal helpers


def sandbox_names() -> list[str]:
    """Built-in, registered and entry-point sandbox names (for help texts and errors)."""
    return _names(_SANDBOXES, SANDBOX_GROUP)


def model_names() -> list[str]:
    """Built-in, registered and entry-point model names."""
    return _names(_MODELS, MODEL_GROUP)


def spec_of(obj: object) -> str | None:
    """The spec :func:`make_sandbox`/:func:`make_model` built ``obj`` from, if it did."""
    try:
        return _SPECS.get(obj)
    except TypeError:  # not weak-referenceable: not built here
        return None


def build_sandbox(spec: str, options: Mapping[str, Any], optional: Mapping[str, Any]) -> Sandbox:
    """:func:`make_sandbox` plus ``optional`` keywords passed only where the factory takes them
    (the job service's ``workdir``, the Ray sandbox's ``resolver``).
    """
    sandbox: Sandbox = _make(_SANDBOXES, SANDBOX_GROUP, "sandbox", spec, options, optional)
    return sandbox


def check_sandbox_spec(spec: str) -> None:
    """Raise :class:`InvalidArgument` unless ``spec`` names a sandbox factory (none is called)."""
    _resolve(_SANDBOXES, SANDBOX_GROUP, "sandbox", spec)


def sandbox_takes(spec: str, option: str) -> bool:
    """Whether the factory ``spec`` names takes the keyword ``option`` (none is called).

    Raises:
        InvalidArgument: ``spec`` names no sandbox factory.
    """
    factory, _ = _resolve(_SANDBOXES, SANDBOX_GROUP, "sandbox", spec)
    return _accepts(factory, option)


def _register(table: dict[str, Factory | str], kind: str, name: str, factory: Factory) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidArgument(
            f"Expected a {kind} name of lower-case letters, digits, '-' and '_' but got {name!r}"
        )
    if not callable(factory):
        raise InvalidArgument(f"Expected a callable {kind} factory but got {factory!r}")
    if name in table:
        raise InvalidArgument(f"{kind} name {name!r} is already registered; choose another name")
    table[name] = factory


def _entry_point(group: str, name: str) -> Factory | None:
    for ep in metadata.entry_points(group=group, name=name):
        try:
            factory = ep.load()
        except Exception as exc:
            raise InvalidArgument(
                f"cannot load {group} entry point {name!r} ({ep.value}): {exc}"
            ) from None
        if not callable(factory):
            raise InvalidArgument(f"{group} entry point {name!r} ({ep.value}) is not callable")
        return factory  # type: ignore[no-any-return]
    return None


def _names(table: Mapping[str, Factory | str], group: str) -> list[str]:
    names = {_NEEDS_ARG.get(n, n) for n in table}
    names |= {ep.name for ep in metadata.entry_points(group=group)}
    return sorted(names)


def _resolve(
    table: Mapping[str, Factory | str], group: str, kind: str, spec: str
) -> tuple[Factory, tuple[str, ...]]:
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidArgument(f"Expected a {kind} spec but got {spec!r}")
    head, sep, arg = spec.partition(":")
    args: tuple[str, ...] = (arg,) if sep else ()
    entry = table.get(head)
    factory: Factory | None
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    else:
        factory = entry
    if factory is None and _NAME.match(head):
        factory = _entry_point(group, head)
    if factory is not None:
        if sep and not arg:
            raise InvalidArgument(f"Expected {kind} {head}:ARG with a non-empty ARG; got {spec!r}")
        if not sep and head in _NEEDS_ARG:
            raise InvalidArgument(f"{kind} {head!r} needs an argument: {_NEEDS_ARG[head]}")
        return factory, args
    if sep and _DOTTED.match(head) and _DOTTED.match(arg):
        try:
            obj: Any = _import_app_module(head, kind, spec)
            for part in arg.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise InvalidArgument(f"cannot load {kind} factory {spec!r}: {exc}") from None
        if not callable(obj):
            raise InvalidArgument(f"{kind} factory {spec!r} is not callable")
        return obj, ()
    raise InvalidArgument(
        f"Expected --{kind} to be one of {', '.join(_names(table, group))}, or module:callable; "
        f"got {spec!r}"
    )


def _import_app_module(module: str, kind: str, spec: str) -> Any:
    """Import ``module`` as ``python -m`` would find it: installed, or from the current folder.

    A console script does not put the current folder on ``sys.path`` (``python -m`` does), so
    ``--sandbox myagent.sandbox:make`` run from the project folder that holds ``myagent/``
    found nothing. When the top-level package is missing from ``sys.path`` and the current
    folder holds it, the current folder is added to ``sys.path`` and the import retried.

    Raises:
        InvalidArgument: the top-level package is nowhere; says what was searched and the two
            ways to fix it.
    """
    top = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != top:
            raise
    here = os.getcwd()
    if here not in sys.path and (
        os.path.isdir(os.path.join(here, top)) or os.path.isfile(os.path.join(here, f"{top}.py"))
    ):
        sys.path.insert(0, here)
        return importlib.import_module(module)
    searched = [p or here for p in sys.path]
    shown = ", ".join(searched[:4]) + (
        f" and {len(searched) - 4} more" if len(searched) > 4 else ""
    )
    raise InvalidArgument(
        f"cannot load {kind} factory {spec!r}: no module named {top!r}; searched the current "
        f"folder {here} and sys.path ({shown}). Either run from the folder that holds {top}/ "
        f"(or {top}.py), or pass --app-dir DIR naming it (in Python: sys.path.insert(0, DIR)); "
        f"or install your project (pip install -e DIR) so {top} imports from anywhere"
    )


def _accepts(factory: Factory, name: str) -> bool:
    target = _WRAPS.get(factory)
    if target is not None:  # a built-in wrapper: ask the class it builds
        module, _, attr = target.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _make(
    table: Mapping[str, Factory | str],
    group: str,
    kind: str,
    spec: str,
    options: Mapping[str, Any],
    optional: Mapping[str, Any],
) -> Any:
    factory, args = _resolve(table, group, kind, spec)
    kwargs = dict(options)
    for key, value in optional.items():
        if key not in kwargs and _accepts(factory, key):
            kwargs[key] = value
    try:
        inspect.signature(factory).bind(*args, **kwargs)
    except TypeError as exc:
        unknown = sorted(k for k in kwargs if not _accepts(factory, k))
        what = f"option(s) {unknown}" if unknown else f"options {sorted(kwargs)}"
        raise InvalidArgument(
            f"{kind} factory for {spec!r} does not take "
            f"{'an argument and ' if args else ''}{what}: {exc}"
        ) from None
    except ValueError:
        pass  # no signature to check (a builtin): let the call say
    obj = factory(*args, **kwargs)
    protocol: type = Sandbox if kind == "sandbox" else OperatorModel
    if not isinstance(obj, protocol):
        need = "async run(job) and async aclose()" if kind == "sandbox" else "async complete()"
        raise InvalidArgument(
            f"{kind} factory {spec!r} returned {type(obj).__name__}, not "
            f"{'a Sandbox' if kind == 'sandbox' else 'an OperatorModel'} (needs {need})"
        )
    with contextlib.suppress(TypeError):  # not weak-referenceable: no spec is recorded
        _SPECS[obj] = spec
    return obj
