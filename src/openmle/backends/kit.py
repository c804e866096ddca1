"""The kit the backends offer the packages built on them: the sandbox factory by spec and the
stale-run sweep.

For the job service, the task builder, the bench and the CLI (layers above the backends; see
``docs/explanation/architecture.md``); a package above imports from this module, never from
``openmle.backends._something``.

- **Sandbox factory by spec**: :func:`build_sandbox` (``"local"``, ``"docker"``,
  ``"service:URL"``, ``module:callable``, a registered name or an ``openmle.sandboxes`` entry
  point, with options, plus optional keywords passed only where the factory takes them),
  :func:`sandbox_takes` (whether a spec's factory takes a keyword, nothing built),
  :func:`check_sandbox_spec` (whether a spec names a factory). :func:`openmle.backends.make_sandbox`
  is the same registry for end users.
- **Stale-run sweep**: :func:`remove_stale_cgroups` (the cgroups a killed process's sandboxes
  left) and :func:`safe_rmtree` (remove a run directory a program may have made hostile:
  read-only directories, links).
"""

from __future__ import annotations

from openmle._exports import publish
from openmle.backends._registry import build_sandbox, check_sandbox_spec, sandbox_takes
from openmle.backends._stale import remove_stale_cgroups, safe_rmtree

__all__ = [
    "build_sandbox",
    "check_sandbox_spec",
    "remove_stale_cgroups",
    "safe_rmtree",
    "sandbox_takes",
]

publish(globals(), private=("openmle.backends._",))
