"""Figures of chapter 8 (gradient encoding): what Algorithm 2 does to one gradient.

Algorithm 2 of Nasr, Shokri & Houmansadr (2020, "Improving Deep Learning with Differential
Privacy using Gradient Encoding and Denoising") sorts the magnitudes of a gradient, matches them
against a code book of sorted magnitude vectors, and clamps coordinate i of the gradient to
[−ψ[t], ψ[t]], where t is the rank of |∇_i|. :func:`clamp_figure` shows the gradient beside those
thresholds, twice: by rank (where the clamp is a comparison of two sorted curves) and in parameter
order (where it is a coordinate-wise clip). Every number comes from
:func:`dplib.encoding.clamp_thresholds` and :func:`dplib.encoding.encode`.
"""
from __future__ import annotations

import numpy as np

from ..encoding import Codebook, clamp_thresholds, encode
from ..plotting import COLORS
from .._common_params import optional
from .._constraints import InstanceOf, Integer, constrained
from .._validate import shown

__all__ = ["clamp_figure", "clamp_data"]


#: The codebook of :mod:`dplib.encoding` a gradient is encoded with.
_CODEBOOK = InstanceOf(Codebook, "a dplib.encoding Codebook", bad=(None, "x", 1.0, 3))


def _as_gradient(grad: object, codebook: Codebook):
    """``grad`` as a finite 1-D float tensor of length ``codebook.dim`` (a relation between the
    two parameters: checked in the body)."""
    import torch
    if isinstance(grad, torch.Tensor):
        g = grad.detach().to("cpu")
    else:
        try:
            g = torch.as_tensor(np.asarray(grad, dtype=np.float64))
        except (TypeError, ValueError):
            raise ValueError(f"grad must be a 1-D array of {codebook.dim} real numbers, "
                             f"got {shown(grad)}") from None
    if g.ndim != 1 or g.shape[0] != codebook.dim:
        raise ValueError(f"grad must be one flattened gradient of length codebook.dim = "
                         f"{codebook.dim}, got shape {tuple(g.shape)}")
    if not torch.is_floating_point(g):
        g = g.double()
    if not torch.isfinite(g).all():
        raise ValueError("grad must be finite (got inf or nan)")
    return g


@constrained(codebook=_CODEBOOK)
def clamp_data(grad: object, codebook: Codebook) -> dict:
    """The numbers :func:`clamp_figure` draws, for one gradient ``grad`` (length ``codebook.dim``).

    Returns a dict of 1-D numpy arrays in parameter order — ``grad``, ``threshold`` (ψ[rank of
    |∇_i|], from :func:`dplib.encoding.clamp_thresholds`) and ``encoded`` (from
    :func:`dplib.encoding.encode`) — plus ``order`` (the permutation sorting |∇| ascending),
    ``index`` (the matched code vector), ``clamped_fraction`` (share of coordinates with
    |∇_i| > threshold_i, the ones the clamp changes) and ``cosine`` (between ``encoded`` and
    ``grad``; 0 for a zero gradient).
    """
    import torch
    g = _as_gradient(grad, codebook)
    thr, idx = clamp_thresholds(g, codebook)
    enc = encode(g, codebook)
    gn, en = float(g.double().norm()), float(enc.double().norm())
    cos = float(g.double() @ enc.double()) / (gn * en) if gn > 0 and en > 0 else 0.0
    return {
        "grad": g.double().numpy(),
        "threshold": thr.double().numpy(),
        "encoded": enc.double().numpy(),
        "order": torch.argsort(g.abs(), stable=True).numpy(),
        "index": int(idx),
        "clamped_fraction": float((g.abs() > thr).double().mean()),
        "cosine": cos,
    }


