"""Validation of a prover server's settings (`LeanServerConfig`, `CoqServerConfig`): each check raises one line that
names the setting as `<Owner>.<field>` and says what it takes."""

from __future__ import annotations

import math
import os


def absolute_if_relative_path(program: str) -> str:
    """A bare name ("lake") stays for a PATH lookup; a relative path ("./repl", "bin/repl") becomes absolute from
    the caller's directory, as a shell reads it."""
    program = os.path.expanduser(program)
    if os.sep in program and not os.path.isabs(program):
        return os.path.abspath(program)
    return program


def check_argv(owner: str, name: str, value, example: str) -> list[str]:
    """`value` as a non-empty list of non-empty strings, its program made absolute when it is a relative path."""
    if isinstance(value, str):
        raise ValueError(f"{owner}.{name} must be a list of argv strings, e.g. {value.split()!r}, not one string")
    value = list(value) if isinstance(value, (list, tuple)) else None
    if not value or not all(isinstance(arg, str) and arg for arg in value):
        raise ValueError(f"{owner}.{name} must be a non-empty list of non-empty argv strings, e.g. {example}")
    value[0] = absolute_if_relative_path(value[0])
    return value


def check_choice(owner: str, name: str, value, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{owner}.{name} must be one of {choices}, got {value!r}")


def check_positive_number(owner: str, name: str, value, unit: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{owner}.{name} must be a number ({unit}), got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{owner}.{name} must be a finite number > 0 ({unit}), got {value!r}")


def check_positive_int(owner: str, name: str, value, unit: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}.{name} must be a whole number ({unit}), got {value!r}")
    if value < 1:
        raise ValueError(f"{owner}.{name} must be >= 1 ({unit}), got {value!r}")


def check_fraction(owner: str, name: str, value) -> None:
    check_positive_number(owner, name, value, "a fraction")
    if value > 1:
        raise ValueError(f"{owner}.{name} must be in (0, 1], got {value}")


def check_spare_workers(owner: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"{owner}.spare_workers must be an int >= 0 (replacement workers started ahead of a retirement; "
            f"0 for none), got {value!r}"
        )


def check_project_dir(owner: str, value) -> str | None:
    """`value` as an absolute path, or None."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{owner}.project_dir must be a path (str), got {type(value).__name__}")
    return os.path.abspath(os.path.expanduser(value))


def check_names(owner: str, name: str, value, what: str, example: str) -> tuple[str, ...]:
    """`value` (a list of `what`) as a tuple of strings; one string is refused, since tuple("propext") would be its
    letters."""
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise TypeError(f"{owner}.{name} must be a list of {what}, e.g. {example}, got {value!r}")
    return tuple(value)


def default_workers() -> int:
    return max(1, (os.cpu_count() or 2) - 1)
