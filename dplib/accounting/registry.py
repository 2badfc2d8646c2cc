"""One registry of accountants: names ("rdp", "pld", …) → classes.

Every place that lets a user pick an accountant by name — the DP-SGD trainer, noise calibration,
DP in-context learning — asks this registry, so a new accountant is one class and one
``@register_accountant("name")`` line (its constructor must accept ``neighboring=`` and work with
no other argument). The neighbouring relation is the accountant's; the events are the same for all.
"""
from __future__ import annotations

from typing import Callable

from .._constraints import Custom, constrained
from .._validate import shown
from ._base import Accountant

__all__ = ["register_accountant", "accountant_names", "accountant_class", "make_accountant"]

_ACCOUNTANTS: dict[str, type[Accountant]] = {}


def _check_identifier(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.isidentifier():
        raise ValueError(f"{name} must be an identifier string, got {shown(value)}")
    return value


def _check_registered(name: str, value: object) -> str:
    # messages say "accountant": the parameter is a name of an accountant
    if not isinstance(value, str) or value not in _ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {list(_ACCOUNTANTS)}, got {shown(value)}")
    return value


#: A registered accountant's name (the registry grows at run time: checked on each call).
ACCOUNTANT_NAME = Custom(_check_registered, "a registered accountant name",
                         ["moments", None, 3, "RDP", ["rdp"]], dynamic=True)


@constrained(name=Custom(_check_identifier, "an identifier string", ["not a name", None, 3, ""]))
def register_accountant(name: str) -> Callable[[type[Accountant]], type[Accountant]]:
    """Class decorator: make ``cls`` available as ``make_accountant(name)``."""

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


@constrained(name=ACCOUNTANT_NAME)
def accountant_class(name: str) -> type[Accountant]:
    """The class registered as ``name``; ``ValueError`` naming the choices otherwise."""
    return _ACCOUNTANTS[name]


@constrained(name=ACCOUNTANT_NAME)
def make_accountant(name: str = "rdp", **options: object) -> Accountant:
    """A fresh accountant ``name`` built with ``options`` (e.g. ``neighboring="replace_one"``)."""
    return accountant_class(name)(**options)
