"""`gc_paused`: Python's cyclic garbage collector off while the precheck builds and reads a proof's tokens.

A 1 MB proof has up to a million tokens, `lexer.Token` NamedTuples. The collector tracks every instance of a tuple
subclass (it stops tracking exact tuples only), so each full collection that the allocations trigger walks all
tokens built so far, and a precheck of 1 MB triggers about ten of them: some 15-20% of its time. The tokens hold no
cycles and are freed by reference counting when the precheck returns, so pausing the collector leaves it nothing
extra to collect afterwards.

The collector's switch is process-wide and prechecks run in several threads at once, so pauses are counted: the
collector comes back when the last pause ends, and only if it was on when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Within this block (or a function it decorates), no cyclic garbage collection; reference counting goes on."""
    global _pauses, _was_enabled
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
