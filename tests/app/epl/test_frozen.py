"""AST classes (app.epl.frozen) behave as frozen slotted dataclasses do."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from app.epl import ast as A


def _twin(cls: type) -> type:
    """The same fields as a plain ``@dataclass(frozen=True, slots=True)``."""
    fields = [(f.name, f.type, dataclasses.field(default=f.default, compare=f.compare,
                                                 repr=f.repr, kw_only=f.kw_only))
              for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(cls.__name__, fields, frozen=True, slots=True)


CASES = [
    (A.Literal, (1, "int"), {}),
    (A.Binary, ("+", A.Literal(1, "int"), A.Name(("a",))), {}),
    (A.View, (None, "length", (A.Literal(5, "int"),)), {"syntax": "."}),
    (A.Star, (), {}),
    (A.Pos, (1, 2, 3, 4), {}),
]


@pytest.mark.parametrize(("cls", "args", "kwargs"), CASES)
def test_as_a_frozen_dataclass(cls: type, args: tuple, kwargs: dict) -> None:
    twin = _twin(cls)
    node, ref = cls(*args, **kwargs), twin(*args, **kwargs)
    assert repr(node) == repr(ref)
    assert hash(node) == hash(ref)
    assert node == cls(*args, **kwargs) and node != object()
    assert dataclasses.astuple(node) == dataclasses.astuple(ref)
    assert cls.__match_args__ == twin.__match_args__
    for name in [f.name for f in dataclasses.fields(cls)] + ["other"]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(node, name, 1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(node, name)
    assert pickle.loads(pickle.dumps(node)) == node == copy.deepcopy(node)
    assert not hasattr(node, "__dict__")


def test_position_is_kept_but_not_compared() -> None:
    a = A.Name(("x",), pos=A.Pos(1, 1, 1, 2))
    b = A.Name(("x",), pos=A.Pos(3, 4, 3, 5))
    assert a == b and hash(a) == hash(b) and a.pos != b.pos
    assert dataclasses.replace(a, parts=("y",)) == A.Name(("y",)) and \
        dataclasses.replace(a, parts=("y",)).pos == a.pos
    assert A.View(None, "x", syntax=".") == A.View(None, "x")


def test_wrong_arguments_fail_as_a_dataclass_does() -> None:
    with pytest.raises(TypeError, match=r"Literal.__init__\(\) missing 1 required positional"):
        A.Literal(1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        A.Star(nope=1)
