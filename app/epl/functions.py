"""Compiling calls of user functions and of ``java.lang.Math`` methods.

The functions a statement may call are those of the catalog it is planned against;
``using`` makes them known to the expression compiler for the time of one planning
(``has_aggregate`` and the window checks read them too, without a catalog at hand).
Calls are checked against the declaration: argument count and, where an argument's type
is evident (a literal, a property, an arithmetic or another call with a declared
result), its type; an error points at the call or the argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

from app.epl import ast
from app.epl.errors import EplValidationError, closest, verr
from app.runtime.functions import FunctionDef, FunctionError
from operators.base import Expr, PartitionCtx
from operators.user_functions import UserAggregator, UserFunctionError, failed

_ACTIVE: ContextVar[Mapping[str, FunctionDef]] = ContextVar(
    "kepl_functions", default=MappingProxyType({}))


@contextmanager
def using(functions: Mapping[str, FunctionDef]) -> Iterator[None]:
    """Make ``functions`` the callable user functions while the block plans."""
    token = _ACTIVE.set(functions)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def user_function(name: str) -> FunctionDef | None:
    """The declared function called ``name`` (names are case-sensitive)."""
    return _ACTIVE.get().get(name)


def is_user_aggregate(name: str) -> bool:
    fd = _ACTIVE.get().get(name)
    return fd is not None and fd.aggregate


def near_miss(name: str) -> str | None:
    """A declared function whose name differs from ``name`` by case or a typo."""
    names = list(_ACTIVE.get())
    for n in names:
        if n.lower() == name.lower():
            return n
    return closest(name, names) if names else None


# -- types of expressions ----------------------------------------------------------------

_NUMERIC = ("int", "long", "double", "number")
_NORM = {"int": "int", "integer": "int", "short": "int", "byte": "int", "long": "long",
         "double": "double", "float": "double", "bigdecimal": "double", "string": "string",
         "boolean": "boolean"}
_WIDTH = {"int": 0, "long": 1, "double": 2}


def _widen(a: str | None, b: str | None) -> str | None:
    if a in _WIDTH and b in _WIDTH:
        return a if _WIDTH[a] >= _WIDTH[b] else b
    if a in _NUMERIC and b in _NUMERIC:
        return "number"
    return None


def kind_of(node: ast.Node, scope: Any) -> str | None:
    """The type of an expression when it is evident (int, long, double, number, string,
    boolean, null, event), else None: calls are checked only where it is."""
    if isinstance(node, ast.Literal):
        return node.type
    if isinstance(node, ast.Star):
        return "event"
    if isinstance(node, ast.Name):
        if len(node.parts) == 1 and node.parts[0] in scope.tags:
            return "event"  # a pattern tag: the event it matched
        env = getattr(scope, "tables", None)
        parts = node.parts
        if len(parts) == 2 and parts[0] in scope.aliases:
            parts = parts[1:]
        if env is None or len(parts) != 1 or parts[0] in scope.variables:
            return None
        t = env.props.get(parts[0])
        return _NORM.get(str(t).lower()) if t is not None else None
    if isinstance(node, ast.Unary):
        if node.op == "not":
            return "boolean"
        k = kind_of(node.operand, scope)
        return k if k in _NUMERIC else None
    if isinstance(node, ast.Binary):
        if node.op in ("and", "or", "=", "!=", "<", "<=", ">", ">="):
            return "boolean"
        if node.op == "||":
            return "string"
        a, b = kind_of(node.left, scope), kind_of(node.right, scope)
        if node.op == "/":
            return "double" if a in _NUMERIC and b in _NUMERIC else None
        if node.op == "+" and "string" in (a, b):
            return "string"
        return _widen(a, b)
    if isinstance(node, ast.Between | ast.InList | ast.Like | ast.Regexp | ast.IsNull
                  | ast.IsSame):
        return "boolean"
    if isinstance(node, ast.Cast):
        return _NORM.get(str(node.type_name).lower())
    if isinstance(node, ast.Call):
        fd = user_function(node.name)
        if fd is not None:
            return _NORM.get(fd.returns)
        m = _math_method(node.name)
        if m is not None:
            return _MATH[m][3]([kind_of(a, scope) for a in node.args])
        if node.name.lower() == "count":
            return "long"
    return None


_ACCEPTS = {"int": ("int",), "long": ("int", "long"), "double": ("int", "long", "double"),
            "float": ("int", "long", "double"), "string": ("string",),
            "boolean": ("boolean",)}


def _check_arg(fd: FunctionDef, index: int, arg: Any, want: str, scope: Any) -> None:
    have = kind_of(arg, scope)
    if want == "event":
        if have != "event":
            raise verr(f"parameter {index + 1} of '{fd.name}' takes an event", arg,
                       hint=f"pass the event as '*', as in {fd.name}(*), or a pattern tag")
        return
    if have == "event":
        raise verr(f"parameter {index + 1} of '{fd.name}' is {want}, not an event", arg,
                   hint=_signature_hint(fd))
    if want == "any" or have is None or have == "null":
        return
    if have == "number" and want in ("int", "long", "double", "float"):
        return
    if have not in _ACCEPTS[want]:
        from app.epl.printer import to_epl as text_of

        raise verr(f"parameter {index + 1} of '{fd.name}' is {want}; "
                   f"'{text_of(arg)}' is {_a(have)} {have}", arg, hint=_signature_hint(fd))


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _signature_hint(fd: FunctionDef) -> str:
    return f"{fd.name} takes ({', '.join(fd.params) or 'no arguments'}) and returns " \
           f"{fd.returns}"


def call_args(fd: FunctionDef, node: ast.Call, scope: Any) -> tuple[Any, ...]:
    """The arguments of a call of ``fd``, checked against its parameters."""
    args = tuple(node.args) if not node.star else (ast.Star(pos=node.pos),)
    if node.distinct and not fd.aggregate:
        raise verr(f"'distinct' applies to aggregation functions; '{fd.name}' is a "
                   "single-row function", node)
    if len(args) != len(fd.params):
        raise verr(f"function '{fd.name}' takes {len(fd.params)} argument(s), "
                   f"{len(args)} given", node, hint=_signature_hint(fd))
    for i, (a, want) in enumerate(zip(args, fd.params)):
        _check_arg(fd, i, a, want, scope)
    return args


def _load(fd: FunctionDef, node: ast.Call) -> Any:
    try:
        return fd.load()
    except FunctionError as e:
        raise verr(str(e), node, hint=e.hint or "kepl imports the module of a declared "
                   "function when a statement calls it") from None


def _result_check(fd: FunctionDef) -> Callable[[Any], Any] | None:
    """What checks (and converts) a function's result against its declared type."""
    want = fd.returns
    name = fd.name

    def wrong(v: Any) -> UserFunctionError:
        return UserFunctionError(f"function {name} returned {v!r:.60}, declared {want}")

    if want in ("double", "float"):
        def to_double(v: Any) -> Any:
            if v is None or type(v) is float:
                return v
            if isinstance(v, int | float) and not isinstance(v, bool):
                return float(v)
            raise wrong(v)
        return to_double
    if want in ("int", "long"):
        bits = 32 if want == "int" else 64

        def to_int(v: Any) -> Any:
            if v is None or (type(v) is int and -(1 << (bits - 1)) <= v < (1 << (bits - 1))):
                return v
            raise wrong(v)
        return to_int
    exact = _EXACT_RESULTS.get(want)
    if exact is None:
        return None

    def of_type(v: Any) -> Any:
        if v is None or type(v) is exact:
            return v
        raise wrong(v)
    return of_type


