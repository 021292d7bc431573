"""Every page of the docs site and the README works as written, so the docs cannot drift from the code.

- Python blocks: every import resolves, every call to a trl-verigate name binds to its signature, trainer configs
  are built with the example's arguments, and a block followed by a ```text block runs and prints exactly that text;
- YAML blocks name their recipe on their first line (`# recipes/<name>.py`) and parse with that recipe's parser;
- JSON blocks parse, and an es_state.json example is one `read_state` accepts and the ES functions would write;
- shell lines: `trl-verigate` commands parse with the real CLI, `make` targets exist, recipe launches name files that
  exist and parse (and pass the dtype check) with the recipe's parser, `pip install` extras exist, scripts exist and
  take the flags shown;
- tables: `field | default` rows match the config class their heading names (and name all its own fields),
  `flag | default` rows the CLI, `metric` rows a name the code writes; the API index lists every export;
- inline code: repository paths exist, dotted `trl_verigate.*` names resolve, `make` targets and `trl-verigate`
  subcommands and their flags exist;
- Lean: every example request passes the precheck; the setup guide's curl commands and `LeanClient` blocks run against
  the real HTTP service with the stand-in REPL;
- `mkdocs build --strict` succeeds.
"""

from __future__ import annotations

import ast
import configparser
import contextlib
import dataclasses
import importlib
import inspect
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

import trl_verigate
import trl_verigate.lean_server as lean_server_module
from tests.fake_repl import stand_in_config
from tests.launch import REPO_ROOT, load_recipe, serving
from tests.lean_helpers import prepare
from trl_verigate import cli
from trl_verigate.lean_server.cli import options as cli_options
from trl_verigate.lean_server.core.types import MINIF2F_HEADER, FileRequest, ProofRequest, VerificationResult
from trl_verigate.lean_server.service.client import LeanClient
from trl_verigate.lean_server.service.http import create_app
from trl_verigate.lean_server.service.server import LeanServer

DOCS = REPO_ROOT / "docs"
GUIDE = DOCS / "lean_setup.md"
README = REPO_ROOT / "README.md"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
FENCE = re.compile(r"^( *)```(\w*)[^\n]*\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")
# "<full Lean file>" and the like stand for text the reader supplies.
PLACEHOLDER = re.compile(r"^<[^<>]*>$")
# Programs the docs run that are not this project's: installers, shell built-ins, Lean's tools.
EXTERNAL_PROGRAMS = {
    "apt-get",
    "cat",
    "cd",
    "cp",
    "curl",
    "elan",
    "export",
    "git",
    "lake",
    "ls",
    "mkdir",
    "sh",
    "source",
    "true",
}
# The stand-in answers the doc's false theorem as Lean does: `decide` (line 2 of the command) fails.
FALSE_THEOREM_ANSWER = {
    "match": "theorem u : (2 : Nat) + 2 = 5",
    "response": {
        "messages": [
            {
                "severity": "error",
                "pos": {"line": 2, "column": 2},
                "endPos": {"line": 2, "column": 8},
                "data": "decide failed to prove the proposition\n  2 + 2 = 5\nsince it reduces to False",
            }
        ],
        "env": 0,
    },
}


