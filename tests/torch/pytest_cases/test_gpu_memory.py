"""Tests run by tests/torch/pytest_check.py under `pytest --torchseal`.
Each name says what the plugin must decide; lines marked KEEP allocate what
a failing test keeps. simcuda runs no kernels: nothing here reads values."""
import pytest
import torch

kept = []


def test_leaks_into_a_global():
    x = torch.ones(256 * 1024, device="cuda")  # KEEP 1 MiB
    kept.append(x)


def test_clean():
    x = torch.ones(256 * 1024, device="cuda")
    assert x.numel() == 256 * 1024


def test_cache_is_not_a_leak():
    # The caching allocator keeps the freed block; in tensors mode it is
    # freed, and either way no Python object holds it.
    for _ in range(3):
        y = torch.empty(4 * 1024 * 1024, device="cuda")
        del y
    torch.cuda.synchronize()


@pytest.mark.limit_cuda_leaks("1 MiB")
def test_keeps_less_than_its_limit():
    kept.append(torch.ones(64 * 1024, device="cuda"))  # 256 KiB


@pytest.mark.limit_cuda_memory("1 MiB")
def test_peak_over_its_limit():
    y = torch.ones(1024 * 1024, device="cuda")  # 4 MiB, freed at once
    del y


def test_failing_assertion_stays_a_failure():
    x = torch.ones(4, device="cuda")
    assert x.numel() == 5


@pytest.fixture
def dumps_fail():
    """Makes the plugin's dumps fail from the call on (a full disk turns the
    output off); put back at teardown, after the plugin's dump."""
    import torchseal
    real = torchseal.dump
    yield lambda: setattr(torchseal, "dump", lambda *a, **k: False)
    torchseal.dump = real


def test_unreadable_dump_is_not_checked(dumps_fail):
    kept.append(torch.ones(256 * 1024, device="cuda"))  # kept, but nothing says so
    dumps_fail()
