"""Fixtures of the engine's tests: each backend the conformance scenarios run against (the list is
tests/helpers.py's BACKENDS: adding a backend is one entry there), and `cos protocol` processes to
talk to (tests/helpers.py's ProtocolProcess)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import BACKENDS, BackendCase, ProtocolProcess


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> BackendCase:
    """Each backend of BACKENDS in turn."""
    return BACKENDS[request.param]


@pytest.fixture
def protocol(project: Path) -> Iterator[Callable[..., ProtocolProcess]]:
    """Start `cos protocol` processes in the project; every one is ended after the test."""
    started: list[ProtocolProcess] = []

    def start(*args: str) -> ProtocolProcess:
        process = ProtocolProcess(project, *args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.end()
