"""The correlated-noise privatizer: DP-FTRL / matrix-factorisation DP-SGD in the one engine.

A matrix mechanism A = B C (:mod:`dplib.mechanisms.matrix_factorization`) trains by adding, at step
t, the noise (D z)_t to the clipped gradient sum instead of an independent draw, where z ~
N(0, σ²C_clip²·sens²·I) and D C = I (D = C⁻¹ for a square C): the iterates of SGD are then the
released B(Cx + z), a post-processing of one Gaussian release (Kairouz, McMahan, Song, Thakkar,
Thakurta & Xu 2021, DP-FTRL; Denisov, McMahan, Rush, Smith & Thakurta 2022; Choquette-Choo et al.
2023). Only the privatizer stage changes (:class:`MatrixPrivatizer`); batches, clipping, the
division by the expected batch size and the optimiser are the engine's.

Streaming, never an n×d matrix: a lower-triangular C with w nonzero diagonals generates y = C⁻¹z
by the recursion y_t = (z_t − Σ_{j=1}^{w−1} C[t, t−j] y_{t−j}) / C[t, t], keeping the last w − 1
noise vectors (O(b·d) memory for a b-banded C; O(t·d) for a dense one: square root, optimal); the
tree keeps the O(log n) open nodes' noise, each drawn when first used and dropped after its last.

Batches (:func:`cyclic_batches`): the records are shuffled once into G groups and step t uses group
t mod G — so a record takes part in at most ⌈T/G⌉ steps, G apart, the participation pattern the
sensitivity is computed for. Whole groups (no amplification) for "tree", "sqrt", "optimal";
Poisson samples of b groups for "banded" (Choquette-Choo et al. 2023, Thm 4).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .._constraints import Flag, InstanceOf, Options, constrained, unconstrained
from .._validate import check_int, shown
from ..accounting import BandedMatrixMechanismEvent, DpEvent, MatrixMechanismEvent
from ..mechanisms import matrix_factorization as mf
from ..mechanisms.matrix_factorization import (Factorization, banded_factorization, decoder,
                                               momentum_workload, optimal_factorization,
                                               prefix_workload, sqrt_factorization,
                                               tree_factorization)
from ._params import (COUNT, MAX_GRAD_NORM, MOMENTUM, NOISE_CORRELATIONS, NOISE_MULTIPLIER0,
                      POSITIVE, RATE_OR_NONE, SAMPLE_RATE, optional)
from .engine import gaussian_noise

__all__ = ["MatrixPrivatizer", "cyclic_batches", "run_factorization", "run_groups",
           "NOISE_CORRELATIONS"]

_GENERATOR = InstanceOf(np.random.Generator, "a numpy Generator", bad=(None, 0, "seed"))


@constrained(n=COUNT, groups=COUNT, num_steps=COUNT, group_rate=SAMPLE_RATE, rng=_GENERATOR)
def cyclic_batches(n: int, groups: int, num_steps: int, group_rate: float,
                   rng: np.random.Generator) -> list[np.ndarray]:
    """``num_steps`` batches of record indices: a permutation of the n records (from ``rng``)
    split into ``groups`` G nearly equal groups; step t (0-based) takes group t mod G — whole when
    ``group_rate`` = 1 (cyclic batches, "fixed epoch order": Choquette-Choo, McMahan, Rush &
    Thakurta 2023), else a Poisson sample of it at that rate (cyclic Poisson sampling:
    Choquette-Choo et al. 2023, "(Amplified) Banded Matrix Factorization", arXiv:2306.08153). A record is in steps ≡ its group
    (mod G) only: at most ⌈T/G⌉ participations, G apart. Adding a record changes the split of
    the others, so the runs built on these batches are accounted under zero-out adjacency (see
    :class:`dplib.accounting.MatrixMechanismEvent`), not add/remove."""
    g, T, rate = groups, num_steps, group_rate
    if g > n:
        raise ValueError(f"groups must be in [1, n={n}] (each group needs a record), got {g}")
    parts = [np.sort(p) for p in np.array_split(rng.permutation(n), g)]
    if rate == 1.0:
        return [parts[t % g] for t in range(T)]
    return [parts[t % g][rng.random(parts[t % g].size) < rate] for t in range(T)]


@constrained(noise_correlation=Options(*NOISE_CORRELATIONS), sample_rate=SAMPLE_RATE,
             num_steps=COUNT, bands=optional(COUNT))
def run_groups(noise_correlation: str, sample_rate: float, num_steps: int,
               bands: int | None) -> tuple[int, float]:
    """(G, group rate) of a run's cyclic batches: "banded": G = ``bands``, each group Poisson
    sampled at q·b (expected batch q·N, as DP-SGD's); otherwise G = round(1/q) (at most T), whole
    groups. ValueError when q·b > 1."""
    q, T = sample_rate, num_steps
    if noise_correlation == "banded":
        b = check_int("bands", bands)          # required with "banded" (None declared for others)
        if q * b > 1.0:
            raise ValueError(f"bands must be at most 1/sample_rate = {1 / q:g} (each of the b "
                             f"groups is sampled at rate sample_rate·bands ≤ 1), got {b}")
        return b, q * b
    return max(1, min(T, int(round(1 / q)))), 1.0


@constrained(noise_correlation=Options(*NOISE_CORRELATIONS[1:]), num_steps=COUNT,
             momentum=MOMENTUM, bands=optional(COUNT))
def run_factorization(noise_correlation: str, num_steps: int, *, momentum: float = 0.0,
                      bands: int | None = None) -> Factorization:
    """The factorisation a run uses: "tree" (standard estimator: online), "sqrt" (for prefix
    sums), "optimal" and "banded" optimised for the run's workload — prefix sums, or
    :func:`~dplib.mechanisms.matrix_factorization.momentum_workload` when ``momentum`` > 0
    (Denisov et al. 2022, Sec. 5: momentum changes the workload, not the mechanism)."""
    T, beta = num_steps, momentum
    A = momentum_workload(T, beta) if beta > 0 else prefix_workload(T)
    if noise_correlation == "tree":
        return tree_factorization(T)
    if noise_correlation == "sqrt":
        return sqrt_factorization(T)
    if noise_correlation == "optimal":
        return optimal_factorization(A)
    if noise_correlation == "banded":
        return banded_factorization(A, check_int("bands", bands))
    raise AssertionError(noise_correlation)      # unreachable: the declaration refused it


class MatrixPrivatizer:
    """The privatizer stage of matrix-factorisation DP-SGD / DP-FTRL: step t (its t-th call of
    :meth:`add_noise`) adds σ·C_clip·sens·(D z)_t to the clipped sum, z ~ N(0, I) drawn from the
    run's generator, D C = I (:func:`~dplib.mechanisms.matrix_factorization.decoder`), so the
    iterates are the release B(Cx + z') with z' ~ N(0, σ²C_clip²sens²·I) (Denisov et al. 2022,
    Sec. 2). ``sensitivity`` sens: of C under the run's participation pattern
    (:func:`~dplib.mechanisms.matrix_factorization.sensitivity`; default: one participation).
    Event: :class:`~dplib.accounting.MatrixMechanismEvent` (σ) — or, with ``bands`` and
    ``group_rate`` (cyclic Poisson batches, C b-banded, sens its largest column norm),
    :class:`~dplib.accounting.BandedMatrixMechanismEvent`. ε after t < T steps is reported as
    the whole run's (``per_step_events`` is False: the steps are one mechanism, not a
    composition). With C = I this draws exactly DP-SGD's noise (:class:`GaussianPrivatizer`'s).

    Floating-point noise (``torch.randn`` and a float recursion), not hardened against the
    attack of Mironov 2012. Stateful: one instance per run of ``factorization.n`` steps;
    ``record=True`` keeps every draw of z in :attr:`drawn` (tests)."""

    per_step_events = False

    @constrained(factorization=InstanceOf(Factorization, "a Factorization"),
                 noise_multiplier=NOISE_MULTIPLIER0, max_grad_norm=MAX_GRAD_NORM,
                 sensitivity=optional(POSITIVE), bands=optional(COUNT), group_rate=RATE_OR_NONE,
                 record=Flag())
    def __init__(self, factorization: Factorization, noise_multiplier: float,
                 max_grad_norm: float, *, sensitivity: float | None = None,
                 bands: int | None = None, group_rate: float | None = None,
                 record: bool = False) -> None:
        self.factorization = factorization
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        if math.isinf(self.max_grad_norm):
            raise ValueError("max_grad_norm must be finite for a matrix mechanism (clipping bounds "
                             "the sensitivity), got inf")
        sens_1 = mf.sensitivity(factorization.C)
        self.sensitivity = sens_1 if sensitivity is None else sensitivity
        if (bands is None) != (group_rate is None):
            raise ValueError(f"give both bands and group_rate (amplified banded MF) or neither, "
                             f"got bands={shown(bands)}, group_rate={shown(group_rate)}")
        self.bands, self.group_rate = bands, group_rate
        C = factorization.C
        n = factorization.n
        self.square = C.shape[0] == C.shape[1] and not np.any(np.triu(C, 1))
        if self.bands is not None:
            if not self.square or np.any(np.tril(C, -self.bands)):
                raise ValueError(f"factorization must have a lower-triangular C with at most "
                                 f"bands={self.bands} nonzero diagonals for amplified banded MF")
            if abs(self.sensitivity - sens_1) > 1e-12 * sens_1:
                raise ValueError(f"sensitivity must be C's largest column norm {sens_1:g} for "
                                 f"amplified banded MF (Choquette-Choo et al. 2023, Thm 4), got "
                                 f"{self.sensitivity:g}")
        if self.square:
            lower = np.abs(np.tril(C)) > 0
            lags = np.nonzero(lower)
            self.width = int(np.max(lags[0] - lags[1])) + 1
            self.rows = C
        else:
            D = decoder(factorization)
            D[np.abs(D) < 1e-12] = 0.0
            self.D = D
            used = D != 0
            self.last_use = np.where(used.any(0), n - 1 - np.argmax(used[::-1], axis=0), -1)
        self.record = record
        self.drawn: dict = {}
        self.t = 0
        self._buf: dict = {}
        self._open: dict = {}

    @property
    def std(self) -> float:
        """σ·C_clip·sens: the standard deviation of z."""
        return self.noise_multiplier * self.max_grad_norm * self.sensitivity

    def _z(self, key: object, name: str, g: torch.Tensor, generator: object) -> torch.Tensor:
        z = gaussian_noise(tuple(g.shape), generator, g.dtype, g.device)
        if self.record:
            self.drawn[(key, name)] = z.clone()
        return z

    def _correlated(self, name: str, g: torch.Tensor, generator: object) -> torch.Tensor:
        t = self.t
        if self.square:
            z = self._z(t, name, g, generator)
            w1 = self.width - 1
            if t == 0 or w1 == 0:
                y = z / float(self.rows[t, t])
            else:
                buf = self._buf[name]        # ring of the last w − 1 y: y_s in slot s mod (w−1)
                lags = np.arange(1, min(t, w1) + 1)
                coef = np.zeros(w1)
                coef[(t - lags) % w1] = self.rows[t, t - lags]
                past = torch.tensordot(torch.as_tensor(coef, dtype=g.dtype, device=g.device),
                                       buf, dims=1)
                y = (z - past) / float(self.rows[t, t])
            if w1 > 0:
                if name not in self._buf:
                    self._buf[name] = torch.zeros((w1, *g.shape), dtype=g.dtype,
                                                  device=g.device)
                self._buf[name][t % w1] = y
            return y
        cols = np.flatnonzero(self.D[t])
        y = torch.zeros_like(g)
        for j in cols:                                  # O(log n) tree nodes, in index order
            if (j, name) not in self._open:
                self._open[(j, name)] = self._z(int(j), name, g, generator)
            y.add_(self._open[(j, name)], alpha=float(self.D[t, j]))
            if self.last_use[j] == t:
                del self._open[(j, name)]
        return y

    @unconstrained("a step of the engine: called by dpsgd_loop every step with the run's "
                   "clipped sum and generator (no check per step)")
    def add_noise(self, total: dict[str, torch.Tensor], generator: object
                  ) -> tuple[dict[str, torch.Tensor], dict]:
        """The noisy sum of step t: total + σ·C_clip·sens·(D z)_t, per tensor."""
        if self.t >= self.factorization.n:
            raise ValueError(f"the privatizer was built for {self.factorization.n} steps; step "
                             f"{self.t + 1} asked for more noise")
        out = {}
        for k, g in total.items():
            y = self._correlated(k, g, generator)
            out[k] = torch.add(g, y, alpha=self.std) if self.std > 0 else g.clone()
        self.t += 1
        return out, {}

    @unconstrained("called by EpsilonTracker with the run's checked rate and step count "
                   "(steps is checked in the body)")
    def event(self, sample_rate: float, steps: int) -> DpEvent | None:
        """The run's event (the same for every ``steps`` ≤ n: one mechanism over the whole
        run; for amplified banded MF, ⌈steps/b⌉ participations)."""
        if self.noise_multiplier == 0:
            return None
        if self.bands is not None:
            return BandedMatrixMechanismEvent(self.noise_multiplier, self.group_rate,
                                              check_int("steps", steps), self.bands)
        return MatrixMechanismEvent(self.noise_multiplier)