def relative(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def blocks(path: Path) -> list[tuple[str, str, int]]:
    """(language, body, line) of every fenced block, indented ones dedented."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        indent = len(match.group(1))
        body = "".join(line[indent:] for line in match.group(3).splitlines(keepends=True))
        found.append((match.group(2), body, text.count("\n", 0, match.start()) + 1))
    return found


def code_blocks(path: Path, language: str) -> list[str]:
    return [body for lang, body, _ in blocks(path) if lang == language]


def prose(path: Path) -> str:
    """The text outside fenced blocks, where the inline `code` spans are."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def all_blocks(language: str) -> list[tuple[Path, str, int]]:
    return [(page, body, line) for page in PAGES for lang, body, line in blocks(page) if lang == language]


def block_id(item) -> str:
    return f"{relative(item[0])}:{item[2]}"


# ---------------------------------------------------------------- Python blocks


def imported_names(tree: ast.AST, where: str) -> dict[str, object]:
    """{name: object} of the block's imports, failing on any that does not resolve."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name] = importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{where}: `from {node.module} import {alias.name}` fails"
                names[alias.asname or alias.name] = getattr(module, alias.name)
    return names


def called_object(func: ast.expr, names: dict):
    """The object a call's `func` names, when it is an imported name or an attribute chain off one."""
    if isinstance(func, ast.Name):
        return names.get(func.id)
    if isinstance(func, ast.Attribute):
        owner = called_object(func.value, names)
        return getattr(owner, func.attr, None) if owner is not None else None
    return None


def is_ours(obj) -> bool:
    return getattr(obj, "__module__", "").startswith("trl_verigate")


def literal_or_missing(node: ast.expr):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return dataclasses.MISSING


def check_python_block(source: str, where: str, tmp_path: Path) -> int:
    """Static checks of one block; returns how many trl-verigate calls were bound."""
    from trl import GRPOConfig

    tree = ast.parse(source, filename=where)
    names = imported_names(tree, where)
    bound = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = called_object(node.func, names)
        if target is None or not is_ours(target) or not callable(target):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        try:
            inspect.signature(target).bind(*node.args, **{k.arg: k.value for k in node.keywords})
        except TypeError as error:
            pytest.fail(f"{where}: `{ast.unparse(node)[:100]}` does not match the signature of {target}: {error}")
        bound += 1
        if inspect.isclass(target) and issubclass(target, GRPOConfig) and not node.args:
            kwargs = {k.arg: literal_or_missing(k.value) for k in node.keywords}
            if dataclasses.MISSING not in kwargs.values():
                kwargs.update(output_dir=str(tmp_path / "out"), use_cpu=True)
                target(**kwargs)  # the example's values pass the config's own checks
    return bound


@pytest.mark.parametrize("item", all_blocks("python"), ids=block_id)
def test_python_blocks_import_and_call_what_exists(item, tmp_path):
    page, body, line = item
    check_python_block(body, f"{relative(page)}:{line}", tmp_path)


def runnable_blocks() -> list:
    """Python blocks followed by a ```text block: the output they print."""
    found = []
    for page in PAGES:
        page_blocks = blocks(page)
        for (lang, body, line), following in zip(page_blocks, page_blocks[1:], strict=False):
            text = page.read_text(encoding="utf-8")
            between = "\n".join(text.splitlines()[line + body.count("\n") + 1 : following[2] - 1])
            if lang == "python" and following[0] == "text" and not between.strip():
                slow = "CoqServer" in body
                marks = [pytest.mark.slow] if slow else []
                found.append(pytest.param(page, body, following[1], line, marks=marks, id=f"{relative(page)}:{line}"))
    return found


@pytest.mark.parametrize("page,body,expected,line", runnable_blocks())
def test_blocks_with_output_print_it(page, body, expected, line, tmp_path, monkeypatch):
    if "CoqServer" in body and not (shutil.which("coqidetop.opt") or shutil.which("coqidetop")):
        pytest.skip("Coq is not installed (apt-get install coq)")
    monkeypatch.chdir(tmp_path)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(body, f"{relative(page)}:{line}", "exec"), {"__name__": "__docs__"})
    assert output.getvalue().rstrip("\n").splitlines() == expected.rstrip("\n").splitlines()


def test_the_pages_with_runnable_examples_have_them():
    # Counted by hand, so an extraction that silently finds nothing fails here.
    counted = {}
    for param in runnable_blocks():
        counted[param.values[0]] = counted.get(param.values[0], 0) + 1
    expected = {
        README: 1,
        DOCS / "getting_started" / "quickstart.md": 1,
        DOCS / "trainers" / "verigate.md": 1,
        DOCS / "trainers" / "process_verified.md": 1,
        DOCS / "trainers" / "es.md": 1,
        DOCS / "trainers" / "rewards.md": 2,
        DOCS / "provers" / "coq.md": 1,
        DOCS / "evaluate.md": 1,
    }
    assert {page: counted.get(page, 0) for page in expected} == expected


