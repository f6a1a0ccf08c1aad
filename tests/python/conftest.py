import numpy as np
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs PyTorch with a CUDA GPU (fails where there is none; scripts/test leaves such files out there)")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
