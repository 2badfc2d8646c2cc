"""Noise distributions for Algorithm 1 of Nasr, Shokri & Houmansadr (2020): any symmetric
location–scale family with a density.

The privacy analysis of the paper (Lemma 4, proved via Theorem 2 of its appendix, which is
Mironov, Talwar & Zhang 2019, Thm 5) needs three things from the noise, only the first of which
the paper states:

1. a **density** z(x; μ) = z₀(x − μ) that is a *location family* (shifting the mean shifts the
   density) — the paper's "pdf z(·; μ), where μ is the mean";
2. **independent coordinates** (the d-dimensional noise is a product of one-dimensional ones) — the
   paper's "covariance Σ = σI" is not enough for non-Gaussian noise: uncorrelated is not
   independent, and the product formula of Lemma 4 needs independence;
3. a **symmetric** density, z₀(x) = z₀(−x): Theorem 2's involution ν(x) = M − x maps the two
   mixtures onto each other only then, and only then does the removal direction bound the addition
   direction (the unit tests show a skewed noise for which it does not).

Every class here is such a family: a standardised density z₀ (scale 1) and a ``scale`` s, so
z(x) = z₀(x/s)/s. The accountant works in standardised units u = τ/s, which is why one table of
numerical moments serves every scale (:mod:`dplib.encoding.moments`).

Torch sampling takes an explicit ``torch.Generator`` (seeded runs repeat exactly) and a device.
"""
from __future__ import annotations

import math
import sys
from math import nan as NAN

import numpy as np
from scipy import special

from .._constraints import Custom, Interval, Options, constrained, unconstrained
from .._validate import shown

__all__ = ["NoiseDistribution", "GaussianNoise", "LaplaceNoise", "StudentTNoise", "ScipyNoise",
           "make_noise", "NOISE_FAMILIES"]

#: The families :func:`make_noise` knows by name.
NOISE_FAMILIES = ("gaussian", "laplace", "student_t")

#: A noise scale s > 0 (finite); Student-t's degrees of freedom ν > 0.
_SCALE = Interval(0.0, math.inf)
_DF = Interval(0.0, math.inf)


def _shape(name: str, value: object) -> tuple:
    """A sample shape: an integer ≥ 0 or a sequence of them (as ``torch.empty`` takes)."""
    dims = (value,) if isinstance(value, (int, np.integer)) else value
    try:
        ok = (not isinstance(dims, (str, bytes)) and all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0
            for n in dims))
    except TypeError:
        ok = False
    if not ok or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= 0 or a tuple of them, got {shown(value)}")
    return int(value) if isinstance(value, np.integer) else value


def _generator(name: str, value: object) -> object:
    torch = sys.modules.get("torch")      # a torch.Generator exists only once torch is loaded
    if value is not None and (torch is None or not isinstance(value, torch.Generator)):
        raise ValueError(f"{name} must be None or a torch.Generator, got {shown(value)}")
    return value


def _frozen_scipy(name: str, value: object) -> object:
    if not hasattr(value, "logpdf") or not hasattr(value, "dist"):
        raise ValueError(f"{name} must be a frozen scipy.stats continuous distribution, "
                         f"got {shown(value)}")
    return value


def _fisher(name: str, value: object) -> float | None:
    return None if value is None else _SCALE.check(name, value)


_SHAPE = Custom(_shape, "an integer >= 0 or a tuple of them",
                [-1, 2.5, "3", None, (2, -1), (2.0,), True])
_GENERATOR = Custom(_generator, "None or a torch.Generator", [0, "seed", 1.5])
_SCIPY_DIST = Custom(_frozen_scipy, "a frozen scipy.stats continuous distribution",
                     [None, 1.0, "norm"])
_FISHER = Custom(_fisher, "None or a real > 0", [0.0, -1.0, NAN, math.inf, "1.0", True])
_HOOK = ("a standardised-density hook, called in the quadrature's inner loop "
         "(dplib.encoding.moments) with checked arrays")
