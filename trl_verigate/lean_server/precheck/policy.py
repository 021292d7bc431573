"""The precheck's lists, read from the data files in `allowlists/`, and the settings that extend them.

Allow-lists, for the open-ended spaces: tactics, conv tactics, options a proof may set (with their bounds) and
attributes a helper declaration may carry. Two closed lists of names that may appear nowhere: the metaprogramming
namespaces and root-level code runners (`meta_names.txt`; a proof may `open` any namespace but these), and the
command keywords (`commands.txt`), since Lean parses a command wherever its parser stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

_DATA = Path(__file__).resolve().parent / "allowlists"
# Native evaluation (compiled code vouches for the proof): tactics and names allowed only with allow_native_decide.
NATIVE_TACTICS = frozenset({"native_decide", "bv_decide", "bv_check"})


def _words(name: str) -> list[str]:
    words: list[str] = []
    for line in (_DATA / name).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        words += line.split()
    return words


def _labelled(name: str) -> dict[str, list[str]]:
    """`label: word word …` lines of a data file, grouped by label."""
    groups: dict[str, list[str]] = {}
    for line in (_DATA / name).read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#") or ":" not in line:
            continue
        label, words = line.split(":", 1)
        groups.setdefault(label.strip(), []).extend(words.split())
    return groups


@dataclass(frozen=True)
class Policy:
    """What a proof may contain. `options` maps an option to its largest value, "bool", or "max_heartbeats" (bounded
    by `max_heartbeats`)."""

    tactics: frozenset[str]
    keywords: frozenset[str]
    conv_tactics: frozenset[str]
    options: dict[str, int | str]
    attributes: frozenset[str]
    meta_namespaces: tuple[tuple[str, ...], ...]
    meta_names: frozenset[str]
    bindable: frozenset[str]
    commands: frozenset[str]
    allow_native_decide: bool
    max_heartbeats: int

    @cached_property
    def unlisted_keywords(self) -> frozenset[str]:
        """Tactic and conv keywords of the toolchain not on the allow-lists: refused wherever they stand (a backstop
        for a place the layout misses where Lean starts a tactic). The rules check `open … in` and
        `set_option … in` themselves, and `trace` is a name too (`Matrix.trace`): as a tactic it is checked where it
        stands."""
        return self.keywords - self.tactics - self.conv_tactics - {"trace", "open", "set_option", "fun", "if"}

    @cached_property
    def meta_roots(self) -> frozenset[str]:
        """The first components of the meta namespaces: a name starting elsewhere names none of them."""
        return frozenset(namespace[0] for namespace in self.meta_namespaces)

    def option_bound(self, name: str) -> int | str | None:
        bound = self.options.get(name)
        return self.max_heartbeats if bound == "config" else bound


@lru_cache(maxsize=32)
def policy(
    allow_native_decide: bool = False,
    max_heartbeats: int = 1_000_000,
    extra_tactics: tuple[str, ...] = (),
) -> Policy:
    """The lists with the settings applied (`LeanServerConfig.allow_native_decide`, `.max_heartbeats`,
    `.extra_tactics`)."""
    tactics = set(_words("tactics.txt")) | set(extra_tactics)
    if allow_native_decide:
        tactics |= NATIVE_TACTICS
    options: dict[str, int | str] = {}
    for line in (_DATA / "options.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, bound = line.split()
            options[name] = bound if bound in ("bool", "config") else int(bound)
    meta = _labelled("meta_names.txt")
    return Policy(
        tactics=frozenset(tactics),
        keywords=frozenset(_words("tactic_keywords.txt")),
        conv_tactics=frozenset(_words("conv_tactics.txt")),
        options=options,
        attributes=frozenset(_words("attributes.txt")),
        meta_namespaces=tuple(tuple(n.split(".")) for n in meta["namespaces"]),
        meta_names=frozenset(meta["names"]),
        bindable=frozenset(meta["bindable"]),
        commands=frozenset(_words("commands.txt")),
        allow_native_decide=allow_native_decide,
        max_heartbeats=max_heartbeats,
    )


def policy_for(config) -> Policy:
    """The policy of a `LeanServerConfig`."""
    return policy(
        config.allow_native_decide,
        config.max_heartbeats,
        tuple(sorted(config.extra_tactics)),
    )
