"""Output rate limiting: when result rows reach the listener (Esper ref. 5.7 Output rate
limiting; ``output when terminated`` of contexts, Esper ref. 4.5).

A limited statement hands every update of its data window (after ``where``) to an
``OutputLimiter`` (``limiter``), which runs the result set and composes an output
condition (``conditions``: every N events, every period, at a crontab time, when an
expression holds, after a period or N events, when terminated) with an output strategy
(``strategies``: every row, all, last, first, snapshot, by result-set kind).  Its state
is one bookkeeping entry (``book``, versioned) and the strategy's collectors.
"""

from operators.output.limiter import OutputLimiter
from operators.output.spec import OUTPUT_KINDS, Assignment, OutputSpec

__all__ = ["OUTPUT_KINDS", "Assignment", "OutputLimiter", "OutputSpec"]