_DENSITY = ("a density evaluated at any real x (±inf give -inf or 0/1, NaN gives NaN, as "
            "scipy.stats does)")
_CDF_TORCH = "the CDF of a torch tensor, called by ks_distance (declared) with its checked values"


class NoiseDistribution:
    """A symmetric location–scale noise family with a density (base class).

    Subclasses define the standardised log-density :meth:`std_logpdf` (scale 1), its CDF, a
    sampler, and where known the Fisher information and mean absolute value (scale 1).
    """

    family: str = "custom"
    #: points where the standardised log-density is not smooth (Laplace: 0); quadrature splits there
    kinks: tuple[float, ...] = ()

    @constrained(scale=_SCALE)
    def __init__(self, scale: float) -> None:
        self.scale = scale

    # --- what subclasses provide (standardised, scale 1) ---------------------------------------
    @unconstrained("abstract: " + _HOOK)
    def std_logpdf(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @unconstrained("abstract: " + _HOOK)
    def std_cdf(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @unconstrained(_HOOK)
    def std_log_ratio(self, y: np.ndarray, u: np.ndarray) -> np.ndarray:
        """log z₀(y − u) − log z₀(y). Subclasses override it with a form that does not
        cancel when u is tiny (the quadrature of Lemma 4's integrals needs it to full relative
        accuracy for shifts down to ~1e-8)."""
        return self.std_logpdf(y - u) - self.std_logpdf(y)

    def _std_sample(self, shape: tuple, generator, device, dtype):
        raise NotImplementedError

    #: Fisher information of the standardised location family, ∫ (z₀'/z₀)² z₀ dx
    std_fisher: float = math.nan
    #: E|Y| and Var Y for the standardised variable
    std_mean_abs: float = math.nan
    std_variance: float = math.nan

    @property
    def key(self) -> tuple:
        """What identifies the standardised family (the cache key of moment tables)."""
        return (self.family,)

    # --- derived, in physical units --------------------------------------------------------------
    @unconstrained(_DENSITY)
    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """log z(x) = log z₀(x/s) − log s."""
        return self.std_logpdf(np.asarray(x, dtype=float) / self.scale) - math.log(self.scale)

    @unconstrained(_DENSITY)
    def cdf(self, x: np.ndarray) -> np.ndarray:
        return self.std_cdf(np.asarray(x, dtype=float) / self.scale)

    @property
    def std(self) -> float:
        """Standard deviation (inf when the variance is infinite)."""
        return self.scale * math.sqrt(self.std_variance)

    @property
    def mean_abs(self) -> float:
        """E|Z|: the expected ℓ1 error the noise adds per coordinate."""
        return self.scale * self.std_mean_abs

    @property
    def fisher_information(self) -> float:
        """Fisher information of the location family at this scale, F₀/s²."""
        return self.std_fisher / self.scale**2

    @unconstrained("abstract: each subclass declares the scale of its family")
    def with_scale(self, scale: float) -> "NoiseDistribution":
        """The same family at another scale."""
        raise NotImplementedError

    @constrained(shape=_SHAPE, generator=_GENERATOR)
    def sample(self, shape, *, generator=None, device=None, dtype=None):
        """A torch tensor of i.i.d. draws of shape ``shape`` (on ``device``). Floating-point
        draws: not safe against the attack of Mironov 2012 (fine for training noise as documented
        in :func:`dplib.training.train`, not for releasing exact statistics)."""
        import torch
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dtype = dtype or torch.get_default_dtype()
        return self.scale * self._std_sample(shape, generator, device, dtype)

    @unconstrained(_CDF_TORCH)
    def cdf_torch(self, x):
        """The CDF of a torch tensor (default: through NumPy/SciPy on the CPU)."""
        import torch
        vals = self.cdf(x.detach().to("cpu", torch.float64).numpy())
        return torch.as_tensor(vals, dtype=x.dtype, device=x.device)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scale={self.scale:g})"


def _uniform(shape, generator, device, dtype):
    import torch
    return torch.rand(shape, generator=generator, device=device, dtype=dtype)


class GaussianNoise(NoiseDistribution):
    """N(0, s²) per coordinate — DP-SGD's noise; s plays the role of the noise multiplier σ
    when the code vectors have norm 1."""

    family = "gaussian"
    std_fisher = 1.0
    std_mean_abs = math.sqrt(2.0 / math.pi)
    std_variance = 1.0

    @unconstrained(_HOOK)
    def std_logpdf(self, y):
        y = np.asarray(y, dtype=float)
        return -0.5 * y * y - 0.5 * math.log(2.0 * math.pi)

    @unconstrained(_HOOK)
    def std_cdf(self, y):
        return special.ndtr(np.asarray(y, dtype=float))

    @unconstrained(_HOOK)
    def std_log_ratio(self, y, u):
        return u * (y - 0.5 * u)

    def _std_sample(self, shape, generator, device, dtype):
        import torch
        return torch.randn(shape, generator=generator, device=device, dtype=dtype)

    @unconstrained(_CDF_TORCH)
    def cdf_torch(self, x):
        import torch
        return torch.special.ndtr(x / self.scale)

    @constrained(scale=_SCALE)
    def with_scale(self, scale):
        return GaussianNoise(scale)


class LaplaceNoise(NoiseDistribution):
    """Laplace(0, b) per coordinate, density e^{−|x|/b}/(2b); b = ``scale``."""

    family = "laplace"
    kinks = (0.0,)
    std_fisher = 1.0
    std_mean_abs = 1.0
    std_variance = 2.0

    @unconstrained(_HOOK)
    def std_logpdf(self, y):
        return -np.abs(np.asarray(y, dtype=float)) - math.log(2.0)

    @unconstrained(_HOOK)
    def std_cdf(self, y):
        y = np.asarray(y, dtype=float)
        return np.where(y < 0, 0.5 * np.exp(np.minimum(y, 0.0)), 1.0 - 0.5 * np.exp(-np.abs(y)))

    @unconstrained(_HOOK)
    def std_log_ratio(self, y, u):
        # |y| − |y − u| for u ≥ 0: −u left of 0, u right of u, 2y − u in between (no cancellation)
        return np.clip(2.0 * y - u, -u, u)

    def _std_sample(self, shape, generator, device, dtype):
        import torch
        # inverse CDF from U ~ Uniform(−½, ½): Y = −sign(U) log(1 − 2|U|)
        u = _uniform(shape, generator, device, dtype) - 0.5
        return -torch.sign(u) * torch.log1p(-2.0 * u.abs())

    @unconstrained(_CDF_TORCH)
    def cdf_torch(self, x):
        import torch
        y = x / self.scale
        return torch.where(y < 0, 0.5 * torch.exp(torch.clamp(y, max=0.0)),
                           1.0 - 0.5 * torch.exp(-y.abs()))

    @constrained(scale=_SCALE)
    def with_scale(self, scale):
        return LaplaceNoise(scale)


class StudentTNoise(NoiseDistribution):
    """Student's t with ``df`` = ν degrees of freedom, scaled by s: Z = s·T_ν.

    This is the "non-standardized" Student-t of the paper's experiments. Beware of what "variance
    0.9 to 1.5" there means: the variance of s·T_ν is s²ν/(ν − 2) (ν > 2), not s². With ν = 9,
    s = 1 gives variance 9/7 ≈ 1.29. This class is parametrised by the scale s; :attr:`std` gives
    the standard deviation.

    Fisher information of the location family: (ν + 1)/((ν + 3)s²) (Lange, Little & Taylor 1989,
    JASA 84). As for every non-Gaussian density it exceeds 1/Var (Cramér–Rao; F·Var =
    ν(ν + 1)/((ν − 2)(ν + 3)) = 15/14 for ν = 9), which matters for privacy: see
    :func:`dplib.encoding.moments.small_shift_constant`.
    """

    family = "student_t"

    @constrained(df=_DF, scale=_SCALE)
    def __init__(self, df: float, scale: float = 1.0) -> None:
        super().__init__(scale)
        self.df = df
        nu = self.df
        self._log_c = (special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2)
                       - 0.5 * math.log(nu * math.pi))
        self.std_fisher = (nu + 1.0) / (nu + 3.0)
        self.std_variance = nu / (nu - 2.0) if nu > 2 else math.inf
        self.std_mean_abs = (2.0 * math.sqrt(nu) * math.exp(special.gammaln((nu + 1) / 2)
                                                            - special.gammaln(nu / 2))
                             / (math.sqrt(math.pi) * (nu - 1.0))) if nu > 1 else math.inf

    @property
    def key(self):
        return (self.family, self.df)

    @unconstrained(_HOOK)
    def std_logpdf(self, y):
        y = np.asarray(y, dtype=float)
        return self._log_c - 0.5 * (self.df + 1.0) * np.log1p(y * y / self.df)

    @unconstrained(_HOOK)
    def std_cdf(self, y):
        return special.stdtr(self.df, np.asarray(y, dtype=float))

    @unconstrained(_HOOK)
    def std_log_ratio(self, y, u):
        # −(ν+1)/2 · log[(ν + (y−u)²)/(ν + y²)] = −(ν+1)/2 · log1p((u² − 2uy)/(ν + y²))
        return -0.5 * (self.df + 1.0) * np.log1p(u * (u - 2.0 * y) / (self.df + y * y))

    def _std_sample(self, shape, generator, device, dtype):
        """Bailey's polar method (Bailey 1994, Math. Comp. 62, 779–781): draw (U, V) uniform in
        the unit disc, W = U² + V²; then U·sqrt(ν(W^{−2/ν} − 1)/W) is t_ν. Vectorised rejection
        (acceptance π/4), all draws from ``generator``."""
        import torch
        n = int(np.prod(shape)) if len(shape) else 1
        out = torch.empty(0, device=device, dtype=torch.float64)
        while out.numel() < n:
            m = int((n - out.numel()) * 1.35) + 16
            uv = 2.0 * torch.rand((2, m), generator=generator, device=device,
                                  dtype=torch.float64) - 1.0
            w = (uv * uv).sum(0)
            ok = (w < 1.0) & (w > 0.0)
            u, w = uv[0][ok], w[ok]
            t = u * torch.sqrt(self.df * (torch.pow(w, -2.0 / self.df) - 1.0) / w)
            out = torch.cat([out, t])
        return out[:n].reshape(shape).to(dtype)

    @constrained(scale=_SCALE)
    def with_scale(self, scale):
        return StudentTNoise(self.df, scale)

    def __repr__(self):
        return f"StudentTNoise(df={self.df:g}, scale={self.scale:g})"


