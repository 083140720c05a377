"""Window name + parameters -> view spec; composition of several windows on one stream.

``make_view_spec`` validates one window (Esper ref. 14.1: names, namespaces, parameters);
``make_view_chain`` composes the windows of one stream: data windows side by side form a
retain-intersection (Esper's default) or retain-union, a derived-value window consumes
what precedes it, and ``groupwin`` applies the windows after it (up to ``merge``) per group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from importlib import import_module
from typing import TYPE_CHECKING, Any

from operators.base import Expr
from operators.windows.common import Deferred, WindowSpec, check_value, const_expr, in_ms_range

if TYPE_CHECKING:
    from operators.windows.flow_control import FlowControl


@dataclass(frozen=True)
class WindowParam:
    """One window parameter as the planner compiled it.

    ``value``: the constant (int/float/str/bool); for a time period ``is_time`` is set
    and ``value`` is in ms (a plain number for a time parameter means seconds).
    ``expr``: a compiled row expression (property parameters; for ``expr``/``expr_batch``
    an expression over the env row).  ``descending``: ``desc`` after a sort criterion.
    ``aggregates``: ``(key, aggregator, value_expr)`` used inside an expiry expression.
    """

    text: str
    value: Any = None
    is_constant: bool = True
    is_time: bool = False
    expr: Expr | None = None
    descending: bool = False
    aggregates: tuple = ()


# --------------------------------------------------------------------------- parameter helpers


def _at_least(name: str, ms: int, p: WindowParam, what: str, least: int) -> int:
    if ms < least:
        raise _fail(name, f"{what} '{p.text}' must be at least {least} msec, got {ms} msec")
    return ms


def _fail(name: str, message: str) -> ValueError:
    return ValueError(f"window '{name}': {message}")


def _time(name: str, p: WindowParam, what: str = "time period",
          least: int = 1) -> int | Deferred:
    """A time period in ms: a period literal, a number of seconds, or a build-time
    expression.  A constant must come to at least ``least`` ms (Esper ref. 14.3 data
    windows: a time window's size is at least 1 msec; 0 for an offset or age)."""
    if p.is_time:
        if isinstance(p.value, bool) or not isinstance(p.value, (int, float)):
            raise _fail(name, f"parameter '{p.text}' is not a valid {what}")
        if not in_ms_range(p.value):
            raise _fail(name, f"{what} '{p.text}' is out of range")
        return _at_least(name, int(round(p.value)), p, what, least)
    if p.is_constant and p.value is not None:
        if (isinstance(p.value, (int, float)) and not isinstance(p.value, bool)
                and not in_ms_range(p.value * 1000)):
            raise _fail(name, f"{what} '{p.text}' is out of range")
        try:
            ms = check_value(p.value, "time", p.text)
        except ValueError:
            raise _fail(
                name, f"parameter '{p.text}' must be a {what} or a number of seconds"
            ) from None
        return _at_least(name, ms, p, what, least)
    if p.expr is not None:
        return Deferred(p.expr, p.text, "time")
    raise _fail(name, f"parameter '{p.text}' must be a {what} or a number of seconds")


def _count(name: str, p: WindowParam, what: str = "size") -> int | Deferred:
    """A positive integer: a constant or a build-time expression."""
    if p.is_constant and not p.is_time and p.value is not None:
        try:
            return check_value(p.value, "count", p.text)
        except ValueError:
            raise _fail(name, f"{what} '{p.text}' must be a positive integer") from None
    if not p.is_constant and p.expr is not None:
        return Deferred(p.expr, p.text, "count")
    raise _fail(name, f"{what} '{p.text}' must be a positive integer")


def _long(name: str, p: WindowParam, what: str) -> int:
    """A constant long (reference points are milliseconds since the epoch)."""
    if p.is_constant and isinstance(p.value, (int, float)) and not isinstance(p.value, bool):
        return int(p.value)
    raise _fail(name, f"{what} '{p.text}' must be a constant number of milliseconds")


def _expr(name: str, p: WindowParam) -> Expr:
    """A row expression (a constant becomes a constant expression)."""
    if p.expr is not None:
        return p.expr
    if p.is_constant and p.value is not None:
        return const_expr(p.value)
    raise _fail(name, f"parameter '{p.text}' must be an expression")


def _flow(name: str, p: WindowParam) -> FlowControl:
    """Flow-control keywords given as one string literal."""
    from operators.windows.flow_control import FlowControl

    if not (p.is_constant and isinstance(p.value, str)):
        raise _fail(
            name, f"flow control '{p.text}' must be a string such as \"FORCE_UPDATE, START_EAGER\""
        )
    try:
        return FlowControl.parse(p.value)
    except ValueError as exc:
        raise _fail(name, str(exc)) from None


def _arity(name: str, params: Sequence[WindowParam], low: int, high: int | None) -> None:
    n = len(params)
    if n < low or (high is not None and n > high):
        if high == low:
            want = f"{low}"
        elif high is None:
            want = f"at least {low}"
        else:
            want = f"{low} to {high}"
        raise _fail(name, f"expects {want} parameter(s), got {n}")


def _column(text: str) -> str:
    """The column name of an extra derived-window property (its text without whitespace)."""
    return "".join(text.split())


def _texts(params: Sequence[WindowParam]) -> tuple[str, ...]:
    return tuple(p.text for p in params)


# --------------------------------------------------------------------------- one maker per window


def _length(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.length import LengthSpec

    _arity(name, params, 1, 1)
    return LengthSpec(_count(name, params[0]), name=name, params_text=_texts(params))


def _lastevent(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.length import LengthSpec

    _arity(name, params, 0, 0)
    # Esper ref. 14, table 14.1: 'acts as a length window of size 1'
    return LengthSpec(1, name=name)


def _length_batch(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.length_batch import LengthBatchSpec

    _arity(name, params, 1, 1)
    return LengthBatchSpec(_count(name, params[0]), name=name, params_text=_texts(params))


def _time_window(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.time import TimeSpec

    _arity(name, params, 1, 1)
    return TimeSpec(_time(name, params[0]), name=name, params_text=_texts(params))


def _ext_timed(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.ext_timed import ExtTimedSpec

    _arity(name, params, 2, 2)
    return ExtTimedSpec(
        _expr(name, params[0]), _time(name, params[1]), name=name, params_text=_texts(params)
    )


def _time_batch(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.flow_control import FlowControl
    from operators.windows.time_batch import TimeBatchSpec

    _arity(name, params, 1, 3)
    reference = None
    flow = FlowControl()
    rest = list(params[1:])
    if rest and not (rest[0].is_constant and isinstance(rest[0].value, str)):
        reference = _long(name, rest.pop(0), "reference point")
    if rest:
        flow = _flow(name, rest.pop(0))
    if rest:
        raise _fail(name, f"unexpected parameter '{rest[0].text}'")
    return TimeBatchSpec(
        _time(name, params[0]), reference, flow, name=name, params_text=_texts(params)
    )


def _ext_timed_batch(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.ext_timed_batch import ExtTimedBatchSpec

    _arity(name, params, 2, 3)
    reference = _long(name, params[2], "reference point") if len(params) == 3 else None
    return ExtTimedBatchSpec(
        _expr(name, params[0]),
        _time(name, params[1]),
        reference,
        name=name,
        params_text=_texts(params),
    )


def _time_length_batch(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.flow_control import FlowControl
    from operators.windows.time_length_batch import TimeLengthBatchSpec

    _arity(name, params, 2, 3)
    flow = _flow(name, params[2]) if len(params) == 3 else FlowControl()
    return TimeLengthBatchSpec(
        _time(name, params[0]), _count(name, params[1]), flow, name=name, params_text=_texts(params)
    )


def _time_accum(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.time_accum import TimeAccumSpec

    _arity(name, params, 1, 1)
    return TimeAccumSpec(_time(name, params[0]), name=name, params_text=_texts(params))


def _keepall(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.keepall import KeepAllSpec

    _arity(name, params, 0, 0)
    return KeepAllSpec(name=name)


def _firstlength(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.first_length import FirstLengthSpec

    _arity(name, params, 1, 1)
    return FirstLengthSpec(_count(name, params[0]), name=name, params_text=_texts(params))


def _firstevent(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.first_length import FirstLengthSpec

    _arity(name, params, 0, 0)
    # Esper ref. 14, table 14.1: retains the very first event
    return FirstLengthSpec(1, name=name)


def _firsttime(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.first_time import FirstTimeSpec

    _arity(name, params, 1, 1)
    return FirstTimeSpec(_time(name, params[0]), name=name, params_text=_texts(params))


def _expiry(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.expiry_expr import ExpiryExprSpec

    _arity(name, params, 1, 1)
    p = params[0]
    return ExpiryExprSpec(
        _expr(name, p), tuple(p.aggregates), name=name, params_text=_texts(params)
    )


def _expiry_batch(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.expiry_expr_batch import ExpiryExprBatchSpec

    _arity(name, params, 1, 2)
    include = True
    if len(params) == 2:
        q = params[1]
        if not (q.is_constant and isinstance(q.value, bool)):
            raise _fail(name, f"include_triggering_event '{q.text}' must be true or false")
        include = q.value
    p = params[0]
    return ExpiryExprBatchSpec(
        _expr(name, p), include, tuple(p.aggregates), name=name, params_text=_texts(params)
    )


def _unique(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.unique import UniqueSpec

    _arity(name, params, 1, None)
    return UniqueSpec(tuple(_expr(name, p) for p in params), name=name, params_text=_texts(params))


def _firstunique(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.first_unique import FirstUniqueSpec

    _arity(name, params, 1, None)
    return FirstUniqueSpec(
        tuple(_expr(name, p) for p in params), name=name, params_text=_texts(params)
    )


def _groupwin(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.groupwin import GroupWinSpec

    _arity(name, params, 1, None)
    return GroupWinSpec(
        tuple(_expr(name, p) for p in params),
        tuple(_column(p.text) for p in params),
        name=name,
        params_text=_texts(params),
    )


def _merge(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.groupwin import MergeSpec

    return MergeSpec(name=name, params_text=_texts(params))


def _sort(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.sort import SortSpec

    _arity(name, params, 2, None)
    crit = params[1:]
    return SortSpec(
        _count(name, params[0]),
        tuple(_expr(name, p) for p in crit),
        tuple(p.descending for p in crit),
        name=name,
        params_text=_texts(params),
    )


def _rank(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.rank import RankSpec

    _arity(name, params, 3, None)
    # Esper ref. 14.3.20: unique expressions first, then a constant size, then the sort criteria.
    at = next(
        (
            i
            for i in range(1, len(params) - 1)
            if params[i].is_constant
            and isinstance(params[i].value, int)
            and not isinstance(params[i].value, bool)
        ),
        None,
    )
    if at is None:
        raise _fail(name, "expects unique expressions, a constant size, then sort criteria")
    unique, crit = params[:at], params[at + 1 :]
    return RankSpec(
        tuple(_expr(name, p) for p in unique),
        _count(name, params[at]),
        tuple(_expr(name, p) for p in crit),
        tuple(p.descending for p in crit),
        name=name,
        params_text=_texts(params),
    )


def _time_order(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.time_order import TimeOrderSpec

    _arity(name, params, 2, 2)
    return TimeOrderSpec(
        _expr(name, params[0]), _time(name, params[1]), name=name, params_text=_texts(params)
    )


def _timetolive(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.time_order import TimeOrderSpec

    _arity(name, params, 1, 1)
    # Esper 14.3.22: 'fully equivalent to the time-order data window with a zero ... time period'
    return TimeOrderSpec(_expr(name, params[0]), 0, name=name, params_text=_texts(params))


def _derived(module: str, view: str,
             n_values: int) -> Callable[[str, Sequence[WindowParam]], WindowSpec]:
    """The maker of a derived-value window whose view class is ``view`` of
    ``operators.derived.<module>``, imported when a statement uses the window."""

    def make(name: str, params: Sequence[WindowParam]) -> WindowSpec:
        from operators.derived.base import DerivedSpec

        _arity(name, params, n_values, None)
        values = tuple(_expr(name, p) for p in params[:n_values])
        extras: list[tuple[str, Expr]] = []
        wildcard = False
        for p in params[n_values:]:
            if p.text.strip() == "*":
                wildcard = True
            else:
                extras.append((_column(p.text), _expr(name, p)))
        return DerivedSpec(
            values,
            tuple(extras),
            wildcard,
            name=name,
            params_text=_texts(params),
            view_class=getattr(import_module(f"operators.derived.{module}"), view),
        )

    return make


def _time_interval(name: str, params: Sequence[WindowParam]) -> WindowSpec:
    from operators.windows.time_interval import TimeIntervalSpec

    _arity(name, params, 4, 5)
    offset = _time(name, params[4], "interval offset", 0) if len(params) == 5 else 0
    return TimeIntervalSpec(
        _expr(name, params[0]),
        _time(name, params[1], "interval duration"),
        _time(name, params[2], "creation period"),
        _time(name, params[3], "discard age", 0),
        offset,
        name=name,
        params_text=_texts(params),
    )


def _absent(p: WindowParam | None) -> bool:
    """An omitted optional parameter: None, or a constant null without an expression."""
    return p is None or (p.is_constant and p.value is None and p.expr is None)


def _apama(name: str, params: Sequence[WindowParam | None]) -> WindowSpec:
    from operators.windows.apama_batched import ApamaBatchedSpec

    _arity(name, params, 3, 3)
    within_p, every_p, retain_p = params
    absent = _absent
    retain = None if absent(retain_p) else _count(name, retain_p, "retain size")
    if every_p is None:
        # without every the content changes at each item: it enters as it arrives
        if absent(within_p) and retain is None:
            raise _fail(name, "needs 'within' or 'retain'")
        return ApamaBatchedSpec(
            None if absent(within_p) else _time(name, within_p, "window duration"),
            None, retain, name=name,
            params_text=tuple("" if p is None or absent(p) else p.text for p in params))
    if absent(within_p):
        if retain is None:
            raise _fail(name, "needs 'within' or 'retain'")
        # Apama batched windows: for 'retain N every M', every counts items.
        every: int | Deferred = _count(name, every_p, "batch size")
        within = None
    else:
        # Apama batched windows: with 'within', every is always a number of seconds.
        within = _time(name, within_p, "window duration")
        every = _time(name, every_p, "batch period")
        if isinstance(every, int) and every <= 0:
            raise _fail(name, "batch period must be positive")
    return ApamaBatchedSpec(
        within,
        every,
        retain,
        name=name,
        params_text=tuple("" if p is None or absent(p) else p.text for p in params),
    )


Maker = Callable[[str, Sequence[WindowParam]], WindowSpec]

# name -> (namespace, maker); Esper ref. 14.1 / tables 14.1 and 14.2.
WINDOWS: dict[str, tuple[str | None, Maker]] = {
    "length": ("win", _length),
    "length_batch": ("win", _length_batch),
    "time": ("win", _time_window),
    "ext_timed": ("win", _ext_timed),
    "time_batch": ("win", _time_batch),
    "ext_timed_batch": ("win", _ext_timed_batch),
    "time_length_batch": ("win", _time_length_batch),
    "time_accum": ("win", _time_accum),
    "keepall": ("win", _keepall),
    "firstlength": ("win", _firstlength),
    "firsttime": ("win", _firsttime),
    "expr": ("win", _expiry),
    "expr_batch": ("win", _expiry_batch),
    "unique": ("std", _unique),
    "groupwin": ("std", _groupwin),
    "merge": ("std", _merge),
    "lastevent": ("std", _lastevent),
    "firstevent": ("std", _firstevent),
    "firstunique": ("std", _firstunique),
    "size": ("std", _derived("size", "SizeView", 0)),
    "sort": ("ext", _sort),
    "rank": ("ext", _rank),
    "time_order": ("ext", _time_order),
    "timetolive": ("ext", _timetolive),
    "uni": ("stat", _derived("univariate", "UnivariateView", 1)),
    "linest": ("stat", _derived("regression", "RegressionView", 2)),
    "correl": ("stat", _derived("correlation", "CorrelationView", 2)),
    "weighted_avg": ("stat", _derived("weighted_avg", "WeightedAverageView", 2)),
    # kepl extensions (conformance INDEX conventions): no namespace
    "time_interval": (None, _time_interval),
    "apama_batched": (None, _apama),
}


def make_view_spec(name: str, params: list[WindowParam], namespace: str | None = None) -> Any:
    """The spec of one window, e.g. ``make_view_spec("length", [WindowParam("5", 5)])``.

    Raises ValueError for an unknown name, a namespace the window is not in, or a wrong
    parameter count or type.
    """
    entry = WINDOWS.get(name)
    if entry is None:
        raise ValueError(f"unknown data window '{name}'")
    home, maker = entry
    if namespace is not None and namespace != home:
        where = f"'{home}:{name}'" if home else f"'{name}' without a namespace"
        raise ValueError(f"unknown data window '{namespace}:{name}' (did you mean {where}?)")
    spec = maker(name, list(params))
    if namespace is not None:
        spec = replace(spec, name=f"{namespace}:{name}")
    return spec


def _side_by_side(windows: list[Any], union: bool) -> Any:
    from operators.windows.intersection import IntersectionSpec
    from operators.windows.union import UnionSpec

    if len(windows) == 1:
        return windows[0]
    return UnionSpec(tuple(windows)) if union else IntersectionSpec(tuple(windows))


def make_view_chain(specs: Sequence[Any], union: bool = False) -> Any:
    """Compose the windows declared on one stream, in order.

    Consecutive data windows form a retain-intersection (``union=False``, Esper's
    default) or retain-union; a derived-value window consumes the windows before it;
    ``groupwin(...)`` applies everything after it up to ``merge`` (or the end) per group.
    """
    from operators.windows.chain import ChainSpec
    from operators.windows.groupwin import GroupWinSpec, MergeSpec

    if not specs:
        raise ValueError("no data window given")
    stages: list[Any] = []
    side: list[Any] = []
    i = 0
    items = list(specs)
    while i < len(items):
        spec = items[i]
        if isinstance(spec, MergeSpec):
            raise ValueError("merge may only follow a groupwin declaration")
        if isinstance(spec, GroupWinSpec):
            if any(isinstance(s, GroupWinSpec) for s in items[i + 1 :]):
                raise ValueError("only one groupwin may be declared per stream")
            end = next(
                (j for j in range(i + 1, len(items)) if isinstance(items[j], MergeSpec)), len(items)
            )
            if end == i + 1:
                raise ValueError("groupwin must be followed by at least one window")
            if side:
                stages.append(_side_by_side(side, union))
                side = []
            stages.append(replace(spec, sub=make_view_chain(items[i + 1 : end], union)))
            i = end + 1
            continue
        if spec.is_derived or not spec.combinable:
            if side:
                stages.append(_side_by_side(side, union))
                side = []
            stages.append(spec)
        else:
            side.append(spec)
        i += 1
    if side:
        stages.append(_side_by_side(side, union))
    return stages[0] if len(stages) == 1 else ChainSpec(tuple(stages))


__all__ = ["WINDOWS", "WindowParam", "make_view_chain", "make_view_spec"]
