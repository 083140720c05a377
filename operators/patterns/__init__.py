"""EPL patterns (``pattern [...]``): specs, the state machine, crontab schedules."""

from operators.patterns.crontab import CronSpec, DayOp
from operators.patterns.matcher import PatternMatcher
from operators.patterns.pattern import PatternSpec
from operators.patterns.spec import (
    And,
    Every,
    EveryDistinct,
    Filter,
    FollowedBy,
    Not,
    Or,
    PatternExpr,
    PatternNode,
    Repeat,
    TimerAt,
    TimerInterval,
    WhileGuard,
    Within,
)

__all__ = [
    "And",
    "CronSpec",
    "DayOp",
    "Every",
    "EveryDistinct",
    "Filter",
    "FollowedBy",
    "Not",
    "Or",
    "PatternExpr",
    "PatternMatcher",
    "PatternNode",
    "PatternSpec",
    "Repeat",
    "TimerAt",
    "TimerInterval",
    "WhileGuard",
    "Within",
]
