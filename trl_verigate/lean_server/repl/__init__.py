"""The Lean REPL worker: its JSON protocol and one REPL process with the framing checks on its answers."""
