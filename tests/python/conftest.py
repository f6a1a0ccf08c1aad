import numpy as np
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs PyTorch with a CUDA GPU (skipped, visibly, where there is none)")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
