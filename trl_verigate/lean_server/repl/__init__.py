"""The Lean REPL worker: its JSON protocol and one REPL process with the framing checks on its answers."""

from trl_verigate.lean_server.repl.process import (
    ReplProcess,
    WorkerCrashed,
    WorkerError,
    WorkerStartError,
    WorkerTimeout,
)

__all__ = ["WorkerCrashed", "WorkerError", "ReplProcess", "WorkerStartError", "WorkerTimeout"]
