"""Fixtures shared by the unit tests."""
import pytest


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run a module's tiny torch models on one CPU thread, then restore the setting.

    Small models train fastest on one thread, and on a shared 2-core machine torch's default
    threads oversubscribe the cores (5–30× slower measured under load)."""
    import torch
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def model():
    """The offline language model of the DP-ICL chapter (:class:`dplib.icl.OfflineICL`)."""
    from dplib.icl import OfflineICL
    return OfflineICL()


@pytest.fixture(scope="session")
def sentiment():
    """The book's offline sentiment data set of the DP-ICL chapter."""
    from dplib.icl import load_book_data
    return load_book_data("sentiment")
