"""The one integer and number rule of every configuration check."""

from __future__ import annotations

import math

import pytest

from genolong.core.values import is_integer, is_number


@pytest.mark.parametrize(("value", "bounds", "expected"), [
    (3, (), True), (0, (1,), False), (1, (1,), True), (5, (0, 4), False), (4, (0, 4), True), (-2, (None, 0), True),
    (True, (), False), (False, (0,), False), (2.0, (), False), ("2", (), False), (None, (), False),
])
def test_an_integer_is_an_int_within_its_bounds_never_a_bool(value, bounds, expected):
    assert is_integer(value, *bounds) is expected


@pytest.mark.parametrize(("value", "expected"), [
    (0, True), (2.5, True), (-1e300, True), (True, False), (math.inf, False), (math.nan, False), ("1", False),
])
def test_a_number_is_finite_and_never_a_bool(value, expected):
    assert is_number(value) is expected
