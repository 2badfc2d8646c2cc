"""dplib.source.source: the code a chapter shows, from its def line, declarations in words."""
from __future__ import annotations

import inspect

from dplib.accounting import RDPAccountant
from dplib.mechanisms import laplace_mechanism
from dplib.source import source
from dplib.training import per_example_grads


def test_decorators_are_replaced_by_the_declared_checks_in_words():
    text = source(laplace_mechanism)
    assert not any(line.startswith("@") for line in text.splitlines()) and "EPSILON" not in text
    comments, code = text.split("def laplace_mechanism(", 1)
    assert "#   epsilon in (0, inf)" in comments and "#   sensitivity in (0, inf)" in comments
    body = inspect.getsource(laplace_mechanism)
    assert ("def laplace_mechanism(" + code) == body[body.index("def laplace_mechanism("):]


def test_methods_are_dedented_and_undeclared_functions_have_no_comment():
    assert source(RDPAccountant.get_epsilon).splitlines()[2].startswith("def get_epsilon(")
    assert source(per_example_grads).startswith("def per_example_grads(")


def test_a_builtin_has_no_source_to_show():
    import pytest
    with pytest.raises(ValueError, match="obj must be .* with Python source, got"):
        source(sum)
