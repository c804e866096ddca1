"""`openmle search --sandbox`: every shipped sandbox can be named."""

from __future__ import annotations

import pytest


def test_sandbox_specs_build_every_backend() -> None:
    """--sandbox names every shipped sandbox; a bad spec names the choices."""
    from openmle import backends
    from openmle._cli._search import build_sandbox
    from openmle.errors import InvalidArgument

    assert isinstance(build_sandbox("local"), backends.LocalSandbox)
    assert isinstance(build_sandbox("docker"), backends.DockerSandbox)
    assert isinstance(build_sandbox("ray"), backends.RaySandbox)
    service = build_sandbox("service:http://127.0.0.1:8765")
    assert isinstance(service, backends.JobServiceSandbox)
    assert service.base_url == "http://127.0.0.1:8765"
    with pytest.raises(InvalidArgument, match="local, docker, ray or service:URL"):
        build_sandbox("k8s")
