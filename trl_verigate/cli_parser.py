"""What every command line of trl-verigate shares: an error is one line naming the flag and where help is, with exit
status 2 (argparse's usage error), and `--help` shows every default."""

from __future__ import annotations

import argparse
import re
import sys

USAGE_ERROR = 2
# A negative number as argparse should read it: with an exponent (`-1e-5`), which its own pattern misses, so
# `--learning_rate -1e-5` would otherwise be "expected one argument".
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def one_line(message: str) -> str:
    """``message`` on one line: its line breaks (a wrapped library message) become spaces."""
    return " ".join(str(message).split())


class OneLineErrors:
    """Mixin for an `argparse.ArgumentParser` (or a subclass such as TRL's parser): `error` prints one line, the
    message and where the full usage is, instead of argparse's usage block (24 lines for `evaluate lean`, hundreds of
    flags for a recipe), and exits with status 2. A value such as ``-1e-5`` after a flag is read as a negative
    number, not as a flag."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER  # argparse's hook for what counts as a negative number

    def error(self, message: str):
        hint = f"`{self.prog} --help` lists every flag"
        self.exit(USAGE_ERROR, f"{self.prog}: error: {one_line(message)} ({hint})\n")


class OneLineErrorParser(OneLineErrors, argparse.ArgumentParser):
    """`argparse.ArgumentParser` with one-line errors; the subparsers it makes are of this class too."""


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds ``(default: ...)`` to every optional flag's help, except required flags and helps that already say their
    default."""

    def _get_help_string(self, action):
        help_text = action.help or ""
        if action.required or "default" in help_text or action.default is argparse.SUPPRESS:
            return help_text
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            return help_text  # a switch: off unless given
        if isinstance(action.default, str) and "\n" in action.default:
            # Help text is re-wrapped, which would hide a template's line breaks: show it quoted, escapes and all.
            return f"{help_text} (default: {action.default!r})".replace("%", "%%")
        return super()._get_help_string(action)


def port_number(value: str) -> int:
    """An argparse ``type`` for a TCP port: a whole number from 0 (a free one the OS picks) to 65535."""
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port; give a whole number from 0 to 65535")
    return port


def exit_with_usage_error(prog: str, message: str) -> None:
    """Print ``prog: error: message`` as one line on stderr and exit with status 2 (before anything has loaded)."""
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr)
    raise SystemExit(USAGE_ERROR)
