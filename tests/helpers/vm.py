"""Fixtures for tests on the VictoriaMetrics samples store: one real binary per test module,
a store emptied after each test, and the process's store swapped for it where asked."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.helpers.services import victoriametrics
from timeline import samples
from timeline.samples_vm import VmSampleStore
from timeline.vm_client import VmClient


@pytest.fixture(scope="module")
def vm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real VictoriaMetrics for the module (skips, or fails under REQUIRE_VICTORIAMETRICS)."""
    with victoriametrics(tmp_path_factory.mktemp("vm")) as url:
        yield url


@pytest.fixture()
def vm_store(vm_url: str) -> Iterator[VmSampleStore]:
    """A VM store that reads its own writes at once, emptied after the test."""
    with httpx.Client(timeout=30) as client:
        vm = VmClient(vm_url, client=client, flush_writes=True)
        yield VmSampleStore(vm)
        vm.delete('{__name__=~"fleetmedic_gpu_.+"}')


@pytest.fixture()
def on_vm(vm_store: VmSampleStore) -> Iterator[VmSampleStore]:
    """The process's sample store is the VM store for this test."""
    old = samples.use(vm_store)
    try:
        yield vm_store
    finally:
        samples.use(old)
