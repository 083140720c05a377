"""The row pattern of a match_recognize and the NFA compiled from it.

Esper reference, chapter "EPL Reference: Match Recognize": a pattern is concatenation,
alternation (``|``), grouping and the quantifiers ``*``, ``+``, ``?`` (reluctant with a
trailing ``?``) and repeats ``{n}``, ``{n,}``, ``{,m}``, ``{n,m}``.  Repeats expand into
copies of the item; the NFA is a list of states, each testing one variable's condition
and naming its next states in preference order (the end state included), as Esper's
row-pattern NFA does, so that matches and their ranking agree with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ONE, ZERO_MANY, ONE_MANY, OPTIONAL = "", "*", "+", "?"
"""Quantifier kinds; ``reluctant`` is a separate flag."""

END = -1
"""The end state's number: reaching it completes a match."""


@dataclass(frozen=True)
class Atom:
    """One pattern variable with its quantifier."""

    name: str
    kind: str = ONE
    reluctant: bool = False
    repeat: tuple[int | None, int | None, bool] | None = None
    """(low, high, exact) of a ``{...}`` repeat."""


@dataclass(frozen=True)
class Seq:
    """Items one after the other."""

    items: tuple[object, ...]


@dataclass(frozen=True)
class Alt:
    """One of the alternatives, the leftmost preferred."""

    alternatives: tuple[object, ...]


@dataclass(frozen=True)
class Group:
    """A parenthesised sub-pattern with its quantifier."""

    child: object
    kind: str = ONE
    reluctant: bool = False
    repeat: tuple[int | None, int | None, bool] | None = None


def multiple(kind: str) -> bool:
    return kind in (ZERO_MANY, ONE_MANY)


def optional(kind: str) -> bool:
    return kind in (ZERO_MANY, OPTIONAL)


# ------------------------------------------------------------------ repeat expansion


def _repeat_kinds(kind: str, low: int | None, high: int | None,
                  exact: bool) -> list[str]:
    """The quantifier of each copy a repeat expands into (Esper's repeat expansion: the
    copies past the lower bound become optional, an open upper bound one '*')."""
    if exact:
        return [kind] * (low or 0)
    if low is not None and high is not None:
        tail = {ONE: OPTIONAL, ONE_MANY: ZERO_MANY}.get(kind, kind)
        return [kind] * low + [tail] * (high - low)
    if high is None:
        tail = {ONE: ZERO_MANY, OPTIONAL: ZERO_MANY, ONE_MANY: ZERO_MANY}.get(kind, kind)
        return [kind] * (low or 0) + [tail]
    return [{ONE: OPTIONAL, ONE_MANY: ZERO_MANY}.get(kind, kind)] * high


def expand(node: object) -> list[object]:
    """The node with every repeat expanded, as the items it stands for in a sequence."""
    if isinstance(node, Atom):
        if node.repeat is None:
            return [node]
        return [Atom(node.name, k, node.reluctant)
                for k in _repeat_kinds(node.kind, *node.repeat)]
    if isinstance(node, Seq):
        return [Seq(tuple(x for item in node.items for x in expand(item)))]
    if isinstance(node, Alt):
        return [Alt(tuple(_one(expand(a)) for a in node.alternatives))]
    if isinstance(node, Group):
        child = _one(expand(node.child))
        if node.repeat is None:
            return [Group(child, node.kind, node.reluctant)]
        return [Group(child, k, node.reluctant) for k in _repeat_kinds(node.kind, *node.repeat)]
    raise TypeError(f"not a pattern node: {node!r}")


def _one(items: list[object]) -> object:
    return items[0] if len(items) == 1 else Seq(tuple(items))


# --------------------------------------------------------------------- variables


def variables(node: object) -> tuple[list[str], list[str]]:
    """(single-row variables, multi-row variables) in order of appearance: a variable
    is multi-row when quantified with ``*``/``+``, inside such a group, or used twice
    in one branch (Esper reference: "Variables ... can be singleton or group")."""
    singles: dict[str, None] = {}
    multis: dict[str, None] = {}
    _inspect(node, False, singles, multis)
    return list(singles), list(multis)


def _inspect(node: object, many: bool, singles: dict[str, None],
             multis: dict[str, None]) -> None:
    if isinstance(node, Group):
        _inspect(node.child, multiple(node.kind) or many, singles, multis)
    elif isinstance(node, Alt):
        for alt in node.alternatives:
            s: dict[str, None] = {}
            m: dict[str, None] = {}
            _inspect(alt, many, s, m)
            multis.update(m)
            singles.update(s)
        for name in multis:
            singles.pop(name, None)
    elif isinstance(node, Atom):
        name = node.name
        if name in multis:
            return
        if name in singles:
            del singles[name]
            multis[name] = None
            return
        if multiple(node.kind) or many:
            multis[name] = None
        else:
            singles[name] = None
    elif isinstance(node, Seq):
        for item in node.items:
            _inspect(item, many, singles, multis)


def visibility(node: object) -> dict[str, set[str]]:
    """Variable -> the other variables a condition of it may read: those before it in
    an enclosing sequence (Esper's define visibility)."""
    out: dict[str, set[str]] = {}

    def atoms(n: object) -> list[str]:
        if isinstance(n, Atom):
            return [n.name]
        kids = (n.items if isinstance(n, Seq) else n.alternatives if isinstance(n, Alt)
                else (n.child,) if isinstance(n, Group) else ())
        return [a for k in kids for a in atoms(k)]

    def walk(n: object, before: set[str]) -> None:
        if isinstance(n, Atom):
            out.setdefault(n.name, set()).update(before - {n.name})
        elif isinstance(n, Seq):
            seen = set(before)
            for item in n.items:
                walk(item, seen)
                seen |= set(atoms(item))
        elif isinstance(n, Alt):
            for alt in n.alternatives:
                walk(alt, before)
        elif isinstance(n, Group):
            walk(n.child, before)

    walk(_one(expand(node)), set())
    return out


