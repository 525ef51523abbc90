"""The one vocabulary: choices and their checks, one message style, and the text helpers beside them."""

from __future__ import annotations

import pytest

from resnet_lab.core import choices
from resnet_lab.core.errors import UsageError
from resnet_lab.core.text import one_line, split_top_level


@pytest.mark.parametrize("call, message", [
    (lambda: choices.check_choice("--mode", "training", choices.MODES),
     "--mode: 'training' is not one of: infer, train"),
    (lambda: choices.check_choice("x", ["a"], ("a",)), "x: ['a'] is not one of: a"),  # unhashable: not a choice
    (lambda: choices.check_choices("stage", ["before", "middle"], choices.STAGES),
     "stage: 'middle' is not one of: before, after"),
    (lambda: choices.check_int("steps", 0, 1), "steps: 0 is not an integer >= 1"),
    (lambda: choices.check_int("steps", True, 1), "steps: True is not an integer >= 1"),
    (lambda: choices.check_int("steps", 2.0, 1), "steps: 2.0 is not an integer >= 1"),
    (lambda: choices.check_positive("timeout", 0, unit="seconds"), "timeout: 0 is not a number > 0 seconds"),
    (lambda: choices.check_bool("flag", "yes"), "flag: 'yes' is not true or false"),
    (lambda: choices.check_keys("spec", {"base": 1, "grid": 2, "x": 3}, ("base", "sweep")),
     "spec: unknown key(s) 'grid', 'x'; allowed: base, sweep"),
])
def test_every_check_fails_in_one_line_of_one_style(call, message):
    with pytest.raises(UsageError) as info:
        call()
    assert str(info.value) == message


def test_checks_return_what_they_accept():
    assert choices.check_choice("mode", "train", choices.MODES) == "train"
    assert choices.check_choices("mode", "infer", choices.MODES) == ["infer"]  # one string is one item
    assert choices.check_int("n", None, 1, optional=True) is None and choices.check_int("n", 3, 1) == 3
    assert choices.check_positive("t", 0.5) == 0.5 and choices.check_bool("b", False) is False
    assert choices.check_keys("spec", {"base": 1}, ("base",)) is None


def test_vocabulary_is_consistent():
    assert set(choices.DTYPE_POLICIES) == set(choices.PRECISIONS)
    assert set(choices.HLO_BACKENDS) < set(choices.BACKENDS)
    assert choices.MODES == ("infer", "train") and choices.STAGES == ("before", "after")


def test_split_top_level_respects_brackets_and_strings():
    assert split_top_level("a, f(b, c), [d, e]") == ["a", "f(b, c)", "[d, e]"]
    assert split_top_level('x={1,2}, y="p, q", z') == ["x={1,2}", 'y="p, q"', "z"]
    assert split_top_level("dict[str, list[int]], int") == ["dict[str, list[int]]", "int"]
    assert split_top_level("") == []


def test_one_line():
    assert one_line(ValueError("first\nsecond")) == "ValueError: first"
    assert one_line(KeyError()) == "KeyError"
    assert one_line(RuntimeError("x" * 900), limit=20) == "RuntimeError: xxxxxx"
