"""Shared test setup: GPU tests skip with a reason where no CUDA device is present."""
from __future__ import annotations

import functools

import pytest


@functools.cache
def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no usable torch means no GPU tests
        return False


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject's addopts): two test processes without a GPU; one where CUDA is
    present, so that no two tests time kernels on the GPU at once."""
    import os

    return 1 if cuda_available() else max(1, min(2, os.cpu_count() or 1))


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device; none is present on this machine")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _no_fork_server_by_default():
    """Without a GPU (CI), most tests make a short-lived pool that judges a candidate or two: a
    fork server each (one more `import torch`) costs the 2-core machine more than it saves
    (the pool tests: 179 s with it, 163 s without). Its own tests ask for it (fork_server=True);
    on a GPU box every test runs with the product's default."""
    from workbench.gpu import forkserver

    with pytest.MonkeyPatch.context() as patch:
        if not cuda_available():
            patch.setenv(forkserver.DISABLE_ENV, "0")
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_verifier_daemon_by_default():
    """`eval` in a test verifies in its own process: a daemon per test (each its own cache and
    fingerprint) would outlive the test by its idle time, holding workers (and, on a GPU box,
    GPU memory). tests/test_daemon.py switches it on and stops what it started."""
    from workbench.gpu import daemon_link

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(daemon_link.DISABLE_ENV, "0")
        yield


@pytest.fixture(autouse=True, scope="session")
def _verdict_key(tmp_path_factory):
    """Verdicts are sealed with a key of the test run's own, not the developer's install key
    (subprocesses the tests start inherit it)."""
    import os

    from workbench import verdict_seal

    path = tmp_path_factory.mktemp("verdict-key") / "verdict.key"
    previous = os.environ.get(verdict_seal.KEY_ENV)
    os.environ[verdict_seal.KEY_ENV] = str(path)
    yield path
    if previous is None:
        os.environ.pop(verdict_seal.KEY_ENV, None)
    else:
        os.environ[verdict_seal.KEY_ENV] = previous
