"""Frozen dataclasses made in bulk: an importer makes one session record of every file it reads,
and a frozen dataclass's own constructor sets each field with a call of its own (52 of them for
a Gemini session). `maker(cls)` gives a function that makes the same instance with its fields put
in at once, and `replacer(cls)` one that does what `dataclasses.replace` does the same way."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["maker", "replacer"]

T = TypeVar("T")


def _plain(cls: type[T]) -> frozenset[str]:
    """The names of the fields of `cls`, a dataclass whose constructor only sets them."""
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__} does more than set its fields")
    return frozenset(item.name for item in dataclasses.fields(cls))  # type: ignore[arg-type]


def maker(cls: type[T]) -> Callable[..., T]:
    """A function of keyword arguments that returns what `cls(**values)` returns, for a
    dataclass `cls` whose constructor only sets its fields (no `__post_init__`, no slots): its
    defaults, then `values`, put in the instance's fields at once.

    The function raises TypeError, as the constructor does, for a name that is not a field or a
    field without a default left out.
    """
    names = _plain(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    defaults = {item.name: item.default for item in fields
                if item.default is not dataclasses.MISSING}
    factories = {item.name: item.default_factory for item in fields
                 if item.default_factory is not dataclasses.MISSING}
    required = names - defaults.keys() - factories.keys()
    new = object.__new__

    def make(**values: Any) -> T:
        made: T = new(cls)
        given = made.__dict__
        given.update(defaults)
        given.update(values)
        for name, factory in factories.items():
            if name not in given:
                given[name] = factory()
        # With the fields without a default given, a name that is not a field is one too many.
        if not required <= values.keys() or len(given) != len(names):
            raise TypeError(f"{cls.__name__} fields: missing {sorted(required - values.keys())}, "
                            f"unknown {sorted(values.keys() - names)}")
        return made

    make.__doc__ = f"`{cls.__name__}(**values)`, its fields put in at once (frozen.maker)."
    return make


def replacer(cls: type[T]) -> Callable[..., T]:
    """A function `(instance, **changes)` that returns what `dataclasses.replace(instance,
    **changes)` returns for an instance of `cls` (as for `maker`): a copy of the instance's
    fields with `changes` over them, without running the constructor again.

    The function raises TypeError for a name in `changes` that is not a field.
    """
    names = _plain(cls)
    new = object.__new__

    def replace(instance: T, **changes: Any) -> T:
        unknown = changes.keys() - names
        if unknown:
            raise TypeError(f"not fields of {cls.__name__}: {sorted(unknown)}")
        copy: T = new(cls)
        copy.__dict__.update(instance.__dict__, **changes)
        return copy

    replace.__doc__ = f"`dataclasses.replace` of a `{cls.__name__}` (frozen.replacer)."
    return replace
