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

from .._validate import (check_choice, check_int, check_positive, check_probability, check_real,
                         shown)
from ..accounting import (BandedMatrixMechanismEvent, DpEvent, MatrixMechanismEvent,
                          accountant_names, calibrate, calibrate_noise, check_delta)
from .grads import check_max_grad_norm

__all__ = ["RunConfig", "steps_for_epochs", "NOISE_SOURCES"]

#: The privatizers' noise sources: ``"float"`` (``torch.randn``, what every DP-SGD library
#: draws) and ``"secure"`` (exact discrete Gaussian noise on a lattice, CSPRNG-seeded, hardened
#: against the floating-point attack; 160–1,500× the cost of the float draw, so opt-in; its
#: accounting is exact at q = 1 and a close approximation under Poisson subsampling:
#: :mod:`dplib.mechanisms.secure_noise`).
NOISE_SOURCES = ("float", "secure")


def steps_for_epochs(epochs: float, sample_rate: float) -> int:
    """T = round(epochs / q): an "epoch" of Poisson sampling is 1/q steps (n records seen in
    expectation). At least one step."""
    e = check_positive("epochs", epochs)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    return max(1, int(round(e / q)))


@dataclass(frozen=True)
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
        put = lambda k, v: object.__setattr__(self, k, v)   # noqa: E731 - frozen dataclass
        put("sample_rate", check_probability("sample_rate", self.sample_rate, low_open=True))
        put("lr", check_positive("lr", self.lr))
        put("max_grad_norm", check_max_grad_norm(self.max_grad_norm))
        put("delta", check_delta(self.delta))
        check_choice("optimizer", self.optimizer, ("sgd", "adam"))
        check_choice("accountant", self.accountant, accountant_names())
        check_choice("noise", self.noise, NOISE_SOURCES)
        put("momentum", check_real("momentum", self.momentum, low=0.0, high=1.0,
                                   low_open=False))
        put("weight_decay", check_real("weight_decay", self.weight_decay, low=0.0,
                                       low_open=False))
        if (not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2):
            raise ValueError(f"betas must be a pair (β1, β2) in [0, 1), got {shown(self.betas)}")
        put("betas", tuple(check_real("betas", b, low=0.0, high=1.0, low_open=False,
                                      high_open=True) for b in self.betas))
        if (self.epochs is None) == (self.steps is None):
            raise ValueError(f"give exactly one of epochs and steps, got "
                             f"epochs={shown(self.epochs)}, "
                             f"steps={shown(self.steps)}")
        if self.steps is not None:
            put("steps", check_int("steps", self.steps))
        else:
            put("epochs", check_positive("epochs", self.epochs))
        self._check_noise()
        if self.expected_batch_size is not None:
            put("expected_batch_size", check_positive("expected_batch_size",
                                                      self.expected_batch_size))
        if not isinstance(self.ghost, bool):
            raise ValueError(f"ghost must be True or False, got {shown(self.ghost)}")
        if self.virtual_batch_size is not None:
            put("virtual_batch_size", check_int("virtual_batch_size", self.virtual_batch_size))
        self._check_correlation()

    def _check_correlation(self) -> None:
        from .correlated import NOISE_CORRELATIONS, run_groups   # sibling; imports config
        check_choice("noise_correlation", self.noise_correlation, NOISE_CORRELATIONS)
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
            object.__setattr__(self, "target_epsilon",
                               check_positive("target_epsilon", self.target_epsilon))
            if math.isinf(self.max_grad_norm):
                raise ValueError("target_epsilon needs a finite max_grad_norm (clipping bounds "
                                 "the sensitivity), got max_grad_norm=inf")
            return
        sigma = check_real("noise_multiplier", self.noise_multiplier, low=0.0, low_open=False)
        object.__setattr__(self, "noise_multiplier", sigma)
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

    def divisor(self, n: int) -> float:
        """The public divisor of the noisy sum: ``expected_batch_size``, or q·n."""
        return self.sample_rate * n if self.expected_batch_size is None \
            else self.expected_batch_size

    def replace(self, **changes: object) -> "RunConfig":
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
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
