"""Published deployments of differential privacy, their parameters and what dplib computes from them.

Each function returns a frozen record: the parameters as the source publishes them (cited field
by field), the numbers dplib computes from them with :mod:`dplib.accounting.zcdp`, and what could
not be found in a source (``not_found``) — left out rather than guessed.

* :func:`census_2020` — the 2020 US Census redistricting data (P.L. 94-171), Disclosure Avoidance
  System TopDown algorithm, production settings (Abowd et al. 2022): ρ per geographic level of
  the persons file, its (ε, δ) at δ = 10⁻¹⁰, and the published budget of the whole product.
* :func:`gboard_2023` — Gboard's DP-FTRL language models (Xu et al. 2023): the published range
  of ρ-zCDP and the (ε, δ) it implies; the first es-ES launch.
* :func:`apple_cms` — Apple's local DP (Apple 2017): ε per donation per use case, the emoji
  count-mean sketch's parameters, the daily cap, and what a day and a year of donations cost by
  basic composition.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ._constraints import unconstrained
from .accounting.zcdp import rho_for_epsilon, zcdp_epsilon
from .mechanisms.count_mean_sketch import cms_flip_probability

__all__ = ["GeographicLevel", "CensusDeployment", "census_2020", "GboardDeployment",
           "gboard_2023", "AppleUseCase", "AppleDeployment", "apple_cms"]


@unconstrained("record of published parameters, built by census_2020() from the cited sources")
@dataclass(frozen=True)
class GeographicLevel:
    """One geographic level of the TopDown algorithm: its ``share`` of the persons file's ρ
    (the production ``geolevel_budget_prop``) and the ρ that share is."""

    name: str
    share: Fraction
    rho: float


@unconstrained("record of published parameters, built by census_2020() from the cited sources")
@dataclass(frozen=True)
class CensusDeployment:
    """The 2020 Census redistricting data product (P.L. 94-171 Summary File), as produced.

    Published parameters (sources in :attr:`sources`): the persons file's noise scale
    ``persons_global_scale`` (ρ = 1/global_scale², the production configuration of the DAS code
    release), its split over the six geographic levels (``persons_levels``), δ = 10⁻¹⁰, and the
    (ε, δ) the Census Bureau announced: 17.14 for the persons file, 2.47 for the housing-unit
    file, 19.61 in all. Neighbouring relation: replace-one ("bounded" neighbours: the same
    number of records, one record changed), as the Bureau states for its zCDP guarantee.

    Computed by dplib: ``persons_rho`` and each level's ρ; ``persons_epsilon`` by the tight
    conversion of Canonne, Kamath & Steinke 2020, Cor. 13 (:func:`~dplib.accounting.zcdp.zcdp_epsilon`,
    the conversion the DAS code uses); ``units_rho_implied``, the ρ whose tight conversion is the
    published 2.47 (the units file's own settings were not found); ``total_epsilon_basic``, the
    two ε's added (basic composition: the pair is (ε₁+ε₂, 2δ)-DP, Dwork & Roth 2014, Thm 3.16);
    ``total_rho`` and ``total_epsilon_zcdp``, the two ρ's added (Bun & Steinke 2016,
    Lemma 1.7) and converted once — a smaller ε at δ = 10⁻¹⁰ than the sum of the two ε's.
    """

    product: str
    neighboring: str
    delta: float
    persons_global_scale: Fraction
    persons_levels: tuple
    persons_rho: float
    persons_epsilon: float
    published_persons_epsilon: float
    published_units_epsilon: float
    published_total_epsilon: float
    units_rho_implied: float
    total_epsilon_basic: float
    total_rho: float
    total_epsilon_zcdp: float
    sources: tuple
    not_found: tuple


#: The persons file's production settings (DAS 2020 Redistricting Production Code, files
#: source/configs/production/pl94/person_default.ini: ``global_scale = 339/542``, and
#: person_US.ini: ``geolevel_budget_prop = 104/4099, 1440/4099, 447/4099, 687/4099, 1256/4099,
#: 165/4099`` "in topdown order (e.g. US, State, .... , Block)"; prod_default.ini:
#: ``approx_dp_delta = 1e-10``).
_CENSUS_GLOBAL_SCALE = Fraction(339, 542)
_CENSUS_LEVELS = (("US", 104), ("State", 1440), ("County", 447), ("Tract", 687),
                  ("Block group", 1256), ("Block", 165))
_CENSUS_DENOMINATOR = 4099
_CENSUS_DELTA = 1e-10


@lru_cache(maxsize=1)
def census_2020() -> CensusDeployment:
    """The 2020 US Census redistricting data (TopDown algorithm, production settings) with the
    numbers dplib computes from its parameters (:class:`CensusDeployment`).

    >>> c = census_2020()
    >>> round(c.persons_rho, 4), round(c.persons_epsilon, 2), c.published_persons_epsilon
    (2.5562, 17.14, 17.14)
    """
    rho = float(1 / _CENSUS_GLOBAL_SCALE**2)
    levels = tuple(GeographicLevel(name, Fraction(k, _CENSUS_DENOMINATOR),
                                   float(Fraction(k, _CENSUS_DENOMINATOR) / _CENSUS_GLOBAL_SCALE**2))
                   for name, k in _CENSUS_LEVELS)
    eps_persons = zcdp_epsilon(rho, _CENSUS_DELTA)
    published_units = 2.47
    rho_units = rho_for_epsilon(published_units, _CENSUS_DELTA)
    eps_units = zcdp_epsilon(rho_units, _CENSUS_DELTA)
    return CensusDeployment(
        product="2020 Census Redistricting Data (P.L. 94-171) Summary File, United States "
                "(50 states and DC; Puerto Rico is a separate run on other persons)",
        neighboring="replace_one",
        delta=_CENSUS_DELTA,
        persons_global_scale=_CENSUS_GLOBAL_SCALE,
        persons_levels=levels,
        persons_rho=rho,
        persons_epsilon=eps_persons,
        published_persons_epsilon=17.14,
        published_units_epsilon=published_units,
        published_total_epsilon=19.61,
        units_rho_implied=rho_units,
        total_epsilon_basic=eps_persons + eps_units,
        total_rho=rho + rho_units,
        total_epsilon_zcdp=zcdp_epsilon(rho + rho_units, _CENSUS_DELTA),
        sources=(
            "Abowd et al. 2022, The 2020 Census Disclosure Avoidance System TopDown Algorithm, "
            "Harvard Data Science Review (the algorithm; zCDP with the discrete Gaussian)",
            "US Census Bureau, DAS 2020 Redistricting Production Code (GitHub "
            "uscensusbureau/DAS_2020_Redistricting_Production_Code): configs/production/pl94/"
            "person_default.ini (global_scale = 339/542), person_US.ini (geolevel_budget_prop), "
            "prod_default.ini (approx_dp_delta = 1e-10); programs/engine/curve.py converts ρ "
            "with Canonne, Kamath & Steinke 2020, Cor. 13",
            "US Census Bureau press release, 9 June 2021, 'Census Bureau Sets Key Parameters to "
            "Protect Privacy in 2020 Census Results': total ε = 19.61 for the redistricting "
            "data product, 17.14 for the persons file and 2.47 for the housing unit data",
        ),
        not_found=(
            "the housing-unit file's ρ and its split over geographic levels (its production "
            "configuration is not in the code release read here): units_rho_implied is "
            "computed from the published ε = 2.47, which is rounded to two decimals",
            "the split of each level's ρ over the queries of that level (strategy "
            "ProductionCandidate20210527US_mult8_add02_dsepJune3 in the code release)",
        ),
    )


@unconstrained("record of published parameters, built by gboard_2023() from the cited sources")
@dataclass(frozen=True)
class GboardDeployment:
    """Gboard's next-word-prediction language models trained with DP-FTRL (Xu et al. 2023).

    Published: "more than twenty Gboard LMs" with ρ-zCDP guarantees, ρ ∈ (0.2, 2)
    (``rho_range``; Xu et al. 2023, abstract), the privacy unit a user's device (user-level DP),
    δ = 10⁻¹⁰ (``delta``, the δ Google states for Gboard's (ε, δ); Google Research 2024); the
    first es-ES launch at ε = 8.9 (``es_es_first_launch_epsilon``; Google Research 2024, the
    figure of DP guarantees for Gboard models).

    Computed by dplib: ``epsilon_range``, the (ε, δ = 10⁻¹⁰) of the ends of the ρ range by the
    tight conversion (Canonne, Kamath & Steinke 2020, Cor. 13); ``es_es_first_launch_rho_implied``,
    the ρ whose tight conversion is 8.9 at δ = 10⁻¹⁰ (computed, not published here).
    """

    models: str
    privacy_unit: str
    algorithm: str
    delta: float
    rho_range: tuple
    epsilon_range: tuple
    es_es_first_launch_epsilon: float
    es_es_first_launch_rho_implied: float
    sources: tuple
    not_found: tuple


@lru_cache(maxsize=1)
def gboard_2023() -> GboardDeployment:
    """Gboard's DP-FTRL language models (Xu et al. 2023) in ρ-zCDP and (ε, δ)
    (:class:`GboardDeployment`).

    >>> g = gboard_2023()
    >>> g.rho_range, tuple(round(e, 2) for e in g.epsilon_range)
    ((0.2, 2.0), (4.17, 14.87))
    """
    delta = 1e-10
    lo, hi = 0.2, 2.0
    return GboardDeployment(
        models="Gboard next-word-prediction neural network language models (more than twenty)",
        privacy_unit="user (all data of one device)",
        algorithm="DP-FTRL with tree aggregation (Kairouz et al. 2021), federated learning",
        delta=delta,
        rho_range=(lo, hi),
        epsilon_range=(zcdp_epsilon(lo, delta), zcdp_epsilon(hi, delta)),
        es_es_first_launch_epsilon=8.9,
        es_es_first_launch_rho_implied=rho_for_epsilon(8.9, delta),
        sources=(
            "Xu et al. 2023, Federated Learning of Gboard Language Models with Differential "
            "Privacy, ACL Industry Track, abstract: ρ-zCDP with ρ ∈ (0.2, 2)",
            "Google Research blog, 2024, Advances in private training for production on-device "
            "language models: (ε, δ) with δ = 10^-10; the first es-ES launch at ε = 8.9",
        ),
        not_found=(
            "the per-model table of Xu et al. 2023 (each model's ρ, rounds, noise multiplier): "
            "its text could not be retrieved, so no model-by-model ρ is listed",
        ),
    )


@unconstrained("record of published parameters, built by apple_cms() from the cited sources")
@dataclass(frozen=True)
class AppleUseCase:
    """One use case of Apple's local DP: ε of one donation (a privatised report), the donations
    per day where published (None: not found), and the count-mean-sketch size where published."""

    name: str
    epsilon_per_donation: float
    donations_per_day: int | None
    sketch_rows: int | None = None
    sketch_columns: int | None = None


@unconstrained("record of published parameters, built by apple_cms() from the cited sources")
@dataclass(frozen=True)
class AppleDeployment:
    """Apple's local differential privacy (Apple 2017).

    Published: ε per donation for emoji (4), QuickType (8) and Health types (2), one donation
    per day for emoji (Apple, Differential Privacy Overview); the emoji count-mean sketch
    "m = 1024, k = 65,536, and ϵ = 4" (Apple 2017, Learning with Privacy at Scale).

    Computed by dplib: ``emoji_epsilon_per_day`` and ``emoji_epsilon_per_year`` — one day's and
    365 days' donations by basic composition (ε's add: Dwork & Roth 2014, Thm 3.16; a bound, the
    publications state no yearly figure); ``emoji_flip_probability``, the chance that the client
    flips each coordinate of its sketch row, 1/(1 + e^{ε/2})
    (:func:`~dplib.mechanisms.count_mean_sketch.cms_flip_probability`).
    """

    use_cases: tuple
    emoji_epsilon_per_day: float
    emoji_epsilon_per_year: float
    emoji_flip_probability: float
    sources: tuple
    not_found: tuple

    @unconstrained("looks name up among this record's own use cases (the allowed names depend "
                   "on the record); an unknown name is refused with ValueError listing them")
    def use_case(self, name: str) -> AppleUseCase:
        """The use case called ``name`` ("emoji", "QuickType", "Health types")."""
        for u in self.use_cases:
            if u.name == name:
                return u
        raise ValueError(f"name must be one of {[u.name for u in self.use_cases]}, got {name!r}")


@lru_cache(maxsize=1)
def apple_cms() -> AppleDeployment:
    """Apple's local DP with the count-mean sketch (:class:`AppleDeployment`).

    >>> a = apple_cms()
    >>> a.use_case("emoji").epsilon_per_donation, a.emoji_epsilon_per_day
    (4.0, 4.0)
    """
    emoji = AppleUseCase("emoji", 4.0, 1, sketch_rows=65_536, sketch_columns=1024)
    cases = (emoji, AppleUseCase("QuickType", 8.0, None), AppleUseCase("Health types", 2.0, None))
    per_day = emoji.epsilon_per_donation * emoji.donations_per_day
    return AppleDeployment(
        use_cases=cases,
        emoji_epsilon_per_day=per_day,
        emoji_epsilon_per_year=365 * per_day,
        emoji_flip_probability=cms_flip_probability(emoji.epsilon_per_donation),
        sources=(
            "Apple Differential Privacy Team 2017, Learning with Privacy at Scale, Apple Machine "
            "Learning Journal 1(8): emoji count-mean sketch with m = 1024, k = 65,536, ε = 4; "
            "a per-event privacy parameter ε",
            "Apple, Differential Privacy Overview: a per-donation privacy budget ε; emoji ε = 4 "
            "with one donation per day; QuickType ε = 8; Health types ε = 2",
        ),
        not_found=(
            "the donations per day of QuickType and Health types",
            "the sketch sizes (m, k) of the use cases other than emoji",
        ),
    )
