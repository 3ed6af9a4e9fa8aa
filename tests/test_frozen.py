"""frozen.maker and frozen.replacer: the instance a frozen dataclass's constructor and
`dataclasses.replace` make, made without their call per field."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from coding_os import frozen
from coding_os.adapters.gemini.sessions import GeminiSession
from coding_os.adapters.native import NativeSession, TokenTotals


@dataclass(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)


@pytest.mark.parametrize("cls, values", [
    (Point, {"x": 1}),
    (Point, {"x": 1, "y": 2, "tags": ["a"]}),
    (NativeSession, {"agent": "gemini", "native_id": "n", "path": "/p", "title": "t",
                     "user_messages": 2, "tokens": TokenTotals(input=3)}),
    (GeminiSession, {"native_id": "n", "path": "/p"}),
])
def test_the_made_instance_is_the_one_the_constructor_makes(cls: type[Any],
                                                            values: dict[str, Any]) -> None:
    make = frozen.maker(cls)
    made, other = make(**values), make(**values)
    assert type(made) is cls and made == cls(**values) and repr(made) == repr(cls(**values))
    for item in dataclasses.fields(cls):  # a default factory makes a value for each instance
        if item.default_factory is not dataclasses.MISSING and item.name not in values:
            assert getattr(made, item.name) is not getattr(other, item.name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.path = "/q" if cls is not Point else None


def test_an_unknown_or_a_missing_field_is_refused_as_by_the_constructor() -> None:
    make = frozen.maker(Point)
    with pytest.raises(TypeError, match=r"unknown \['z'\]"):
        make(x=1, z=3)
    with pytest.raises(TypeError, match=r"missing \['x'\]"):
        make(y=2)


def test_a_replaced_instance_is_the_one_dataclasses_replace_makes() -> None:
    replace = frozen.replacer(Point)
    point = Point(1, 2, ["a"])
    assert replace(point, y=5) == dataclasses.replace(point, y=5) == Point(1, 5, ["a"])
    assert point == Point(1, 2, ["a"])  # the instance replaced is left as it was
    with pytest.raises(TypeError, match=r"not fields of Point: \['z'\]"):
        replace(point, z=1)


def test_a_class_whose_constructor_does_more_than_set_fields_is_refused() -> None:
    @dataclass(frozen=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            if self.x < 0:
                raise ValueError("negative")

    with pytest.raises(TypeError, match="does more than set its fields"):
        frozen.maker(Checked)
    with pytest.raises(TypeError, match="does more than set its fields"):
        frozen.replacer(Checked)