FRAGMENT = re.compile(r"^# Fragment: needs (.+?)(?=\n[^#])", re.DOTALL)


def free_names(source: str) -> set[str]:
    """The names a block reads but neither imports, assigns nor gets from Python's builtins: what the reader must
    supply for it to run."""
    import builtins

    tree = ast.parse(source)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return read - bound


def test_free_names_are_what_the_reader_must_supply():
    block = "from x import f\nimport a.b\nfor i in range(3):\n    y = f(i, dataset, a)\nprint(lambda z: z + w)"
    assert free_names(block) == {"dataset", "w"}


RUNS_AS_WRITTEN = "# Runs as written"


def blocks_that_run_as_written() -> list:
    """Python blocks that say they run as written (they print nothing to compare): the test runs them."""
    return [
        pytest.param(page, body, line, marks=[pytest.mark.slow], id=f"{relative(page)}:{line}")
        for page in PAGES
        for language, body, line in blocks(page)
        if language == "python" and body.startswith(RUNS_AS_WRITTEN)
    ]


@pytest.mark.parametrize("page,body,line", blocks_that_run_as_written())
def test_blocks_that_say_they_run_as_written_do(page, body, line, tiny_models, tmp_path, monkeypatch):
    # Run where the reader would, with the tiny models where `make tiny` puts them.
    (tmp_path / ".tiny").symlink_to(Path(tiny_models["policy"]).parent)
    monkeypatch.chdir(tmp_path)
    exec(compile(body, f"{relative(page)}:{line}", "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize("page", [README, DOCS / "getting_started" / "quickstart.md"], ids=relative)
def test_every_readme_and_quickstart_snippet_runs_or_names_what_it_needs(page):
    runnable = {param.values[3] for param in runnable_blocks() if param.values[0] == page}
    runnable |= {param.values[2] for param in blocks_that_run_as_written() if param.values[0] == page}
    fragments = 0
    for language, body, line in blocks(page):
        if language != "python" or line in runnable:
            continue  # runnable ones are run by test_blocks_with_output_print_it
        marked = FRAGMENT.match(body)
        assert marked, f"{relative(page)}:{line}: runs nowhere and is not marked `# Fragment: needs ...`"
        needs = marked.group(1)
        missing = sorted(name for name in free_names(body) if f"`{name}`" not in needs)
        assert not missing, f"{relative(page)}:{line}: uses {missing} but its fragment line does not name them"
        fragments += 1
    assert runnable and fragments, "every block of the page was skipped: the extraction found nothing"


# ---------------------------------------------------------------- YAML and JSON blocks


@pytest.mark.parametrize("item", all_blocks("yaml"), ids=block_id)
def test_yaml_blocks_parse_with_their_recipes_parser(item, tmp_path, monkeypatch):
    page, body, line = item
    first = body.splitlines()[0]
    match = re.fullmatch(r"# recipes/(\w+)\.py", first.strip())
    assert match, f"{relative(page)}:{line}: a YAML block starts with `# recipes/<recipe>.py`, the recipe it is for"
    monkeypatch.chdir(REPO_ROOT)  # paths in the examples are relative to the repository
    config = tmp_path / "example.yaml"
    config.write_text(body, encoding="utf-8")
    parsed = load_recipe(match.group(1)).parse_args(
        ["--config", str(config), "--output_dir", str(tmp_path / "out"), "--use_cpu", "true"]
    )
    for key, value in yaml.safe_load(body).items():
        assert any(getattr(group, key, None) == value for group in parsed), (key, value)


def test_every_recipe_yaml_example_was_found():
    assert len(all_blocks("yaml")) >= 5  # counted by hand: evaluate, verigate, process_verified (2), es


@pytest.mark.parametrize("item", all_blocks("json"), ids=block_id)
def test_json_blocks_parse_and_es_states_are_what_es_writes(item, tmp_path):
    from trl_verigate.es import population_seeds, shape_fitness
    from trl_verigate.es.state import STATE_FORMAT, read_state

    value = json.loads(item[1])
    if isinstance(value, dict) and value.get("format") == STATE_FORMAT:
        path = tmp_path / "es_state.json"
        path.write_text(item[1], encoding="utf-8")
        state = read_state(str(path))
        for entry in state["history"]:
            members = population_seeds(state["seed"], entry["iteration"], state["population_size"], state["antithetic"])
            assert [list(m) for m in members] == [list(m) for m in zip(entry["seeds"], entry["signs"], strict=True)]
            fitness = shape_fitness(entry["rewards"], state["fitness_shaping"]).tolist()
            assert fitness == pytest.approx(entry["fitness"], abs=1e-6)


# ---------------------------------------------------------------- shell lines


def shell_lines(path: Path) -> list[str]:
    """The logical lines of the sh blocks: `\\`-continuations joined, and a quoted string that spans lines kept whole."""
    lines = []
    for block in code_blocks(path, "sh"):
        pending = ""
        for line in block.replace("\\\n", " ").splitlines():
            pending = f"{pending}\n{line}" if pending else line
            try:
                shlex.split(pending, comments=True)
            except ValueError:  # "No closing quotation": the string goes on on the next line
                continue
            lines.append(pending)
            pending = ""
        assert not pending, f"{relative(path)}: unterminated quote in `{pending[:60]}`"
    return lines


def commands_of(line: str) -> list[list[str]]:
    """The simple commands of a shell line: words split at `&&`, `;`, `|`, leading `VAR=value` words dropped."""
    words = shlex.split(line, comments=True)
    commands, current = [], []
    for word in [*words, ";"]:
        if word in ("&&", "||", ";", "|"):
            while current and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", current[0]):
                current = current[1:]
            if current:
                commands.append(current)
            current = []
        else:
            current.append(word)
    return commands


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (REPO_ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE))


def setup_extras() -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(REPO_ROOT / "setup.cfg")
    return set(parser["options.extras_require"])


def check_trl_verigate(argv: list[str], where: str) -> None:
    try:
        cli.build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{where}: `trl-verigate {shlex.join(argv)}` does not parse")


def check_accelerate_launch(argv: list[str], where: str, tmp_path: Path, monkeypatch) -> None:
    check_policy_dtype = load_recipe("recipe_tools").check_policy_dtype

    config_file = argv[argv.index("--config_file") + 1]
    assert (REPO_ROOT / config_file).is_file(), f"{where}: {config_file} does not exist"
    script = next(word for word in argv if word.endswith(".py"))
    assert (REPO_ROOT / script).is_file(), f"{where}: {script} does not exist"
    recipe_args = argv[argv.index(script) + 1 :]
    config = recipe_args[recipe_args.index("--config") + 1]
    assert (REPO_ROOT / config).is_file(), f"{where}: {config} does not exist"
    # This machine has no GPU: GPU-only settings are overridden, everything else comes from the line.
    overrides = ["--output_dir", str(tmp_path / "out"), "--use_cpu", "true", "--bf16", "false", "--use_vllm", "false"]
    # What `accelerate launch --config_file` tells the process it starts.
    deepspeed = yaml.safe_load((REPO_ROOT / config_file).read_text())["distributed_type"] == "DEEPSPEED"
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true" if deepspeed else "false")
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "false")
    recipe = load_recipe(Path(script).stem)
    parsed = recipe.parse_args([*recipe_args, *overrides])
    if "check_policy_dtype" in Path(recipe.__file__).read_text(encoding="utf-8"):
        training_args, model_args = parsed[1], parsed[2]
        check_policy_dtype(training_args, model_args)  # what the recipe refuses before loading, under this launch