_EXACT_RESULTS: dict[str, type] = {"string": str, "boolean": bool}
"""Declared result types a value must have exactly (no conversion)."""


def _widened(f: Expr, want: str) -> Expr:
    """An argument as the parameter takes it: an int becomes a float for a double."""
    if want not in ("double", "float"):
        return f

    def to_double(r: Any, c: PartitionCtx) -> Any:
        v = f(r, c)
        return float(v) if type(v) is int else v
    return to_double


def compile_user_call(fd: FunctionDef, node: ast.Call, scope: Any,
                      compile_expr: Callable[[Any, Any], Expr]) -> Expr:
    """A single-row user function call: arguments evaluated, doubles widened, the
    function called, a raise or a result of the wrong type turned into
    UserFunctionError (nulls are passed to the function as None)."""
    if fd.aggregate:
        raise verr(f"aggregation function '{fd.name}' is not allowed here", node)
    args = call_args(fd, node, scope)
    fn = _load(fd, node)
    fns = [_widened(compile_expr(a, scope), want) for a, want in zip(args, fd.params)]
    check = _result_check(fd)
    name = fd.name

    def call(r: Any, c: PartitionCtx) -> Any:
        vals = [f(r, c) for f in fns]
        try:
            out = fn(*vals)
        except Exception as e:  # noqa: BLE001 - a user error dead-letters the event
            failed(UserFunctionError(f"function {name} raised {type(e).__name__}: {e}"))
            return None
        if check is None:
            return out
        try:
            return check(out)
        except UserFunctionError as e:
            failed(e)
            return None
    return call