@constrained(codebook=_CODEBOOK, window=Integer(min=1), start=optional(Integer(min=0)))
def clamp_figure(grad: object, codebook: Codebook, *, window: int = 24,
                 start: int | None = None):
    """A gradient beside the clamp thresholds of its matched code vector (Algorithm 2).

    Top panel, by rank: the gradient's sorted magnitudes |∇|_(t), the matched code vector's sorted
    magnitudes ψ_t (the thresholds) and the encoded magnitudes min(|∇|_(t), ψ_t), on a log scale;
    the shaded gap is what the clamp cuts off. Bottom panel, in parameter order: ``window``
    consecutive coordinates starting at ``start`` (default: centred on the largest |∇_i|), the
    gradient as bars, the thresholds ±ψ[rank(i)] as ticks, the encoded coordinates as narrower
    bars. Numbers from :func:`clamp_data`.

    ``grad``: one flattened gradient (torch tensor or array) of length ``codebook.dim``;
    ``window``: integer in [1, codebook.dim]; ``start``: integer in [0, codebook.dim − window].
    Returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt
    d = codebook.dim
    data = clamp_data(grad, codebook)
    if window > d:
        raise ValueError(f"window must be an integer in [1, {d}] (codebook.dim), got "
                         f"{shown(window)}")
    g, thr, enc = data["grad"], data["threshold"], data["encoded"]
    if start is None:
        start = int(np.clip(np.argmax(np.abs(g)) - window // 2, 0, d - window))
    elif start > d - window:
        raise ValueError(f"start must be an integer in [0, {d - window}] (codebook.dim − "
                         f"window), got {shown(start)}")

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(5.0, 7.6))
    order = data["order"]
    rank = np.arange(1, d + 1)
    mag, psi, out = np.abs(g)[order], thr[order], np.abs(enc)[order]
    ax1.fill_between(rank, psi, mag, where=mag > psi, color=COLORS["baseline"], alpha=0.25,
                     lw=0, label="cut off by the clamp")
    ax1.plot(rank, mag, color=COLORS["baseline"], lw=2.2,
             label=rf"gradient $|\nabla|$, sorted (norm {np.linalg.norm(g):.2g})")
    ax1.plot(rank, psi, color=COLORS["truth"], lw=1.4, ls="--",
             label=rf"thresholds $\psi$ (norm {np.linalg.norm(psi):.2g})")
    ax1.plot(rank, out, color=COLORS["private"], lw=1.6, label="encoded")
    positive = np.concatenate([mag[mag > 0], psi[psi > 0]])
    if positive.size:
        ax1.set_yscale("log")
        ax1.set_ylim(max(positive.min(), positive.max() * 1e-6) / 2, positive.max() * 2)
    ax1.set_xlabel(r"rank $t$ of $|\nabla_i|$ (ascending)")
    ax1.set_ylabel("magnitude")
    ax1.set_title(f"By rank: {100 * data['clamped_fraction']:.0f}% of coordinates clamped\n"
                  f"(code vector {data['index']})", fontsize=11)
    ax1.legend(fontsize=10, loc="upper left")

    idx = np.arange(start, start + window)
    ax2.bar(idx, g[idx], width=0.8, color=COLORS["baseline"], alpha=0.45,
            label=r"gradient $\nabla_i$")
    ax2.bar(idx, enc[idx], width=0.45, color=COLORS["private"], label="encoded")
    ax2.plot(idx, thr[idx], "_", color=COLORS["truth"], ms=11, mew=1.8,
             label=r"$\pm\psi[\mathrm{rank}(i)]$")
    ax2.plot(idx, -thr[idx], "_", color=COLORS["truth"], ms=11, mew=1.8)
    ax2.axhline(0.0, color=COLORS["neutral"], lw=0.8)
    ax2.set_xlabel("coordinate $i$ (parameter order)")
    ax2.set_ylabel("value")
    ax2.set_title(f"In place: coordinates {start}–{start + window - 1},\n"
                  f"cosine(encoded, gradient) = {data['cosine']:.2f}", fontsize=11)
    ax2.legend(fontsize=10, loc="best")
    fig.tight_layout()
    return fig
