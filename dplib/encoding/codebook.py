"""The code book Ψ and Algorithm 2 (encoding by sorted cosine match, then clamping).

**Code book** (Nasr, Shokri & Houmansadr 2020, §3.1 and §5): n vectors of the model's size d whose
coordinates are drawn i.i.d. from a distribution of gradient values, small values set to zero
(sparsification; the paper zeroes |v| < 1e-5 "to avoid underflow"), each vector rescaled to norm 1
("to have a fair comparison with DPSGD", so that norm 1 plays the role of DP-SGD's clipping bound
C = 1). In the paper's experiments the distribution is a standard Gaussian, which is data
independent. When the values come from *the private training data's* gradients, Ψ is a function of
the private data and the privacy analysis no longer covers it: build it from public data (the book
uses a held-out split) or from a fixed distribution.

Because the analysis is invariant under permutations and sign flips of a code vector (i.i.d.,
symmetric noise), only the *sorted magnitudes* of ψ matter. :class:`Codebook` stores exactly that:
each row is |ψ| sorted in ascending order.

**Algorithm 2**, as implemented by :func:`encode` (with the corrections it needs):

1. order ← argsort |∇| (ascending);
2. ψ ← argmax_{ψ∈Ψ} ⟨ψ, |∇|[order]⟩ / ‖ψ‖ — the paper writes *argmin* of the cosine similarity
   ψ·∇[order]/(|ψ||∇|) (line 3), which would pick the *least* similar vector, and it pairs ψ with
   the signed ∇[order] although ψ is sorted by magnitude. Its eq. (3) minimises a cosine
   *distance*, i.e. maximises the similarity; by the rearrangement inequality, matching sorted
   |∇| against sorted ψ maximises the similarity over all signed permutations of ψ, which is the
   point of sorting;
3. output_i ← clamp(∇_i, −ψ[t], ψ[t]) where t is the rank of |∇_i| (line 7; ψ[t] ≥ 0).

So the output is the gradient clipped coordinate by coordinate at the magnitudes of the matched
code vector: |output_i| ≤ ψ[rank(i)], hence ‖output‖ ≤ ‖ψ‖ ≤ 1, and each output coordinate keeps
the sign of the gradient.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._constraints import (Custom, Flag, InstanceOf, Integer, Interval, IsCallable,
                            constrained, unconstrained)
from .._validate import as_generator, shown

__all__ = ["Codebook", "build_codebook", "clamp_thresholds", "encode", "gradient_values"]

_NAN, _INF = float("nan"), float("inf")


def _code_vectors(name: str, value: object) -> object:
    """The code vectors as a float tensor (n_codes, d), every row non-negative, ascending."""
    import torch
    v = value
    if not isinstance(v, torch.Tensor):
        try:
            v = torch.as_tensor(np.asarray(v, dtype=np.float32))
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be an (n_codes, d) array of real numbers, "
                             f"got {shown(value)}") from None
    if v.ndim != 2 or v.shape[0] == 0 or v.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array (n_codes, d), got shape "
                         f"{tuple(v.shape)}")
    if not torch.isfinite(v).all():
        raise ValueError(f"{name} must be finite")
    if (v < 0).any():
        raise ValueError(f"{name} must be non-negative (sorted magnitudes |ψ|); "
                         f"got {float(v.min()):g}")
    if (v[:, 1:] < v[:, :-1]).any():
        raise ValueError(f"{name}: every code vector must be sorted in ascending order")
    return v


_VECTORS = Custom(_code_vectors, "a non-empty (n_codes, d) array of finite reals >= 0, rows "
                  "ascending", [None, "abc", [], [[_NAN, 1.0]], [1.0, 2.0], [[2.0, 1.0]],
                                [[-1.0, 1.0]], [[1.0, _INF]]])


@dataclass
@constrained(vectors=_VECTORS)
class Codebook:
    """Sorted magnitudes of the code vectors: ``vectors`` is a float tensor (n_codes, d), every
    row non-negative and ascending. Build one with :func:`build_codebook`."""

    vectors: object   # torch.Tensor

    def __post_init__(self):
        self._on: dict = {}

    @property
    def n_codes(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def norms(self):
        return self.vectors.double().norm(dim=1)

    @unconstrained("called by the encoder (clamp_thresholds, declared) with the checked "
                   "gradients' device and dtype")
    def on(self, device, dtype):
        """The vectors on ``device`` with ``dtype`` (cached), and their norms."""
        import torch
        key = (str(device), dtype)
        if key not in self._on:
            v = self.vectors.to(device=device, dtype=dtype)
            if torch.finfo(dtype).eps > torch.finfo(self.vectors.dtype).eps:
                # rounding to a coarser dtype may round ψ up; the accountant uses the stored ψ, so
                # round towards zero: the clamp thresholds must never exceed the accounted ψ
                up = v.to(self.vectors.dtype) > self.vectors.to(device)
                v = torch.where(up, torch.nextafter(v, torch.zeros_like(v)), v)
            n = v.norm(dim=1)
            self._on[key] = (v, torch.where(n > 0, n, torch.ones_like(n)))
        return self._on[key]


_COUNT = Integer(min=1)
#: A code book, as the encoder needs it (sorted torch vectors).
_CODEBOOK = InstanceOf(Codebook, "a Codebook (build one with build_codebook)",
                       bad=(None, np.eye(4), "abc"))


def _gradients(name: str, value: object) -> object:
    """Finite floating-point torch gradients (their shape against the code book is checked with
    the code book)."""
    import torch
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor, got {type(value).__name__}")
    if not torch.is_floating_point(value):
        raise ValueError(f"{name} must be floating point, got {value.dtype}")
    if not torch.isfinite(value).all():
        raise ValueError(f"{name} must be finite (got inf or nan)")
    return value


_GRADS = Custom(_gradients, "a finite floating-point torch tensor (d,) or (B, d)",
                [None, "abc", [1.0, 2.0], np.ones(4)])


@constrained(n_codes=_COUNT, dim=_COUNT, threshold=Interval(0.0, _INF, closed="left"),
             keep_fraction=Interval(0.0, 1.0, closed="right"), norm=Interval(0.0, _INF))
def build_codebook(n_codes: int, dim: int, *, rng: object, values: object = None,
                   threshold: float = 1e-5, keep_fraction: float = 1.0,
                   norm: float = 1.0, dtype=None) -> Codebook:
    """Ψ: ``n_codes`` vectors of size ``dim``, as in the paper's experiments (§5).

    Each coordinate is drawn i.i.d. from ``values`` (a 1-D array of gradient values — an empirical
    distribution, resampled with replacement) or, when ``values`` is None, from N(0, 1) (the
    paper's choice). Then |v| < ``threshold`` is set to 0 (the paper uses 1e-5), only the largest
    ``keep_fraction`` of the coordinates of each vector are kept (sparsification; 1 keeps all),
    and each vector is rescaled to ℓ2 norm ``norm`` (the paper: exactly 1). Rows are stored as
    sorted magnitudes (see the module docstring). ``rng``: numpy Generator or seed. ``dtype``:
    torch dtype of the stored vectors (default float32; the accountant uses the stored values, so
    float32 rounding of the norm, ~1e-7, is accounted for, not ignored).
    """
    import torch
    n, d, thr, keep, nrm = n_codes, dim, threshold, keep_fraction, norm
    gen = as_generator(rng)
    if values is None:
        raw = gen.standard_normal((n, d))
    else:
        vals = np.asarray(values, dtype=float).ravel()
        if vals.size == 0 or not np.all(np.isfinite(vals)):
            raise ValueError("values must be a non-empty array of finite gradient values")
        raw = gen.choice(vals, size=(n, d), replace=True)
    mag = np.sort(np.abs(raw), axis=1)
    mag[mag < thr] = 0.0
    n_keep = int(np.ceil(keep * d))
    if n_keep < 1:
        raise ValueError(f"keep_fraction must keep at least one coordinate, got "
                         f"{shown(keep_fraction)}"
                         f" of d={d}")
    mag[:, : d - n_keep] = 0.0
    norms = np.linalg.norm(mag, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("a code vector is all zeros after thresholding; lower threshold or "
                         "raise keep_fraction")
    return Codebook(torch.as_tensor(mag / norms * nrm, dtype=dtype or torch.float32))


@constrained(loss_fn=IsCallable("a loss function"), max_values=_COUNT)
def gradient_values(model, loss_fn, x, y, *, max_values: int = 200_000, rng: object):
    """A sample of per-example gradient coordinates of ``model`` on (x, y) — the empirical
    distribution a code book can be drawn from (§3.1, Figure 1). Use *public* data here.

    Uses :func:`dplib.training.per_example_grads`; returns a 1-D numpy array of at most
    ``max_values`` values (sampled without replacement when there are more).
    """
    from ..training import per_example_grads
    g = per_example_grads(model, loss_fn, x, y)
    flat = np.concatenate([v.reshape(v.shape[0], -1).detach().cpu().numpy() for v in g.values()],
                          axis=1).ravel()
    m = max_values
    if flat.size > m:
        flat = as_generator(rng).choice(flat, size=m, replace=False)
    return flat


@constrained(grads=_GRADS, codebook=_CODEBOOK)
def clamp_thresholds(grads, codebook: Codebook):
    """Steps 1-2 of Algorithm 2 of Nasr, Shokri & Houmansadr (2020): the matched code vector of
    every row of ``grads`` and the clamp threshold of every coordinate.

    Parameters
    ----------
    grads : torch tensor (d,) or (B, d) — one micro-batch gradient per row (flattened), finite.
    codebook : :class:`Codebook` with ``dim == d``; moved to ``grads``' device and dtype.

    Returns ``(thresholds, index)``: ``thresholds`` has the shape of ``grads`` and holds ψ[t] at
    coordinate i, where t is the rank of |∇_i| in the row (ascending) and ψ the code vector whose
    sorted magnitudes have the largest cosine similarity with the sorted |∇| (the corrected
    line 3, see the module docstring); ``index`` is the position of that ψ in the code book (a
    scalar tensor for a single row). :func:`encode` clamps ∇_i to [−threshold_i, threshold_i].
    Ties in |∇| are broken by ``torch.sort``; any order gives the same sorted magnitudes, hence
    the same match.
    """
    import torch
    single = grads.ndim == 1
    g = grads[None, :] if single else grads
    if g.ndim != 2 or g.shape[1] != codebook.dim:
        raise ValueError(f"grads must have shape (d,) or (B, d) with d = codebook.dim = "
                         f"{codebook.dim}, got {tuple(grads.shape)}")
    psi, psi_norm = codebook.on(g.device, g.dtype)
    mag_sorted, order = torch.sort(g.abs(), dim=1)           # ascending, as ψ's rows
    # ∝ cosine (‖∇‖ is common per row); each row is scaled by its largest magnitude first (the
    # cosine does not change) so a huge gradient (1e30) cannot overflow the product to inf
    top = mag_sorted[:, -1:]
    sim = ((mag_sorted / torch.where(top > 0, top, torch.ones_like(top))) @ psi.T) / psi_norm
    best = sim.argmax(dim=1)
    thr = torch.empty_like(g).scatter_(1, order, psi[best])   # ψ[rank(i)] at coordinate i
    if single:
        return thr[0], best[0]
    return thr, best


@constrained(grads=_GRADS, codebook=_CODEBOOK, return_index=Flag())
def encode(grads, codebook: Codebook, *, return_index: bool = False):
    """Algorithm 2 of Nasr, Shokri & Houmansadr (2020), batched: encode every row of ``grads``.

    Parameters
    ----------
    grads : torch tensor (d,) or (B, d) — one micro-batch gradient per row (flattened).
    codebook : :class:`Codebook` with ``dim == d``; moved to ``grads``' device and dtype.
    return_index : also return the index of the matched code vector for every row.

    Returns the encoded tensor, same shape as ``grads``: output_i = clamp(∇_i, −ψ[t], ψ[t]) with
    t the rank of |∇_i| and ψ the code vector whose sorted magnitudes have the largest cosine
    similarity with the sorted |∇| (see the module docstring for the corrected line 3). All rows
    at once: one sort, one matrix product (B × d)·(d × n_codes), one scatter
    (:func:`clamp_thresholds`), one clamp. A zero gradient is encoded as zero.
    """
    import torch
    thr, best = clamp_thresholds(grads, codebook)   # checks grads against the code book
    out = torch.maximum(torch.minimum(grads, thr), -thr)
    if return_index:
        return out, best
    return out