def user_aggregator(fd: FunctionDef, node: ast.Call, scope: Any,
                    compile_expr: Callable[[Any, Any], Expr]) -> tuple[Any, Expr]:
    """(aggregator, value expression) of a user aggregation function call."""
    args = call_args(fd, node, scope)
    factory = _load(fd, node)
    fns = [_widened(compile_expr(a, scope), want) for a, want in zip(args, fd.params)]
    if len(fns) == 1:
        value = fns[0]
    else:
        tfns = tuple(fns)

        def value(r: Any, c: PartitionCtx) -> Any:
            return tuple(f(r, c) for f in tfns)
    agg = UserAggregator(fd.name, factory, len(fns))
    check = _result_check(fd)
    if check is not None:
        raw = agg.result

        def checked(state: Any) -> Any:
            try:
                return check(raw(state))
            except UserFunctionError as e:
                failed(e)
                return None
        agg.result = checked  # type: ignore[method-assign]
    return agg, value


def user_aggregation_column(call: Any) -> Any:
    """The aggregator of a table column declared with a user aggregation function
    (``total spread(double)``), or None when the call names none."""
    fd = user_function(call.name)
    if fd is None or not fd.aggregate:
        return None
    agg: Any = UserAggregator(fd.name, _load(fd, call), len(fd.params))
    if call.distinct:
        from operators.aggregates import Distinct

        agg = Distinct(agg)
    return agg


# -- java.lang.Math ------------------------------------------------------------------

LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


def _nan_or(fn: Callable[[float], float]) -> Callable[[Any], float]:
    """A one-argument double function with Java's answers where Python raises."""
    def run(x: Any) -> float:
        x = float(x)
        try:
            return fn(x)
        except OverflowError:
            return math.inf
        except ValueError:
            return math.nan
    return run


def _round(x: Any) -> int:
    """Math.round: the closest long, ties up (floor(x + 0.5) without its rounding error);
    NaN is 0 and values beyond a long are clamped."""
    if type(x) is int:
        return x
    if x != x:
        return 0
    if math.isinf(x):
        return LONG_MAX if x > 0 else LONG_MIN
    r = math.floor(x)
    if x - r >= 0.5:
        r += 1
    return max(LONG_MIN, min(LONG_MAX, r))


def _floor(x: Any) -> float:
    x = float(x)
    return x if not math.isfinite(x) else float(math.floor(x))


def _ceil(x: Any) -> float:
    x = float(x)
    return x if not math.isfinite(x) else float(math.ceil(x))


def _log(base10: bool) -> Callable[[Any], float]:
    def log(x: Any) -> float:
        x = float(x)
        if x != x or x < 0:
            return math.nan
        if x == 0:
            return -math.inf
        return math.log10(x) if base10 else math.log(x)
    return log


def _pow(x: Any, y: Any) -> float:
    x, y = float(x), float(y)
    try:
        return math.pow(x, y)
    except OverflowError:
        return -math.inf if x < 0 and y.is_integer() and y % 2 == 1 else math.inf
    except ValueError:  # 0 to a negative power, or a negative base to a fraction
        if x == 0:
            odd = y.is_integer() and y % 2 == 1
            return -math.inf if odd and math.copysign(1.0, x) < 0 else math.inf
        return math.nan


def _signum(x: Any) -> float:
    x = float(x)
    if x != x or x == 0:
        return x
    return 1.0 if x > 0 else -1.0


