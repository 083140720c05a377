"""Row pattern recognition (``match_recognize``): the pattern NFA, the spec, the matcher."""

from operators.match_recognize.matcher import MatchRecognizer
from operators.match_recognize.nfa import Nfa, compile_nfa
from operators.match_recognize.spec import MatchRecognizeSpec, MeasureAggregate

__all__ = ["MatchRecognizeSpec", "MatchRecognizer", "MeasureAggregate", "Nfa", "compile_nfa"]
