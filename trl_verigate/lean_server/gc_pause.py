"""`gc_paused`: Python's cyclic garbage collector off while the precheck builds and reads a proof's tokens.

A 1 MB proof has up to a million tokens, `lexer.Token` NamedTuples. The collector tracks every instance of a tuple
subclass (it stops tracking exact tuples only), so each full collection that the allocations trigger walks all
tokens built so far, and a precheck of 1 MB triggers about ten of them: some 15-20% of its time. The tokens hold no
cycles and are freed by reference counting when the precheck returns, so pausing the collector leaves it nothing
extra to collect afterwards.

The collector's switch is process-wide and prechecks run in several threads at once, so pauses are counted: the
collector comes back when the last pause ends, and only if it was on when the first began. Under steady load the
pauses of several threads can overlap without end, and cyclic garbage that other code makes would pile up: a pause
that ends while others go on runs a full collection itself once the collector has been off for
`MAX_PAUSE_SECONDS`.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# The longest the collector stays off (or since its last collection) while pauses overlap, in seconds.
MAX_PAUSE_SECONDS = 5.0

_lock = threading.Lock()
_pauses = 0
_was_enabled = False
_off_since = 0.0  # when the collector went off, or last collected during overlapping pauses


@contextmanager
def gc_paused() -> Iterator[None]:
    """Within this block (or a function it decorates), no cyclic garbage collection; reference counting goes on."""
    global _pauses, _was_enabled, _off_since
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            _off_since = time.monotonic()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0:
                if _was_enabled:
                    gc.enable()
            elif _was_enabled and time.monotonic() - _off_since > MAX_PAUSE_SECONDS:
                gc.collect()
                _off_since = time.monotonic()
