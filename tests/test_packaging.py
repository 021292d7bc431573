"""Every data file the package reads at run time is declared in setup.cfg's package_data, so a wheel carries it."""

import configparser
from fnmatch import fnmatch

from tests.launch import REPO_ROOT

PACKAGE = REPO_ROOT / "trl_verigate"


def declared_patterns() -> list[str]:
    parser = configparser.ConfigParser()
    parser.read(REPO_ROOT / "setup.cfg")
    patterns = []
    for package, globs in parser["options.package_data"].items():
        folder = package.replace(".", "/")
        patterns += [f"{folder}/{glob.strip()}" for glob in globs.split() if glob.strip()]
    return patterns


def test_every_data_file_of_the_package_is_in_package_data():
    patterns = declared_patterns()
    data_files = [
        path.relative_to(REPO_ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    ]
    assert data_files, "the package holds data files (allow-lists, the replay checker's Lean program)"
    missing = [name for name in data_files if not any(fnmatch(name, pattern) for pattern in patterns)]
    assert not missing, f"add these to [options.package_data] in setup.cfg: {missing}"