# --------------------------------------------------------------------------- NFA


@dataclass
class State:
    """One NFA state: the variable it assigns the event to and what may follow.

    ``greedy`` is None for a plain variable; greedy states count their matches so that
    among matches starting at the same row the one with more rows is preferred."""

    num: int
    var: str
    stream: int
    multi: bool
    kind: str
    greedy: bool | None
    next: list[int] = field(default_factory=list)
    reads_groups: bool = False
    """Its condition sees the events of the other multi-row variables (``B[0].v``)."""


@dataclass
class _Strand:
    starts: list[State]
    ends: list[State]
    states: list[State]
    passthrough: bool


@dataclass(frozen=True)
class Nfa:
    """The compiled pattern: states by number, the start states in preference order."""

    states: tuple[State, ...]
    starts: tuple[int, ...]
    singles: tuple[str, ...]
    multis: tuple[str, ...]

    @property
    def streams(self) -> dict[str, int]:
        """Variable -> its slot: single-row variables first, then multi-row ones."""
        return {v: i for i, v in enumerate((*self.singles, *self.multis))}


def compile_nfa(pattern: object, reads_groups: frozenset[str] = frozenset()) -> Nfa:
    """Expand repeats, classify variables and build the states (Esper's strand
    construction: a sequence links each item's end states to the next item's start
    states, skipping over optional items; a repeated group links its ends back to its
    starts; every end state of the whole pattern is followed by the end)."""
    root = _one(expand(pattern))
    singles, multis = variables(root)
    streams = {v: i for i, v in enumerate((*singles, *multis))}
    made: list[State] = []
    strand = _build(root, streams, set(multis), made, reads_groups)
    for s in strand.ends:
        s.next.append(END)
    for i, s in enumerate(strand.states):
        s.num = i
    by_id = {id(s): s.num for s in strand.states}
    states = tuple(State(s.num, s.var, s.stream, s.multi, s.kind, s.greedy,
                         [n if n == END else by_id[n] for n in s.next], s.reads_groups)
                   for s in strand.states)
    return Nfa(states, tuple(by_id[id(s)] for s in strand.starts), tuple(singles),
               tuple(multis))


def _link(frm: State, to: State) -> None:
    frm.next.append(id(to))  # type: ignore[arg-type]


def _build(node: object, streams: dict[str, int], multis: set[str],
           made: list[State], reads: frozenset[str]) -> _Strand:
    if isinstance(node, Alt):
        starts: list[State] = []
        ends: list[State] = []
        states: list[State] = []
        passthrough = False
        for alt in node.alternatives:
            s = _build(alt, streams, multis, made, reads)
            starts += s.starts
            ends += s.ends
            states += s.states
            passthrough = passthrough or s.passthrough
        return _Strand(starts, ends, states, passthrough)
    if isinstance(node, Seq):
        strands = [_build(item, streams, multis, made, reads) for item in node.items]
        states = [st for s in strands for st in s.states]
        passthrough = all(s.passthrough for s in strands)
        starts = []
        for s in strands:
            starts += s.starts
            if not s.passthrough:
                break
        ends = []
        for s in reversed(strands):
            ends += s.ends
            if not s.passthrough:
                break
        for i in range(len(strands) - 1, 0, -1):
            for j in range(i - 1, -1, -1):
                prior = strands[j]
                for e in prior.ends:
                    for st in strands[i].starts:
                        _link(e, st)
                if not prior.passthrough:
                    break
        return _Strand(starts, ends, states, passthrough)
    if isinstance(node, Group):
        s = _build(node.child, streams, multis, made, reads)
        if multiple(node.kind):
            for e in s.ends:
                for st in s.starts:
                    if id(st) not in e.next:
                        _link(e, st)
        return _Strand(s.starts, s.ends, s.states, s.passthrough or optional(node.kind))
    assert isinstance(node, Atom)
    kind = node.kind
    greedy: bool | None
    reads_groups = node.name in reads
    if kind == ONE_MANY:
        # Esper 9's '+' state has its two flags swapped: it counts for the greedy
        # ranking only when its condition reads other groups' events, and its condition
        # sees those events only when it is not reluctant
        greedy, reads_groups = reads_groups, not node.reluctant
    elif kind in (ZERO_MANY, OPTIONAL):
        greedy = not node.reluctant
    else:
        greedy = None
    st = State(0, node.name, streams[node.name], node.name in multis, kind, greedy,
               reads_groups=reads_groups)
    if multiple(kind):
        _link(st, st)
    made.append(st)
    return _Strand([st], [st], [st], optional(kind))


def render(node: object) -> str:
    """The pattern as written (for ``kepl explain``)."""
    def rep(r: tuple[int | None, int | None, bool] | None) -> str:
        if r is None:
            return ""
        low, high, exact = r
        if exact:
            return f"{{{low}}}"
        return "{" + ("" if low is None else str(low)) + "," + (
            "" if high is None else str(high)) + "}"
    if isinstance(node, Atom):
        return node.name + node.kind + ("?" if node.reluctant else "") + rep(node.repeat)
    if isinstance(node, Seq):
        return " ".join(render(i) for i in node.items)
    if isinstance(node, Alt):
        return " | ".join(render(a) for a in node.alternatives)
    if isinstance(node, Group):
        return ("(" + render(node.child) + ")" + node.kind + ("?" if node.reluctant else "")
                + rep(node.repeat))
    return str(node)