def check_command(words: list[str], where: str, tmp_path: Path, monkeypatch) -> None:
    program, argv = words[0], words[1:]
    if program == "trl-verigate":
        check_trl_verigate(argv, where)
    elif program == "make":
        for target in argv:
            assert "=" in target or target.startswith("-") or target in makefile_targets(), f"{where}: no {target}"
    elif program == "accelerate":
        check_accelerate_launch(argv, where, tmp_path, monkeypatch)
    elif program in ("python", "python3"):
        if argv[0] == "-m":
            assert importlib.util.find_spec(argv[1]) is not None, f"{where}: no module {argv[1]}"
        else:
            script = (REPO_ROOT / argv[0]).read_text(encoding="utf-8")
            for flag in (word for word in argv[1:] if word.startswith("--")):
                assert f'"{flag}"' in script, f"{where}: {argv[0]} takes no {flag}"
    elif program == "pytest":
        for path in (word for word in argv if not word.startswith("-")):
            assert (REPO_ROOT / path.split("::")[0]).exists(), f"{where}: no {path}"
    elif program == "pip":
        for word in argv[1:]:
            extras = re.fullmatch(r"-?e?\.?\[([\w,]+)\]|\.\[([\w,]+)\]", word)
            if extras:
                assert set((extras.group(1) or extras.group(2)).split(",")) <= setup_extras(), where
            if word.startswith("torch=="):
                assert word.removeprefix("torch==").startswith("2.13"), f"{where}: setup.cfg pins torch 2.13"
    else:
        assert program in EXTERNAL_PROGRAMS, f"{where}: `{program}` is neither this project's nor a known tool"


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_every_shell_command_exists_and_parses(page, tmp_path, monkeypatch):
    for line in shell_lines(page):
        for words in commands_of(line):
            check_command(words, f"{relative(page)}: `{line.strip()[:80]}`", tmp_path, monkeypatch)


