"""The privacy statement: :class:`PrivacyReport` (what :func:`dplib.reporting.privacy_report`
returns, with its plain-text and Markdown renderings) and :class:`PureDPEvent` (one-shot pure
ε-DP mechanisms as events)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._constraints import Options, constrained, unconstrained
from ..accounting import RDPCurveEvent
from ..accounting._params import POSITIVE

__all__ = ["PrivacyReport", "PureDPEvent", "PRIVACY_UNITS", "BATCHES", "PURE_MECHANISMS"]

PRIVACY_UNITS = ("record", "user", "device", "group")
#: How a run's batches were actually formed, as a caller may state it for a check.
BATCHES = ("poisson", "fixed_size", "shuffled", "full")
#: One-shot pure ε-DP mechanisms :class:`PureDPEvent` describes.
PURE_MECHANISMS = ("randomized_response", "exponential", "report_noisy_max")


@dataclass(frozen=True)
@constrained(epsilon=POSITIVE, mechanism=Options(*PURE_MECHANISMS))
class PureDPEvent(RDPCurveEvent):
    """A one-shot pure ε-DP mechanism (δ = 0) whose ε its own theorem states: randomized
    response (Warner 1965; ε = ln(p/(1 − p)), Dwork & Roth 2014, Sec. 3.2), the exponential
    mechanism and report-noisy-max (McSherry & Talwar 2007; Dwork & Roth 2014, Thms 3.10 and
    3.9). Its Rényi curve for the accountants is min(ε, αε²/2): D_α ≤ D_∞ ≤ ε, and ε-DP implies
    (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 3.3), i.e. D_α ≤ αε²/2 for every α > 1. ``epsilon``
    is stated for the mechanism's own neighbouring relation."""

    epsilon: float
    mechanism: str = "randomized_response"

    @property
    def rho(self) -> float:
        """ρ = ε²/2 (Bun & Steinke 2016, Prop. 3.3)."""
        return self.epsilon ** 2 / 2.0

    @unconstrained("the curve the Rényi accountant asks for at its checked orders")
    def rdp(self, orders: np.ndarray, neighboring: str) -> np.ndarray:
        return np.minimum(self.epsilon, np.asarray(orders, dtype=float) * self.rho)


@unconstrained("result record built by privacy_report from a run")
@dataclass(frozen=True)
class PrivacyReport:
    """A complete privacy statement (Ponomareva et al. 2023, Sec. 5), every field filled by
    :func:`privacy_report` from the run. ``rho``: ρ-zCDP when the run is zCDP-expressible
    (unsubsampled Gaussian steps, pure mechanisms), else None; ``steps``/``noise_multiplier``/
    ``sample_rate``/``max_grad_norm``: None where the mechanism has none; ``seed_fixed``: True
    when the caller fixed the run's seed, None when the run does not record its randomness;
    ``filled_from``: (field, where it was read) pairs; ``caller_facts``: what the caller typed."""

    mechanism: str
    privacy_unit: str
    neighboring: str
    sampler: str
    accountant: str
    accountant_version: str
    dplib_version: str
    epsilon: float
    delta: float
    rho: float | None
    steps: int | None
    noise_multiplier: float | None
    sample_rate: float | None
    max_grad_norm: float | None
    seed_fixed: bool | None
    noise: str
    covers: str
    not_covered: tuple[str, ...]
    warnings: tuple[str, ...]
    caller_facts: tuple[tuple[str, str], ...] = ()
    filled_from: tuple[tuple[str, str], ...] = ()

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) of every field, in the order of the renderings."""
        def num(v: float | None, fmt: str = ".4g") -> str:
            return "not applicable" if v is None else format(v, fmt)
        seed = {True: "FIXED by the caller (an experiment, not a release)",
                False: "fresh OS entropy (not fixed by the caller)",
                None: "not recorded by the run"}[self.seed_fixed]
        return [("Mechanism", self.mechanism), ("Privacy unit", self.privacy_unit),
                ("Neighbouring relation", self.neighboring), ("Sampler", self.sampler),
                ("Accountant", self.accountant), ("Accountant version", self.accountant_version),
                ("dplib version", self.dplib_version), ("Epsilon", num(self.epsilon)),
                ("Delta", num(self.delta, ".3g")), ("rho (zCDP)", num(self.rho)),
                ("Steps", "not applicable" if self.steps is None else str(self.steps)),
                ("Noise multiplier", num(self.noise_multiplier)),
                ("Sample rate", num(self.sample_rate)),
                ("Clipping norm", num(self.max_grad_norm)), ("Seed", seed),
                ("Noise source", self.noise), ("Covers", self.covers)]

    def text(self) -> str:
        """The statement as plain text."""
        width = max(len(k) for k, _ in self.rows())
        lines = ["Differential privacy statement"]
        lines += [f"  {k.ljust(width)}  {v}" for k, v in self.rows()]
        for title, items in (("Not covered", self.not_covered), ("Warnings", self.warnings),
                             ("Stated by the caller (not checked by the run)",
                              tuple(f"{k} = {v}" for k, v in self.caller_facts))):
            if items:
                lines.append(f"{title}:")
                lines += [f"  - {it}" for it in items]
        return "\n".join(lines)

    def markdown(self) -> str:
        """The statement as a Markdown table and lists."""
        def cell(s: str) -> str:
            return s.replace("|", "\\|")
        out = ["**Differential privacy statement**", "", "| Field | Value |", "|---|---|"]
        out += [f"| {k} | {cell(v)} |" for k, v in self.rows()]
        for title, items in (("Not covered", self.not_covered), ("Warnings", self.warnings),
                             ("Stated by the caller (not checked by the run)",
                              tuple(f"{k} = {v}" for k, v in self.caller_facts))):
            if items:
                out += ["", f"**{title}**", ""] + [f"- {cell(it)}" for it in items]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.text()