def _extreme(pick: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Math.max/min: ints stay ints; a double makes both doubles and NaN wins."""
    def run(a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int:
            return pick(a, b)
        a, b = float(a), float(b)
        if a != a or b != b:
            return math.nan
        return pick(a, b)
    return run


def _same(kinds: list[str | None]) -> str | None:
    k = kinds[0] if kinds else None
    for other in kinds[1:]:
        k = _widen(k, other)
    return k if k in _NUMERIC else None


def _double(kinds: list[str | None]) -> str | None:
    return "double"


def _long(kinds: list[str | None]) -> str | None:
    return "long"


_MATH: dict[str, tuple[Callable[..., Any], int, str, Callable[[list[str | None]], str | None]]]
_MATH = {
    # Esper ref. 10.1 single-row functions: static Java methods such as java.lang.Math
    # are callable by class and method name; these are answered with Java's semantics.
    "abs": (abs, 1, "abs(x)", _same),
    "max": (_extreme(max), 2, "max(a, b)", _same),
    "min": (_extreme(min), 2, "min(a, b)", _same),
    "round": (_round, 1, "round(x)", _long),
    "floor": (_floor, 1, "floor(x)", _double),
    "ceil": (_ceil, 1, "ceil(x)", _double),
    "rint": (_nan_or(lambda x: float(round(x)) if math.isfinite(x) else x), 1, "rint(x)",
             _double),
    "sqrt": (_nan_or(math.sqrt), 1, "sqrt(x)", _double),
    "cbrt": (_nan_or(lambda x: math.copysign(abs(x) ** (1 / 3), x)), 1, "cbrt(x)", _double),
    "exp": (_nan_or(math.exp), 1, "exp(x)", _double),
    "log": (_log(False), 1, "log(x)", _double),
    "log10": (_log(True), 1, "log10(x)", _double),
    "pow": (_pow, 2, "pow(x, y)", _double),
    "signum": (_signum, 1, "signum(x)", _double),
    "sin": (_nan_or(math.sin), 1, "sin(x)", _double),
    "cos": (_nan_or(math.cos), 1, "cos(x)", _double),
    "tan": (_nan_or(math.tan), 1, "tan(x)", _double),
    "asin": (_nan_or(math.asin), 1, "asin(x)", _double),
    "acos": (_nan_or(math.acos), 1, "acos(x)", _double),
    "atan": (_nan_or(math.atan), 1, "atan(x)", _double),
    "atan2": (lambda y, x: math.atan2(float(y), float(x)), 2, "atan2(y, x)", _double),
    "hypot": (lambda x, y: math.hypot(float(x), float(y)), 2, "hypot(x, y)", _double),
    "toradians": (_nan_or(math.radians), 1, "toRadians(x)", _double),
    "todegrees": (_nan_or(math.degrees), 1, "toDegrees(x)", _double),
}


def _math_method(name: str) -> str | None:
    """The Math method a call names (``Math.abs``, ``java.lang.Math.abs``), or None."""
    lname = name.lower()
    for prefix in ("math.", "java.lang.math."):
        if lname.startswith(prefix):
            return lname[len(prefix):] if lname[len(prefix):] in _MATH else None
    return None


def compile_math_call(node: ast.Call, scope: Any, compile_expr: Callable[[Any, Any], Expr]
                      ) -> Expr | None:
    """``Math.m(args)``, or None when the call names no Math method this engine has;
    null when an argument is null."""
    lname = node.name.lower()
    if not (lname.startswith("math.") or lname.startswith("java.lang.math.")):
        return None
    method = lname.rsplit(".", 1)[1]
    if method == "random":
        raise verr("Math.random() is not allowed: its value differs on every replay", node,
                   hint="rows must be the same whenever events are replayed; pass a "
                        "seed-free value from the event instead")
    m = _math_method(node.name)
    if m is None:
        best = closest(method, [s for _, _, s, _ in _MATH.values()])
        raise EplValidationError(
            f"unknown Math method '{node.name.rsplit('.', 1)[1]}'", node.pos.line or None,
            node.pos.column or None, None,
            f"did you mean 'Math.{best}'?" if best else
            "the Math methods are " + ", ".join(s for _, _, s, _ in _MATH.values()))
    fn, arity, sig, _ = _MATH[m]
    if len(node.args) != arity or node.star:
        raise verr(f"Math.{sig.split('(')[0]} takes {arity} argument(s), "
                   f"{len(node.args)} given", node, hint=f"write Math.{sig}")
    for a in node.args:
        k = kind_of(a, scope)
        if k is not None and k not in _NUMERIC and k != "null":
            from app.epl.printer import to_epl as text_of

            raise verr(f"Math.{sig.split('(')[0]} takes numbers; '{text_of(a)}' is "
                       f"{_a(k)} {k}", a, hint=f"write Math.{sig}")
    fns = [compile_expr(a, scope) for a in node.args]
    if arity == 1:
        f0 = fns[0]

        def math1(r: Any, c: PartitionCtx) -> Any:
            v = f0(r, c)
            return None if v is None else fn(v)
        return math1
    f0, f1 = fns

    def math2(r: Any, c: PartitionCtx) -> Any:
        a = f0(r, c)
        if a is None:
            return None
        b = f1(r, c)
        return None if b is None else fn(a, b)
    return math2
