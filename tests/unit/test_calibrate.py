"""calibrate_noise (both accountants) and a coarse stress/monotonicity grid for the accountants."""
import itertools

import numpy as np
import pytest

from dplib.accounting import PLDAccountant, RDPAccountant, calibrate_noise


def _eps(kind, sigma, q, T, delta=1e-5):
    acc = RDPAccountant() if kind == "rdp" else PLDAccountant()
    return acc.step(noise_multiplier=sigma, sample_rate=q, num_steps=T).get_epsilon(delta)


@pytest.mark.parametrize("kind", ["rdp", "pld"])
@pytest.mark.parametrize("q,sigma,T", [(256 / 60000, 1.1, 14062), (0.01, 1.0, 1000)])
def test_calibrate_recovers_sigma(kind, q, sigma, T):
    target = _eps(kind, sigma, q, T)
    got = calibrate_noise(target, 1e-5, q, T, accountant=kind)
    assert got == pytest.approx(sigma, rel=1e-4)
    assert _eps(kind, got, q, T) <= target            # the returned σ meets the target
    assert _eps(kind, got * (1 - 1e-3), q, T) > target  # and is not much larger than needed


def test_pld_needs_less_noise_than_rdp():
    s_rdp = calibrate_noise(1.0, 1e-5, 0.01, 2000, accountant="rdp")
    s_pld = calibrate_noise(1.0, 1e-5, 0.01, 2000, accountant="pld")
    assert s_pld < s_rdp


@pytest.mark.parametrize("call,name", [
    (lambda: calibrate_noise(0.0, 1e-5, 0.01, 100), "target_epsilon"),
    (lambda: calibrate_noise(1.0, 1.0, 0.01, 100), "delta"),
    (lambda: calibrate_noise(1.0, 1e-5, 0.0, 100), "sample_rate"),
    (lambda: calibrate_noise(1.0, 1e-5, 0.01, 0), "num_steps"),
    (lambda: calibrate_noise(1.0, 1e-5, 0.01, 100, accountant="gdp"), "accountant"),
    (lambda: calibrate_noise(1e-9, 1e-5, 1.0, 10**6), "target_epsilon"),
])
def test_bad_input_names_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


QS, SIGMAS, TS = [1e-4, 0.01, 1.0], [0.3, 1.0, 20.0], [1, 1000, 10**6]


@pytest.mark.parametrize("kind", ["rdp", "pld"])
def test_stress_grid_finite_and_monotone(kind):
    """Coarse grid over q ∈ [1e-4, 1], σ ∈ [0.3, 20], T ∈ [1, 1e6]: every ε finite, ≥ 0, and
    non-decreasing in T, non-increasing in σ (up to the accountant's discretisation, 1e-9)."""
    eps = np.empty((len(QS), len(SIGMAS), len(TS)))
    for (a, q), (b, s), (c, t) in itertools.product(enumerate(QS), enumerate(SIGMAS), enumerate(TS)):
        eps[a, b, c] = _eps(kind, s, q, t)
    assert np.all(np.isfinite(eps)) and np.all(eps >= 0)
    tol = 1e-9 * np.maximum(eps, 1.0)
    assert np.all(np.diff(eps, axis=2) >= -tol[:, :, 1:])   # more steps: more ε
    assert np.all(np.diff(eps, axis=1) <= tol[:, 1:, :])    # more noise: less ε
    assert np.all(np.diff(eps, axis=0) >= -tol[1:])         # larger q: more ε


def test_pld_calibration_needs_few_evaluations_of_the_accountant(monkeypatch):
    """A PLD evaluation costs up to a few tenths of a second at 1e9 steps, so the search must not
    spend a dozen of them: it starts from the RDP root, locates the root on a cheap proxy (smaller
    grids) and then needs only a few evaluations of the real accountant. Each calibration still
    meets its target, and 0.999σ misses it."""
    from dplib.accounting import pld as P
    counted = []
    real = P.PLDAccountant.get_epsilon

    def counting(self, delta):
        if getattr(self, "_max_grid", P.MAX_GRID_SIZE) == P.MAX_GRID_SIZE:
            counted.append(self.history[0].noise_multiplier)
        return real(self, delta)

    monkeypatch.setattr(P.PLDAccountant, "get_epsilon", counting)
    for target, q, T in [(1.0, 0.01, 2000), (2.0, 256 / 60000, 14062), (0.1, 1e-4, 10 ** 6)]:
        counted.clear()
        sigma = calibrate_noise(target, 1e-5, q, T, accountant="pld")
        assert len(counted) <= 5
        assert _eps("pld", sigma, q, T) <= target < _eps("pld", sigma * 0.999, q, T)


def test_safe_log_root_brackets_from_any_guess_and_lands_on_the_safe_side():
    """excess(s) = 3/s − 1: the root is 3. From guesses below, above and around it the result is
    ≥ 3 (ε at most the target) and within rtol; the floor and the ceiling are honoured."""
    from dplib.accounting.calibrate import safe_log_root
    f = lambda s: 3.0 / s - 1.0     # noqa: E731
    for lo, hi in ((0.01, 0.02), (50.0, 60.0), (1.0, 10.0)):
        s = safe_log_root(f, lo, hi, rtol=1e-8)
        assert f(s) <= 0 and 3.0 <= s <= 3.0 * (1 + 1e-8)
    assert safe_log_root(f, 5.0, 6.0, rtol=1e-8, floor=4.0) == 4.0   # even the floor is enough
    with pytest.raises(ValueError, match="too big"):
        safe_log_root(f, 0.1, 0.2, rtol=1e-8, ceiling=2.0, too_large="too big")
