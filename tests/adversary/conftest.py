"""The guarantee under attack: fixtures shared by the adversarial tests.

Every test here builds what a hostile user controls (neighbouring data sets, a hostile record, a
hostile model, a known seed, extreme but legal parameters) and shows that the input is refused
with a ``ValueError`` or neutralised, so no released output depends on it in a way the privacy
accounting does not cover.
"""
import pytest


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny torch models run fastest on one CPU thread (restored afterwards)."""
    import torch
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