# ---------------------------------------------------------------- tables


def tables(path: Path) -> list[tuple[str, list[list[str]]]]:
    """(the heading above it, rows as cell lists) of every table, header row first."""
    found, heading, rows = [], "", []
    for line in [*prose(path).splitlines(), ""]:
        if line.startswith("#"):
            heading = line
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif rows:
            found.append((heading, rows))
            rows = []
    return found


def tables_of_kind(path: Path, kind: str) -> list[tuple[str, list[list[str]]]]:
    """(heading, body rows) of the tables whose first header cell is `kind` ("field", "flag", "metric")."""
    return [(heading, rows[1:]) for heading, rows in tables(path) if rows[0][0] == kind]


def documented_owners() -> dict[str, type]:
    """Classes a `field` table may document: the package's configs and the recipes' argument classes."""
    from trl_verigate.coq import CoqServerConfig

    owners = {name: getattr(trl_verigate, name) for name in trl_verigate.__all__}
    owners["CoqServerConfig"] = CoqServerConfig
    for recipe in ("verigate_math", "lean_process_grpo", "coq_process_grpo", "es"):
        module = load_recipe(recipe)
        owners.update({name: obj for name, obj in vars(module).items() if dataclasses.is_dataclass(obj)})
    return owners


def default_matches(cell: str, field: dataclasses.Field, module) -> bool:
    spans = INLINE.findall(cell)
    if not spans:
        return True  # described in words, not compared
    text = spans[0]
    default = field.default_factory() if field.default is dataclasses.MISSING else field.default
    try:
        return ast.literal_eval(text) == default
    except (ValueError, SyntaxError):
        pass
    if hasattr(module, text):
        return getattr(module, text) == default
    return field.default is dataclasses.MISSING or text == default


def own_fields(owner: type) -> set[str]:
    """The fields a class declares itself, the deprecated ones left out."""
    annotations = vars(owner).get("__annotations__", {})
    fields = {f.name: f for f in dataclasses.fields(owner)}
    return {name for name in annotations if not fields[name].metadata.get("help", "").startswith("Deprecated")}


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_field_tables_match_their_classes(page):
    owners = documented_owners()
    for heading, rows in tables_of_kind(page, "field"):
        owner_name = INLINE.findall(heading)[-1]
        owner = owners[owner_name]
        fields = {f.name: f for f in dataclasses.fields(owner)}
        module = sys.modules[owner.__module__]
        documented = set()
        for row in rows:
            for name in INLINE.findall(row[0]):
                assert name in fields, f"{relative(page)}: {owner_name} has no field {name}"
                assert default_matches(row[1], fields[name], module), f"{relative(page)}: {owner_name}.{name} {row[1]}"
                documented.add(name)
        missing = own_fields(owner) - documented
        assert not missing, f"{relative(page)}: the {owner_name} table lacks {sorted(missing)}"


