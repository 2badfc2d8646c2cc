"""Privacy mechanisms: each takes its privacy parameters and an explicit ``rng``.

``rng`` is a numpy ``Generator`` or an integer seed; ``None`` is refused, so nothing draws from
a hidden global generator. A fixed seed makes the noise reproducible — and subtractable — by
anyone who knows it: for experiments, tests and the book's figures, never for a release. A
release passes ``np.random.default_rng()``, seeded with fresh entropy from the operating system.

Modules are named for the mechanism they hold; everything public is re-exported here, so
``dplib.mechanisms.randomized_response`` is the stable name chapters and graders use.

* ``randomized_response`` — Warner's survey mechanism (local DP);
* ``laplace`` — the Laplace mechanism, sensitivity of bounded means, Mironov's float pitfall;
* ``gaussian`` — the Gaussian mechanism, classic and analytic σ, exact δ(ε), privacy loss;
* ``discrete`` — exact discrete Laplace / Gaussian samplers (Canonne, Kamath & Steinke 2020);
* ``exponential`` — the exponential mechanism and report-noisy-max.
* ``secure_noise`` — DP-SGD Gaussian noise on an exact lattice, hardened against float attacks.
* ``matrix_factorization`` — matrix-factorisation mechanisms (tree, square root, optimal, banded):
  correlated noise for prefix sums and DP-FTRL training, sensitivity under participations.
"""
from .discrete import (bernoulli_exp, discrete_gaussian, discrete_gaussian_delta,
                       discrete_gaussian_mechanism, discrete_gaussian_pmf, discrete_laplace,
                       discrete_laplace_mechanism, discrete_laplace_pmf)
from .exponential import (exponential_mechanism, exponential_mechanism_probabilities,
                          report_noisy_max)
from .gaussian import (gaussian_delta, gaussian_epsilon, gaussian_log_delta, gaussian_mechanism,
                       gaussian_privacy_loss, gaussian_sigma)
from .laplace import (float_laplace_reachable, laplace_mechanism, laplace_privacy_loss,
                      laplace_scale, mean_sensitivity, textbook_float_laplace)
from .secure_noise import (SECURE_SIGMA_Z, secure_add_noise, secure_gaussian, secure_grid,
                           secure_noise_multiplier, secure_sensitivity)
from .matrix_factorization import (Factorization, banded_factorization, decoder,
                                   identity_factorization, max_participation_sum,
                                   momentum_workload, noise_for_steps, optimal_factorization,
                                   pattern_sensitivity, prefix_workload, sensitivity,
                                   sqrt_coefficients, sqrt_factorization, tree_factorization,
                                   workload_error)
from .randomized_response import (coin_flip_p_truth, randomized_response, rr_epsilon,
                                  rr_estimate, rr_estimator_variance, rr_p_truth,
                                  rr_posterior, rr_simulate_estimates)

__all__ = [
    "coin_flip_p_truth", "randomized_response", "rr_epsilon", "rr_estimate",
    "rr_estimator_variance", "rr_p_truth", "rr_simulate_estimates", "rr_posterior",
    "laplace_scale", "laplace_mechanism", "laplace_privacy_loss", "mean_sensitivity",
    "textbook_float_laplace", "float_laplace_reachable",
    "gaussian_sigma", "gaussian_delta", "gaussian_log_delta", "gaussian_epsilon",
    "gaussian_mechanism", "gaussian_privacy_loss",
    "bernoulli_exp", "discrete_laplace", "discrete_gaussian", "discrete_laplace_pmf",
    "discrete_gaussian_pmf", "discrete_laplace_mechanism", "discrete_gaussian_mechanism",
    "discrete_gaussian_delta",
    "exponential_mechanism_probabilities", "exponential_mechanism", "report_noisy_max",
    "SECURE_SIGMA_Z", "secure_grid", "secure_gaussian", "secure_add_noise", "secure_sensitivity",
    "secure_noise_multiplier",
    "Factorization", "prefix_workload", "momentum_workload", "sqrt_coefficients",
    "tree_factorization", "sqrt_factorization", "optimal_factorization", "banded_factorization",
    "identity_factorization", "sensitivity", "pattern_sensitivity", "workload_error", "decoder",
    "noise_for_steps", "max_participation_sum",
]
