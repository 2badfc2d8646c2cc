"""The public configuration of a private run: one frozen, validated record.

Everything here is public — chosen before the data are seen, the same for neighbouring data
sets — and everything a trainer may reveal about its own settings comes from it (the accountant
sees only these numbers). Every trainer of dplib (:func:`~dplib.training.train`,
:func:`~dplib.training.train_distributed`, :func:`~dplib.training.train_models_batched`) builds
one from its keywords, or takes one whole (``config=``), so all accept the same runs and refuse
the same bad ones (``ValueError`` naming the setting).

Conventions (Abadi et al. 2016; Opacus; dp-accounting): Poisson sampling at rate q =
``sample_rate``; add/remove-one adjacency (zero-out for the matrix mechanisms of
``noise_correlation``, on cyclic batches); noise N(0, σ²C²) on the sum of per-example
gradients clipped to norm C = ``max_grad_norm``, σ = ``noise_multiplier``; the noisy sum divided
by the public ``expected_batch_size`` (q·n when None, which treats n as public).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .._constraints import Custom, Flag, Integer, Interval, Options, constrained, unconstrained
from .._validate import check_int, shown
from ..accounting import (BandedMatrixMechanismEvent, DpEvent, MatrixMechanismEvent, calibrate,
                          calibrate_noise)
from ._params import (ACCOUNTANT, COUNT, DELTA, LR, MAX_GRAD_NORM, NOISE_CORRELATIONS,
                      NOISE_MULTIPLIER0, NONNEG, POSITIVE, SAMPLE_RATE, SEED, MOMENTUM, optional)

__all__ = ["RunConfig", "steps_for_epochs", "NOISE_SOURCES"]

#: The privatizers' noise sources: ``"float"`` (``torch.randn``, what every DP-SGD library
#: draws) and ``"secure"`` (exact discrete Gaussian noise on a lattice, CSPRNG-seeded, hardened
#: against the floating-point attack; 160–1,500× the cost of the float draw, so opt-in; its
#: accounting is exact at q = 1 and a close approximation under Poisson subsampling:
#: :mod:`dplib.mechanisms.secure_noise`).
NOISE_SOURCES = ("float", "secure")


@constrained(epochs=POSITIVE, sample_rate=SAMPLE_RATE)
def steps_for_epochs(epochs: float, sample_rate: float) -> int:
    """T = round(epochs / q): an "epoch" of Poisson sampling is 1/q steps (n records seen in
    expectation). At least one step."""
    return max(1, int(round(epochs / sample_rate)))


def _beta(name: str, value: object) -> tuple[float, float]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"betas must be a pair (β1, β2) in [0, 1), got {shown(value)}")
    return tuple(_BETA.check("betas", b) for b in value)


_BETA = Interval(0.0, 1.0, closed="left")


@dataclass(frozen=True)
@constrained(sample_rate=SAMPLE_RATE, lr=LR, max_grad_norm=MAX_GRAD_NORM, delta=DELTA,
             optimizer=Options("sgd", "adam"), accountant=ACCOUNTANT,
             noise=Options(*NOISE_SOURCES), momentum=MOMENTUM, weight_decay=NONNEG,
             betas=Custom(_beta, "a pair (β1, β2) in [0, 1)",
                          [(0.9,), (0.9, 1.0), (-0.1, 0.9), (0.9, math.nan), "ab", None, 0.9]),
             steps=optional(COUNT), epochs=optional(POSITIVE),
             noise_multiplier=optional(NOISE_MULTIPLIER0), target_epsilon=optional(POSITIVE),
             expected_batch_size=optional(POSITIVE), ghost=Flag(),
             virtual_batch_size=optional(COUNT), seed=SEED,
             noise_correlation=Options(*NOISE_CORRELATIONS), bands=optional(COUNT))
class RunConfig:
    """A private run's settings, validated when built (each bad value: a ``ValueError`` naming
    it). Give the length as ``epochs`` (T = round(epochs/q)) or ``steps``, and the noise as
    ``noise_multiplier`` σ or ``target_epsilon`` (then σ = :func:`dplib.accounting.calibrate_noise`
    (ε, δ, q, T, accountant)) — exactly one of each. σ = 0 with ``max_grad_norm=math.inf`` is
    non-private training on the same Poisson batches (ε = ∞). ``seed``: None draws fresh OS
    entropy when the run starts (a fixed seed is for experiments, never for a release).
    ``noise``: one of :data:`NOISE_SOURCES`. ``ghost``/``virtual_batch_size`` choose how the
    clipped sum is computed (the same sum either way). ``device``: where to train (None: the GPU
    when there is one). ``noise_correlation``: "independent" (DP-SGD, Poisson batches) or a
    matrix mechanism — "tree", "sqrt", "optimal" on cyclic batches, "banded" (with ``bands`` b)
    on cyclic Poisson batches (:mod:`dplib.training.correlated`)."""

    sample_rate: float
    lr: float
    epochs: float | None = None
    steps: int | None = None
    noise_multiplier: float | None = None
    target_epsilon: float | None = None
    max_grad_norm: float = 1.0
    delta: float = 1e-5
    optimizer: str = "sgd"
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple = (0.9, 0.999)
    accountant: str = "rdp"
    expected_batch_size: float | None = None
    ghost: bool = False
    virtual_batch_size: int | None = None
    noise: str = "float"
    seed: int | None = None
    device: object = None
    noise_correlation: str = "independent"
    bands: int | None = None

    def __post_init__(self) -> None:
        # each field alone: its declaration (checked before this runs); here the relations
        if (self.epochs is None) == (self.steps is None):
            raise ValueError(f"give exactly one of epochs and steps, got "
                             f"epochs={shown(self.epochs)}, "
                             f"steps={shown(self.steps)}")
        self._check_noise()
        self._check_correlation()

    def _check_correlation(self) -> None:
        from .correlated import run_groups   # a sibling module that imports this one
        if self.noise_correlation != "banded":
            if self.bands is not None:
                raise ValueError(f"bands is only for noise_correlation='banded', got "
                                 f"bands={shown(self.bands)} with noise_correlation="
                                 f"{shown(self.noise_correlation)}")
        else:
            b = check_int("bands", self.bands)
            if b > self.num_steps:
                raise ValueError(f"bands must be in [1, steps={self.num_steps}], got {b}")
            object.__setattr__(self, "bands", b)
        if self.noise_correlation == "independent":
            return
        if self.noise != "float":
            raise ValueError(f"noise must be 'float' with a matrix mechanism (noise_correlation="
                             f"{shown(self.noise_correlation)}), got {shown(self.noise)}")
        if math.isinf(self.max_grad_norm):
            raise ValueError("max_grad_norm must be finite with a matrix mechanism (clipping "
                             "bounds the sensitivity), got inf")
        run_groups(self.noise_correlation, self.sample_rate, self.num_steps, self.bands)

    @unconstrained("the event builder calibrate calls with its bracketed noise multipliers "
                   "(RunConfig.sigma)")
    def correlated_event(self, sigma: float) -> DpEvent:
        """The event of a matrix-mechanism run with noise multiplier ``sigma`` (per unit of
        sensitivity): :class:`~dplib.accounting.MatrixMechanismEvent` on cyclic batches, or
        :class:`~dplib.accounting.BandedMatrixMechanismEvent` (cyclic Poisson, "banded")."""
        from .correlated import run_groups
        groups, rate = run_groups(self.noise_correlation, self.sample_rate, self.num_steps,
                                  self.bands)
        if self.noise_correlation == "banded":
            return BandedMatrixMechanismEvent(sigma, rate, self.num_steps, groups)
        return MatrixMechanismEvent(sigma)

    def _check_noise(self) -> None:
        if (self.noise_multiplier is None) == (self.target_epsilon is None):
            raise ValueError(f"give exactly one of noise_multiplier and target_epsilon, got "
                             f"noise_multiplier={shown(self.noise_multiplier)}, "
                             f"target_epsilon={shown(self.target_epsilon)}")
        if self.target_epsilon is not None:
            if math.isinf(self.max_grad_norm):
                raise ValueError("target_epsilon needs a finite max_grad_norm (clipping bounds "
                                 "the sensitivity), got max_grad_norm=inf")
            return
        sigma = self.noise_multiplier
        if math.isinf(self.max_grad_norm) and sigma > 0:
            raise ValueError(f"max_grad_norm=inf (no clipping) allows only noise_multiplier=0 "
                             f"(non-private training), got noise_multiplier={sigma:g}; noise "
                             "std σ·C would be infinite")

    @property
    def num_steps(self) -> int:
        """T: ``steps``, or round(epochs/q)."""
        return self.steps if self.steps is not None else steps_for_epochs(self.epochs,
                                                                          self.sample_rate)

    def sigma(self) -> float:
        """σ: ``noise_multiplier``, or calibrated to ``target_epsilon`` at (δ, q, T)."""
        if self.target_epsilon is None:
            return self.noise_multiplier
        if self.noise_correlation != "independent":
            return calibrate(self.correlated_event, self.target_epsilon, self.delta,
                             accountant=self.accountant, name="noise_multiplier")
        return calibrate_noise(self.target_epsilon, self.delta, self.sample_rate,
                               self.num_steps, self.accountant)

    @constrained(n=Integer(min=0))
    def divisor(self, n: int) -> float:
        """The public divisor of the noisy sum: ``expected_batch_size``, or q·n."""
        return self.sample_rate * n if self.expected_batch_size is None \
            else self.expected_batch_size

    @unconstrained("the changed fields are checked by RunConfig's own declarations")
    def replace(self, **changes: object) -> "RunConfig":
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    @unconstrained("the trainers' constructor: config is checked in the body (a RunConfig or "
                   "None, relation with the keyword settings), the settings by RunConfig")
    def build(cls, config: "RunConfig | None", settings: dict) -> "RunConfig":
        """``config``, or a RunConfig from the keyword ``settings`` a trainer was given — not
        both: with ``config``, every keyword setting must be left at its default (None where
        RunConfig has no default)."""
        if config is None:
            return cls(**settings)
        if not isinstance(config, cls):
            raise ValueError(f"config must be a RunConfig, got {type(config).__name__}")
        defaults = {f.name: (None if f.default is dataclasses.MISSING else f.default)
                    for f in dataclasses.fields(cls)}
        given = [k for k, v in settings.items()
                 if not (v is None and defaults[k] is None) and v != defaults[k]]
        if given:
            raise ValueError(f"give the run's settings either as config or as keywords, not "
                             f"both; got config and {sorted(given)}")
        return config