def cli_flag_defaults() -> dict[str, set[str]]:
    """Every flag of every trl-verigate subcommand (nested ones included) -> the defaults it has, as text."""
    defaults: dict[str, set[str]] = {}

    def walk(parser):
        for action in parser._actions:
            if isinstance(action.choices, dict):
                for sub in action.choices.values():
                    walk(sub)
            for flag in action.option_strings:
                defaults.setdefault(flag, set()).add(str(action.default))

    walk(cli.build_parser())
    return defaults


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_flag_tables_match_the_cli(page):
    defaults = cli_flag_defaults()
    for _, rows in tables_of_kind(page, "flag"):
        for row in rows:
            spans = INLINE.findall(row[1])
            for flag in INLINE.findall(row[0]):
                assert flag in defaults, f"{relative(page)}: no trl-verigate command has {flag}"
                if spans:
                    assert spans[0] in defaults[flag], f"{relative(page)}: {flag} defaults to {defaults[flag]}"


def written_name_patterns() -> list[re.Pattern]:
    """Every string the package's source writes, f-string fields as wildcards."""
    patterns = set()
    for path in (REPO_ROOT / "trl_verigate").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "/" in node.value:
                patterns.add(re.escape(node.value))
            elif isinstance(node, ast.JoinedStr):
                literal_text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                if not re.search(r"[a-z_]{3}", literal_text):
                    continue  # f"{prefix}/{name}" would match any name
                parts = [re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in node.values]
                patterns.add("".join(parts))
    return [re.compile(pattern) for pattern in patterns]


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_every_documented_metric_is_written_by_the_code(page):
    patterns = written_name_patterns()
    for _, rows in tables_of_kind(page, "metric"):
        for row in rows:
            for name in INLINE.findall(row[0]):
                concrete = re.sub(r"<[^>]+>", "passed", name)
                assert any(p.fullmatch(concrete) for p in patterns), f"{relative(page)}: nothing logs {name}"


def test_the_api_index_lists_every_export():
    rows = next(rows for heading, rows in tables(DOCS / "api" / "index.md") if "exports" in heading)
    listed = {INLINE.findall(row[0])[0]: INLINE.findall(row[1])[0] for row in rows[1:]}
    assert listed == trl_verigate._EXPORTS


# ---------------------------------------------------------------- inline code


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_inline_paths_names_targets_and_subcommands_exist(page):
    text = page.read_text(encoding="utf-8")
    spans = INLINE.findall(prose(page))
    where = relative(page)
    for span in spans:
        if re.fullmatch(r"(recipes|tests|bench|scripts|docs|trl_verigate|experiments)/[\w./-]+", span):
            assert (REPO_ROOT / span).exists(), f"{where}: `{span}` does not exist"
    for reference in set(re.findall(r"\btrl_verigate(?:\.\w+)+", text)):
        parts = reference.split(".")
        for cut in range(len(parts), 0, -1):
            with contextlib.suppress(ModuleNotFoundError):
                target = importlib.import_module(".".join(parts[:cut]))
                break
        for attribute in parts[cut:]:
            assert hasattr(target, attribute), f"{where} names {reference}, which does not exist"
            target = getattr(target, attribute)
    for span in spans:
        for target in re.findall(r"^make (?:-\w+ )*([\w-]+)", span):
            assert target in makefile_targets(), f"{where}: no `make {target}`"
    subcommands = next(a for a in cli.build_parser()._actions if a.dest == "command").choices
    for span in spans:
        if span.startswith("trl-verigate "):
            words = shlex.split(span)
            assert words[1] in subcommands, f"{where}: no subcommand `{span}`"
            known = cli_flag_defaults()
            for flag in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
                assert flag in known, f"{where}: `{span}` names {flag}, which no command has"