class ScipyNoise(NoiseDistribution):
    """Any symmetric continuous ``scipy.stats`` distribution (frozen, loc = 0) as noise.

    ``dist.kwds['scale']`` (default 1) is the scale; the shape parameters define the family.
    Symmetry is checked numerically (log-density at ±y on a grid) and refused otherwise: Lemma 4
    does not hold for skewed noise. The Fisher information is computed by quadrature (central
    differences of the log-density) when not given.
    """

    @constrained(dist=_SCIPY_DIST, fisher=_FISHER)
    def __init__(self, dist, *, fisher: float | None = None, kinks: tuple = (0.0,)) -> None:
        kw = dict(getattr(dist, "kwds", {}))
        if kw.pop("loc", 0.0) != 0.0:
            raise ValueError(f"dist must have loc = 0 (the mean is added by the mechanism), "
                             f"got loc={shown(dist.kwds['loc'])}")
        scale = kw.pop("scale", 1.0)
        super().__init__(scale)
        self._std = dist.dist(*getattr(dist, "args", ()), **kw)
        self.family = f"scipy:{dist.dist.name}"
        self._shape = (tuple(getattr(dist, "args", ())), tuple(sorted(kw.items())))
        self.kinks = tuple(kinks)
        y = np.linspace(0.01, 30.0, 301)
        a, b = self._std.logpdf(y), self._std.logpdf(-y)
        fin = np.isfinite(a) | np.isfinite(b)
        if not np.allclose(a[fin], b[fin], rtol=1e-9, atol=1e-12):
            raise ValueError(f"dist must be symmetric about 0 (z(x) = z(−x)); "
                             f"{dist.dist.name} with these parameters is not. Lemma 4's proof "
                             "(Theorem 2 / MTZ 2019 Thm 5) needs a symmetric density.")
        with np.errstate(over="ignore"):   # a pdf like 1/cosh(x) overflows to 0 far out
            self.std_variance = float(self._std.var())
            self.std_mean_abs = float(self._std.expect(np.abs))
        self._fast = self._fast_logpdf()
        self.std_fisher = float(fisher) if fisher is not None else self._fisher()

    def _fast_logpdf(self):
        """(the distribution's own ``_logpdf``, its shape arguments) when calling it directly
        gives what the frozen ``logpdf`` gives (support = the real line, checked on a grid),
        else None. The frozen call's argument handling costs far more than the density itself
        in the quadrature of :mod:`dplib.encoding.moments`, which calls it hundreds of times
        per integral; with loc = 0 and scale = 1 both compute the same numbers."""
        try:
            lo, hi = self._std.support()
            shapes = self._std.dist._parse_args(*self._std.args, **self._std.kwds)[0]
            fn = self._std.dist._logpdf
            y = np.linspace(-30.0, 30.0, 241)
            with np.errstate(all="ignore"):
                same = np.array_equal(np.asarray(fn(y, *shapes), dtype=float),
                                      self._std.logpdf(y), equal_nan=True)
        except Exception:        # another scipy: the frozen distribution's logpdf
            return None
        return (fn, shapes) if same and np.isinf(lo) and np.isinf(hi) else None

    def _fisher(self) -> float:
        """∫ (d log z₀/dy)² z₀ dy by quadrature, the derivative by central differences (step
        1e-5; accurate to ~1e-5 relative, also for a kink at 0)."""
        from scipy.integrate import quad
        h = 1e-5

        def f(y):
            with np.errstate(all="ignore"):
                d = (self._std.logpdf(y + h) - self._std.logpdf(y - h)) / (2 * h)
                v = d * d * self._std.pdf(y)
            return float(v) if np.isfinite(v) else 0.0
        hi = float(self._std.isf(1e-15))
        return 2.0 * quad(f, 0.0, hi, limit=500)[0]

    @property
    def key(self):
        return (self.family, self._shape)

    @unconstrained(_HOOK)
    def std_logpdf(self, y):
        y = np.asarray(y, dtype=float)
        if getattr(self, "_fast", None) is not None:
            fn, shapes = self._fast
            return np.asarray(fn(y, *shapes), dtype=float)
        return self._std.logpdf(y)

    @unconstrained(_HOOK)
    def std_cdf(self, y):
        return self._std.cdf(np.asarray(y, dtype=float))

    def _std_sample(self, shape, generator, device, dtype):
        import torch
        seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
        vals = self._std.rvs(size=shape, random_state=np.random.default_rng(seed))
        return torch.as_tensor(vals, dtype=dtype, device=device)

    @constrained(scale=_SCALE)
    def with_scale(self, scale):
        new = object.__new__(ScipyNoise)
        new.__dict__.update(self.__dict__)
        new.scale = scale
        return new

    def __repr__(self):
        return f"ScipyNoise({self.family}, scale={self.scale:g})"


@constrained(family=Options(*NOISE_FAMILIES), scale=_SCALE, df=_DF)
def make_noise(family: str, scale: float, *, df: float = 9.0) -> NoiseDistribution:
    """A noise distribution by name: ``"gaussian"``, ``"laplace"`` or ``"student_t"`` (``df``)."""
    if family == "gaussian":
        return GaussianNoise(scale)
    if family == "laplace":
        return LaplaceNoise(scale)
    return StudentTNoise(df, scale)

