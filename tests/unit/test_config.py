"""nl2sql.yaml and evals.yaml: strict models, ${env:VAR} substitution, errors that say where."""

from __future__ import annotations

from pathlib import Path

import pytest

from nl2sql_assets.config import ConfigError, DatasourceAccess, load_config, substitute_env
from nl2sql_assets.project import load_project_config

BASE = """\
datasources:
  - id: shop
    engine: sqlite
    path: data/shop.sqlite
policies:
  default_role: analyst
  roles:
    analyst:
      datasources:
        shop: {allow: ["*"], deny: [Salary, Customer.Email]}
evals: {file: evals.yaml}
"""
EVALS = "suites: [suites/one.yaml]\nmax_cost_usd: 2.5\ngate: {max_regressions: 1}\n"


def _project(tmp_path: Path, text: str = BASE, evals: str = EVALS) -> Path:
    (tmp_path / "nl2sql.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "evals.yaml").write_text(evals, encoding="utf-8")
    return tmp_path / "nl2sql.yaml"


def test_paths_resolve_against_the_config_folder_and_evals_file_is_loaded(tmp_path: Path):
    config = load_config(_project(tmp_path))
    assert config.datasource("shop").path == tmp_path.resolve() / "data" / "shop.sqlite"
    assert config.evals_config.suites == [tmp_path.resolve() / "suites" / "one.yaml"]
    assert config.evals_config.max_cost_usd == 2.5
    assert config.evals_config.gate.max_regressions == 1
    assert config.evals_config.gate.alpha == 0.05  # defaults kept
    assert config.evals_config.scorers == ["result_match", "policy", "outcome", "faithfulness", "retrieval_recall", "routing"]


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (BASE.replace("engine: sqlite", "engine: oracle"), ["line 3", "datasources.0.engine"]),
        (BASE.replace("    path: data/shop.sqlite\n", "    path: data/shop.sqlite\n    pth: x\n"),
         ["line 5", "datasources.0.pth", "unknown key"]),
        (BASE.replace("default_role: analyst", "default_role: nobody"), ["policies", "nobody"]),
        (BASE.replace("id: shop", "id: 9shop"), ["datasources.0.id", "start with a letter"]),
        (BASE + "llm: {default: {model: x, temprature: 0}}\n", ["llm.default.temprature", "unknown key"]),
        ("datasources: [\n", ["line", "nl2sql.yaml"]),
    ],
)
def test_errors_name_the_file_the_line_and_the_field(tmp_path: Path, text: str, fragments: list[str]):
    path = _project(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_project_config(path)  # the loader every command uses: the engine checks its datasources too
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


def test_evals_file_errors_name_the_evals_file(tmp_path: Path):
    path = _project(tmp_path, evals="suites: []\nmax_cost: 3\n")
    with pytest.raises(ConfigError, match=r"evals\.yaml, line 2: max_cost: unknown key"):
        load_config(path)


def test_env_substitution_with_defaults_and_a_clear_error(tmp_path: Path):
    text = BASE + "llm:\n  default: {model: 'openai/${env:MODEL_NAME}', api_key: '${env:NO_SUCH_KEY:-}'}\n"
    config = load_config(_project(tmp_path, text), environ={"MODEL_NAME": "gpt-4o-mini"})
    assert config.llm.for_node("planner").model == "openai/gpt-4o-mini"
    assert config.llm.for_node("planner").api_key == ""
    with pytest.raises(ConfigError, match=r"llm\.default\.model: environment variable MODEL_NAME is not set"):
        load_config(_project(tmp_path, text), environ={})


@pytest.mark.parametrize(
    ("data", "env", "expected"),
    [
        ("${env:A}", {"A": "1"}, "1"),
        ("x-${env:A}-${env:B:-b}", {"A": "a"}, "x-a-b"),
        ({"k": ["${env:A}", 3]}, {"A": "v"}, {"k": ["v", 3]}),
        ("no variables", {}, "no variables"),
    ],
)
def test_substitute_env(data, env, expected):
    assert substitute_env(data, "f.yaml", env) == expected


def test_llm_node_overrides_merge_over_the_default(tmp_path: Path):
    text = BASE + "llm:\n  default: {model: a/base, timeout_s: 30}\n  nodes:\n    planner: {model: a/big}\n"
    config = load_config(_project(tmp_path, text))
    assert config.llm.for_node("resolver").model == "a/base"
    planner = config.llm.for_node("planner")
    assert (planner.model, planner.timeout_s) == ("a/big", 30)


@pytest.mark.parametrize(
    ("access", "table", "column", "table_ok", "column_ok"),
    [
        (DatasourceAccess(allow=["*"]), "Customer", "Email", True, True),
        (DatasourceAccess(allow=["*"], deny=["Salary"]), "salary", "Amount", False, False),
        (DatasourceAccess(allow=["*"], deny=["Customer.Email"]), "Customer", "Email", True, False),
        (DatasourceAccess(allow=["*"], deny=["Customer.Email"]), "customer", "FirstName", True, True),
        (DatasourceAccess(allow=["Track"]), "Track", "Name", True, True),
        (DatasourceAccess(allow=["Track"]), "Album", "Title", False, False),
        (DatasourceAccess(allow=["Track.Name"]), "Track", "Name", True, True),
        (DatasourceAccess(allow=["Track.Name"]), "Track", "Milliseconds", True, False),
        (DatasourceAccess(), "Track", "Name", False, False),
    ],
)
def test_access_rules(access, table, column, table_ok, column_ok):
    assert access.allows_table(table) is table_ok
    assert access.allows_column(table, column) is column_ok


def test_a_role_naming_an_unknown_datasource_is_refused(tmp_path: Path):
    text = BASE.replace("        shop: {allow", "        nowhere: {allow")
    with pytest.raises(ConfigError, match="unknown datasource 'nowhere'"):
        load_config(_project(tmp_path, text))


def test_suite_paths_in_evals_yaml_are_relative_to_nl2sql_yaml(tmp_path: Path):
    """Spec: ``suites: [evals/chinook.yaml]  # relative to nl2sql.yaml``, wherever evals.yaml sits."""
    (tmp_path / "config").mkdir()
    (tmp_path / "nl2sql.yaml").write_text(BASE.replace("evals: {file: evals.yaml}", "evals: {file: config/evals.yaml}"))
    (tmp_path / "config" / "evals.yaml").write_text(EVALS)
    config = load_config(tmp_path / "nl2sql.yaml")
    assert config.evals_config.suites == [tmp_path.resolve() / "suites" / "one.yaml"]  # not config/suites/


def test_a_listed_suite_that_is_missing_names_both_paths_and_the_rule(tmp_path: Path):
    from nl2sql_assets.evaluation.running.selection import SelectionError, load_run_suites

    (tmp_path / "config").mkdir()
    (tmp_path / "nl2sql.yaml").write_text(BASE.replace("evals: {file: evals.yaml}", "evals: {file: config/evals.yaml}"))
    (tmp_path / "config" / "evals.yaml").write_text("suites: [mine.yaml]\n")
    (tmp_path / "config" / "mine.yaml").write_text("version: 1\ncases: []\n")  # beside evals.yaml: the old reading
    config = load_config(tmp_path / "nl2sql.yaml")
    with pytest.raises(SelectionError) as info:
        load_run_suites(config, None)
    message = str(info.value)
    root = tmp_path.resolve()
    assert str(root / "config" / "evals.yaml") in message and str(root / "mine.yaml") in message
    assert "relative to the folder of" in message and str(root / "nl2sql.yaml") in message
    assert str(root / "config" / "mine.yaml") in message and "'config/mine.yaml'" in message


@pytest.mark.parametrize(("entry", "fragments"), [
    ("{kind: grpc}", ["engines.bad.kind: unknown engine kind 'grpc'"]),
    ("{kind: http}", ["engines.bad", "url"]),
    ("[1, 2]", ["engines.bad"]),
])
def test_a_bad_engine_entry_is_refused_at_load_naming_the_file_and_entry(tmp_path: Path, entry: str,
                                                                         fragments: list[str]):
    from nl2sql_assets.project import load_project_config

    path = _project(tmp_path, BASE + f"engines:\n  bad: {entry}\n")
    with pytest.raises(ConfigError) as caught:
        load_project_config(path)
    message = str(caught.value)
    assert str(path.resolve()) in message
    for fragment in fragments:
        assert fragment in message


def test_an_engine_name_that_cannot_be_a_partition_key_is_refused_by_the_config_itself(tmp_path: Path):
    path = _project(tmp_path, BASE + "engines:\n  'a|b': {kind: http, url: 'http://127.0.0.1:1'}\n")
    with pytest.raises(ConfigError, match=r"invalid config name 'a\|b'"):
        load_config(path)
