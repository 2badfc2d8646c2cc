"""Privacy mechanisms: each takes its privacy parameters and an explicit ``rng``.

Modules are named for the mechanism they hold; everything public is re-exported here, so
``dplib.mechanisms.randomized_response`` is the stable name chapters and graders use.
"""
from .randomized_response import (coin_flip_p_truth, randomized_response, rr_epsilon,
                                  rr_estimate, rr_estimator_variance, rr_p_truth,
                                  rr_simulate_estimates)

__all__ = [
    "coin_flip_p_truth", "randomized_response", "rr_epsilon", "rr_estimate",
    "rr_estimator_variance", "rr_p_truth", "rr_simulate_estimates",
]