# ---------------------------------------------------------------- Lean requests


def curl_commands(path: Path) -> list[tuple[str, dict]]:
    """(URL path, parsed JSON body) of every `curl ... -d '...'` posting JSON; multi-line bodies included."""
    commands = []
    for block in code_blocks(path, "sh"):
        # A single-quoted -d body may span lines; shlex reads it whole from the block's text.
        words = shlex.split(block.replace("\\\n", " "), comments=True)
        for k, word in enumerate(words):
            if word == "curl" and "-d" in words[k:]:
                data_at = words.index("-d", k)
                url = next(w for w in words[k:data_at] if "localhost" in w)
                commands.append(("/" + url.split("/", 1)[1], json.loads(words[data_at + 1])))
    return commands


def as_requests(item) -> list:
    """The requests an example JSON value holds (a whole body, or one native request), placeholders left out."""
    if isinstance(item, dict) and {"requests", "snippets", "codes"} & item.keys():
        found = []
        for request in item.get("requests") or []:
            found += as_requests(request)
        found += [s["code"] for s in item.get("snippets") or [] if not PLACEHOLDER.match(s["code"])]
        found += [c["proof"] for c in item.get("codes") or [] if not PLACEHOLDER.match(c["proof"])]
        return found
    texts = [item] if isinstance(item, str) else [v for v in item.values() if isinstance(v, str)]
    if any(PLACEHOLDER.match(text) for text in texts):
        return []
    if isinstance(item, str):
        return [item]
    if "file" in item:
        return [FileRequest(**item)]
    return [ProofRequest(**item)]


def inline_json_requests(path: Path) -> list:
    found = []
    for span in INLINE.findall(prose(path)):
        # `{"id": "a", "code": ...}`-style fragments inside a body are read with their body.
        if not span.startswith("{") or not re.search(r'"(requests|snippets|codes|statement|file)"', span):
            continue
        try:
            value = json.loads(span)
        except json.JSONDecodeError:
            continue  # shapes such as `{"detail": "...", ...}` describe fields, not requests
        found += as_requests(value)
    return found


def python_requests(path: Path) -> list:
    """Every ProofRequest(...) / FileRequest(...) call with literal arguments in the Python blocks."""
    kinds = {"ProofRequest": ProofRequest, "FileRequest": FileRequest}
    found = []
    for block in code_blocks(path, "python"):
        assignments = {}
        for node in ast.walk(ast.parse(block)):
            # `completion = "..."` then `FileRequest(file=completion, ...)`: literal names are resolved.
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                assignments.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in kinds:
                args = [literal(a, assignments) for a in node.args]
                kwargs = {k.arg: literal(k.value, assignments) for k in node.keywords}
                found.append(kinds[node.func.id](*args, **kwargs))
    return found


def literal(node: ast.expr, assignments: dict):
    return assignments[node.id] if isinstance(node, ast.Name) else ast.literal_eval(node)


def assert_accepted(request, where: str) -> None:
    prepared = prepare(request, MINIF2F_HEADER)
    assert not isinstance(prepared, VerificationResult), f"{where}: {request!r} is {prepared.status}: {prepared.reason}"


def test_every_example_request_of_the_guide_passes_the_precheck():
    inline = inline_json_requests(GUIDE)
    curl = [r for _, body in curl_commands(GUIDE) for r in as_requests(body)]
    python = python_requests(GUIDE)
    # Counted by hand in the guide, so an extraction that silently finds nothing fails here.
    assert (len(inline), len(curl), len(python)) == (1, 3, 3)
    assert {type(r) for r in inline + curl + python} == {ProofRequest, FileRequest, str}
    for where, requests in (("inline JSON", inline), ("curl body", curl), ("Python block", python)):
        for request in requests:
            assert_accepted(request, f"docs/lean_setup.md {where}")


