"""One registry of accountants: names ("rdp", "pld", …) → classes.

Every place that lets a user pick an accountant by name — the DP-SGD trainer, noise calibration,
DP in-context learning — asks this registry, so a new accountant is one class and one
``@register_accountant("name")`` line (its constructor must accept ``neighboring=`` and work with
no other argument). The neighbouring relation is the accountant's; the events are the same for all.
"""
from __future__ import annotations

from typing import Callable

from ._base import Accountant
from .._validate import shown

__all__ = ["register_accountant", "accountant_names", "accountant_class", "make_accountant"]

_ACCOUNTANTS: dict[str, type[Accountant]] = {}


def register_accountant(name: str) -> Callable[[type[Accountant]], type[Accountant]]:
    """Class decorator: make ``cls`` available as ``make_accountant(name)``."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an identifier string, got {shown(name)}")

    def add(cls: type[Accountant]) -> type[Accountant]:
        if not (isinstance(cls, type) and issubclass(cls, Accountant)):
            raise ValueError(f"cls must be a subclass of dplib.accounting.Accountant, got "
                             f"{shown(cls)}")
        if _ACCOUNTANTS.get(name, cls) is not cls:
            raise ValueError(f"name {shown(name)} is already registered to "
                             f"{_ACCOUNTANTS[name].__name__}")
        _ACCOUNTANTS[name] = cls
        return cls
    return add


def accountant_names() -> tuple[str, ...]:
    """The registered names, in registration order."""
    return tuple(_ACCOUNTANTS)


def accountant_class(name: str) -> type[Accountant]:
    """The class registered as ``name``; ``ValueError`` naming the choices otherwise."""
    if name not in _ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {list(_ACCOUNTANTS)}, got {shown(name)}")
    return _ACCOUNTANTS[name]


def make_accountant(name: str = "rdp", **options: object) -> Accountant:
    """A fresh accountant ``name`` built with ``options`` (e.g. ``neighboring="replace_one"``)."""
    return accountant_class(name)(**options)
