"""The row-pattern NFA: repeat expansion, variable classification, states and links."""

from __future__ import annotations

from operators.match_recognize.nfa import (
    END,
    Alt,
    Atom,
    Group,
    Seq,
    compile_nfa,
    expand,
    render,
    variables,
)


def test_sequence_links_each_item_to_the_next_skipping_optional_ones() -> None:
    nfa = compile_nfa(Seq((Atom("A"), Atom("B", "*"), Atom("C"))))
    a, b, c = nfa.states
    assert nfa.starts == (0,)
    assert a.next == [2, 1]  # B* may be skipped (later items are linked first)
    assert b.next == [1, 2]  # B* loops before it moves on
    assert c.next == [END]
    assert (a.greedy, b.greedy, c.greedy) == (None, True, None)


def test_reluctant_and_plus_states_keep_no_greedy_count() -> None:
    nfa = compile_nfa(Seq((Atom("A", "*", True), Atom("B", "+"), Atom("C", "?", True))))
    assert [s.greedy for s in nfa.states] == [False, False, False]
    assert nfa.starts == (0, 1)
    assert nfa.states[1].next == [1, 2, END]


def test_plus_swaps_its_greedy_and_group_reading_flags_as_esper_does() -> None:
    nfa = compile_nfa(Seq((Atom("A", "+"), Atom("B", "+"), Atom("C", "+", True),
                           Atom("D", "*"))), frozenset({"B", "D"}))
    a, b, c, d = nfa.states
    assert (a.greedy, a.reads_groups) == (False, True)
    assert (b.greedy, b.reads_groups) == (True, True)
    assert (c.greedy, c.reads_groups) == (False, False)
    assert (d.greedy, d.reads_groups) == (True, True)


def test_pattern_that_may_end_early_ends_at_its_optional_tail() -> None:
    nfa = compile_nfa(Seq((Atom("A"), Atom("B", "+"))))
    assert nfa.states[0].next == [1]
    assert nfa.states[1].next == [1, END]


def test_repeats_expand_into_copies_with_optional_tails() -> None:
    assert expand(Atom("A", repeat=(2, 2, True))) == [Atom("A"), Atom("A")]
    assert expand(Atom("A", repeat=(1, 3, False))) == [Atom("A"), Atom("A", "?"),
                                                       Atom("A", "?")]
    assert expand(Atom("A", repeat=(2, None, False))) == [Atom("A"), Atom("A"),
                                                          Atom("A", "*")]
    assert expand(Atom("A", repeat=(None, 2, False))) == [Atom("A", "?"), Atom("A", "?")]
    assert expand(Atom("A", "+", repeat=(1, 2, False))) == [Atom("A", "+"), Atom("A", "*")]
    group = Group(Seq((Atom("A"), Atom("B"))), repeat=(2, 2, True))
    assert expand(group) == [Group(Seq((Atom("A"), Atom("B")))),
                             Group(Seq((Atom("A"), Atom("B"))))]


def test_variables_used_twice_or_quantified_are_multi_row() -> None:
    assert variables(Seq((Atom("A"), Atom("B", "+"), Atom("C")))) == (["A", "C"], ["B"])
    assert variables(Seq((Atom("A"), Atom("A")))) == ([], ["A"])
    assert variables(Seq((Group(Seq((Atom("A"), Atom("B"))), "*"), Atom("C")))) == (
        ["C"], ["A", "B"])
    # the same variable in two alternatives is still one row
    assert variables(Alt((Seq((Atom("A"),)), Seq((Atom("A"), Atom("B")))))) == (
        ["A", "B"], [])


def test_repeated_group_links_its_ends_back_to_its_starts() -> None:
    nfa = compile_nfa(Seq((Group(Seq((Atom("A"), Atom("B"))), "+"), Atom("C"))))
    a, b, c = nfa.states
    assert a.next == [1]
    assert b.next == [0, 2]  # the group loops first (built before the sequence)
    assert nfa.singles == ("C",) and nfa.multis == ("A", "B")
    assert nfa.streams == {"C": 0, "A": 1, "B": 2}


def test_render_writes_the_pattern_back() -> None:
    p = Seq((Atom("A"), Atom("B", "+", True), Group(Alt((Seq((Atom("C"),)),
                                                        Seq((Atom("D"),)))), "*"),
             Atom("E", repeat=(2, 3, False))))
    assert render(p) == "A B+? (C | D)* E{2,3}"