def test_every_lean_example_request_of_every_page_passes_the_precheck():
    counted = 0
    for page in PAGES:
        requests = python_requests(page) + [r for _, body in curl_commands(page) for r in as_requests(body)]
        requests += inline_json_requests(page)
        for request in requests:
            assert_accepted(request, relative(page))
        counted += len(requests)
    assert len(python_requests(README)) == 1
    assert counted >= 11  # counted by hand: the guide 7, README 1, quick start 1, lean_server 2


def test_an_unindented_body_like_the_old_examples_is_rejected():
    # The wrong form, which the guide shows only to say why it fails.
    old = ProofRequest("theorem t (a b : Nat) : a + b = b + a := by", "omega")
    rejected = prepare(old, MINIF2F_HEADER)
    assert isinstance(rejected, VerificationResult) and rejected.status == "rejected"
    assert '"proof": "omega"' in GUIDE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def guide_server(tmp_path_factory):
    config = stand_in_config(
        tmp_path_factory.mktemp("docs"), script=[FALSE_THEOREM_ANSWER], header=MINIF2F_HEADER, workers=2
    )
    with LeanServer(config) as server, serving(create_app(server)) as url:
        yield url


@pytest.mark.slow
def test_the_guides_curl_commands_pass_through_the_http_service(guide_server):
    commands = curl_commands(GUIDE)
    assert [path for path, _ in commands] == ["/check", "/check", "/api/check"]
    for path, body in commands:
        response = httpx.post(guide_server + path, json=body, timeout=60)
        assert response.status_code == 200, (path, response.text)
        for result in response.json()["results"]:
            assert result["status"] == "passed", (path, body, result)


@pytest.mark.slow
def test_the_guides_lean_client_blocks_run_as_written(guide_server, monkeypatch):
    class LocalClient(LeanClient):
        def __init__(self, urls, **kwargs):
            super().__init__([guide_server], **kwargs)

    monkeypatch.setattr(lean_server_module, "LeanClient", LocalClient, raising=False)
    blocks_with_client = [block for block in code_blocks(GUIDE, "python") if "LeanClient(" in block]
    assert len(blocks_with_client) == 2
    printed = []
    for block in blocks_with_client:
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(compile(block, str(GUIDE), "exec"), {})
        printed.append(output.getvalue().splitlines())
    [good, false_theorem], [file_result] = printed
    assert good == "passed True 1 []"
    # `decide` is the only tactic and fails on the false statement: tactic 0.
    assert false_theorem.startswith("failed False 0 ['decide failed to prove the proposition")
    assert file_result == "passed None"


def documented_flags() -> set[str]:
    flags = set()
    for line in shell_lines(GUIDE):
        if line.lstrip().startswith("trl-verigate"):
            flags |= set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line))  # comments too: they name flags
    for span in INLINE.findall(prose(GUIDE)):
        flags |= set(re.findall(r"^--[a-z][a-z-]*", span))
    return flags


def test_every_flag_the_guide_names_exists():
    flags = documented_flags()
    assert {"--max-batch-bytes", "--max-request-bytes", "--sandbox", "--recheck-command", "--backend"} <= flags
    assert flags - set(cli_flag_defaults()) == set(), "flags the guide names that no trl-verigate command has"


def test_the_guides_variables_and_default_header_are_the_codes():
    text = GUIDE.read_text(encoding="utf-8")
    assert set(re.findall(r"TRL_VERIGATE_[A-Z_]+", text)) == {cli_options.REPL_ENV, cli_options.PROJECT_ENV}
    assert code_blocks(GUIDE, "lean") == [MINIF2F_HEADER + "\n"]


# ---------------------------------------------------------------- the site


def test_the_readme_is_a_landing_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert text.splitlines()[3:5] == [
        "make demo   # trains a tiny warm-started offline policy a few VeriGate steps on CPU, then summarizes the run",
        "make test   # the whole test suite (installs into .venv first)",
    ]
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (REPO_ROOT / link).is_file(), f"README links to {link}, which does not exist"


@pytest.mark.slow
def test_mkdocs_builds_the_site_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "trainers" / "index.html").is_file()
