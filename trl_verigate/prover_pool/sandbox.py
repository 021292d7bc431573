"""The bubblewrap sandbox every prover process runs in (`ProverPoolConfig.sandbox`).

What the process sees inside, and why (the Lean REPL's case; a Coq worker sees the same with its own toolchain):

- its own namespaces of every kind bubblewrap supports (`--unshare-all`): a PID namespace with a
  fresh `/proc`, so other workers, the server and their `/proc/<pid>/fd` and `/proc/<pid>/environ`
  do not exist there; a network namespace with only its own loopback, so no connection leaves it;
  IPC, UTS and cgroup namespaces; a user namespace in which no further user namespace may be made
  (`--disable-userns`), with every capability dropped (`--cap-drop ALL`);
- read-only: `/usr` and the merged-usr links or directories `/bin`, `/sbin`, `/lib*` (the dynamic
  loader and system libraries any program needs); from `/etc` only the loader cache and config,
  `alternatives` (targets of `/usr/bin` links), `localtime`, `passwd` and `group` (name lookups of
  tools such as git; no secrets, `shadow` is not there); the Lean toolchain (`ELAN_HOME`, else
  `~/.elan`); absolute paths named by the inherited toolchain variables (`LEAN*`/`LAKE*`/`ELAN*`, `COQ*`); every
  argument of the worker's command that is an existing absolute path (and its program as found on
  `PATH`), with its target when it is a link, and for a program in a `bin/` directory the
  installation above it, where its libraries live (a Python's standard library, a build's `lib/`);
  the Lean project directory, with its `.lake` build and `.olean` files;
- writable: exactly one directory, the private scratch HOME/TMPDIR the process module creates and
  deletes; the rest of the sandbox's own root, `/dev` (a minimal device set: null, zero, random,
  urandom, tty, pts) and everything above are read-only (`--remount-ro`);
- the environment: cleared (`--clearenv`), then only the variables the process module passes
  (PATH, locale, TZ, LEAN*/LAKE*/ELAN*, HOME and TMPDIR);
- its lifetime: `--die-with-parent` (bubblewrap's parent is the launcher, which carries RLIMIT_AS and a
  parent-death signal), `--new-session` (no terminal to inject input into). When bubblewrap dies,
  the namespace's first process dies and the kernel kills every process left in the PID namespace,
  so no child of the REPL outlives its worker, even one in another session.

What it does not stop: code running inside the REPL still owns the REPL's own stdout, so it can
write a forged answer to its own request (see `lean_server.repl.process` for the framing checks and the recheck tier
for the only defence against a forgery that passes them); it can read anything in the read-only
binds (the project, the toolchain); a UNIX socket or FIFO inside a bound directory can still be
opened for writing, so the project directory must not hold one that leads anywhere sensitive;
the memory limit is RLIMIT_AS per process, not a cgroup.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence

logger = logging.getLogger(__name__)

INSTALL_HINT = "install bubblewrap (`apt-get install bubblewrap`) or set sandbox='none'"
SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
)
PROBE_TIMEOUT_S = 10.0
# After the binds: the sandbox's own root (where bubblewrap made the mount points) and /dev become read-only.
READ_ONLY_REST = ("--remount-ro", "/", "--remount-ro", "/dev")

# bubblewrap path -> None when `bwrap ... true` works, else why not; probed once per process.
_probe_results: dict[str, str | None] = {}
_fallback_logged = False


class SandboxUnavailable(Exception):
    """sandbox="bwrap" was asked for and bubblewrap cannot run here; the message names the fix."""


def namespace_flags() -> list[str]:
    """Isolation and lifetime flags, the same for the probe and for every REPL."""
    return [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]


def system_binds() -> list[str]:
    """Read-only system directories and `/etc` files a dynamically linked program needs, a fresh /proc and /dev."""
    args = ["--ro-bind", "/usr", "/usr"]
    for directory in SYSTEM_DIRS:
        if os.path.islink(directory):
            args += ["--symlink", os.readlink(directory), directory]
        elif os.path.isdir(directory):
            args += ["--ro-bind", directory, directory]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    return args + ["--proc", "/proc", "--dev", "/dev"]


def _with_install_prefix(path: str) -> list[str]:
    # A program in `.../bin/` finds its libraries relative to the directory above (a Python's stdlib, Lean's lib/).
    parent = os.path.dirname(path)
    if os.path.isfile(path) and os.path.basename(parent) == "bin":
        return [path, os.path.dirname(parent)]
    return [path]


def read_only_paths(
    command: Sequence[str],
    program: str,
    project_dir: str,
    env: Mapping[str, str],
    env_path_prefixes: tuple[str, ...] = ("LEAN", "LAKE", "ELAN"),
) -> list[str]:
    """The host paths bound read-only for this process: toolchain, project, the command's paths; outermost only.

    `program` is `command[0]` as found on PATH; `env_path_prefixes`: the toolchain variables whose absolute
    paths are bound.
    """
    candidates: list[str] = [project_dir]
    elan_home = env.get("ELAN_HOME")
    if elan_home:
        candidates.append(elan_home)
    for name, value in env.items():
        if name.startswith(env_path_prefixes):
            candidates += [part for part in value.split(os.pathsep) if os.path.isabs(part)]
    for argument in [program, *command[1:]]:
        if not os.path.isabs(argument):
            continue
        candidates += _with_install_prefix(argument)
        real = os.path.realpath(argument)
        if real != argument:
            candidates += _with_install_prefix(real)
    system = ("/usr", *SYSTEM_DIRS)
    existing = {
        os.path.normpath(path)
        for path in candidates
        # Under the system binds already: binding /usr again for a /usr/bin/python3 would add nothing.
        if os.path.exists(path) and not any(os.path.normpath(path).startswith(d + os.sep) or path == d for d in system)
    }
    chosen: list[str] = []
    # Parents first; a path inside an already bound directory is visible through it.
    for path in sorted(existing, key=lambda p: (p.count(os.sep), p)):
        if not any(path == kept or path.startswith(kept.rstrip(os.sep) + os.sep) for kept in chosen):
            chosen.append(path)
    return chosen


def bwrap_argv(
    bwrap: str,
    worker_argv: Sequence[str],
    *,
    read_only: Iterable[str],
    writable: str,
    cwd: str,
    env: Mapping[str, str],
) -> list[str]:
    """The bubblewrap command line that runs `worker_argv` with `cwd` as working directory (see the module docstring)."""
    argv = [bwrap, *namespace_flags()]
    for name, value in sorted(env.items()):
        argv += ["--setenv", name, value]
    argv += system_binds()
    for path in read_only:
        argv += ["--ro-bind", path, path]
    # Last, so it is writable even inside a read-only bind; then everything else is made read-only.
    argv += ["--bind", writable, writable, *READ_ONLY_REST, "--chdir", cwd, "--"]
    return argv + list(worker_argv)


def probe(bwrap: str) -> str | None:
    """None when bubblewrap can run a program with our flags here, else why not; cached per bubblewrap path."""
    if bwrap not in _probe_results:
        true = shutil.which("true", path="/usr/bin:/bin") or "/usr/bin/true"
        argv = [bwrap, *namespace_flags(), *system_binds(), *READ_ONLY_REST, "--", true]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            _probe_results[bwrap] = f"`{bwrap} ... true` did not run: {error}"
        else:
            stderr = done.stderr.decode("utf-8", errors="replace").strip()
            _probe_results[bwrap] = (
                None if done.returncode == 0 else f"`{bwrap} ... true` exited with {done.returncode}: {stderr}"
            )
    return _probe_results[bwrap]


def choose(mode: str, setting: str = "ProverPoolConfig.sandbox") -> str | None:
    """The bubblewrap executable processes run under for `sandbox=mode`, or None for no sandbox; `setting` names the
    setting in messages.

    "bwrap" raises SandboxUnavailable when it cannot run; "auto" falls back to None and logs it once per process.
    """
    global _fallback_logged
    if mode == "none":
        return None
    bwrap = shutil.which("bwrap")
    problem = "bubblewrap (`bwrap`) is not on PATH" if bwrap is None else probe(bwrap)
    if problem is None:
        return bwrap
    if mode == "bwrap":
        raise SandboxUnavailable(f"{setting}='bwrap' but {problem}: {INSTALL_HINT}")
    if not _fallback_logged:
        _fallback_logged = True
        logger.warning(
            "%s='auto': %s, so the prover processes run without a sandbox (own session, "
            "RLIMIT_AS and scratch HOME only); to sandbox them %s",
            setting,
            problem,
            "install bubblewrap (`apt-get install bubblewrap`)",
        )
    return None
