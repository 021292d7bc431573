"""The Lean REPL worker: its JSON protocol and one REPL process with the framing checks on its answers."""

from trl_verigate.lean_server.repl.process import ReplCrashed, ReplError, ReplProcess, ReplStartError, ReplTimeout

__all__ = ["ReplCrashed", "ReplError", "ReplProcess", "ReplStartError", "ReplTimeout"]
