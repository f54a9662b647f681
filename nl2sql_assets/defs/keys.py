"""Every asset key and group of the graph, in one place.

The UI titles a node by the last part of its key, so each key is one part that names both what
it is about and what it is: ``chinook_case_runs``, ``support_schema_snapshot``. The suffix says the
stage, so no two nodes share a title even when a suite and a datasource share a name. Groups
follow the stages a run goes through.
"""

import dagster as dg

# Groups, in the order a run goes through them.
DATASETS_GROUP = "datasets"  # demo databases, schema snapshots, schema indexes
SUITES_GROUP = "suites"  # suites and their regenerated rows
NEIGHBOURS_GROUP = "neighbours"  # neighbour databases and each suite's gold on them (evals.yaml neighbours:)
RUNS_GROUP = "runs"  # case runs (config x pass)
BOARDS_GROUP = "boards"  # scoreboards (per config), their history, the report across configs
RECORDS_GROUP = "records"  # benchmark records under benchmarks/
GROUPS = (DATASETS_GROUP, SUITES_GROUP, NEIGHBOURS_GROUP, RUNS_GROUP, BOARDS_GROUP, RECORDS_GROUP)

DEMO_DATASETS = dg.AssetKey("demo_datasets")
#: The code location's name, as pyproject.toml ([tool.dg.project] code_location_name) and
#: workspace.yaml give it: the UI files runs under it.
CODE_LOCATION = "nl2sql"


def schema_snapshot_key(datasource: str) -> dg.AssetKey:
    return dg.AssetKey(f"{datasource}_schema_snapshot")


def schema_index_key(datasource: str) -> dg.AssetKey:
    return dg.AssetKey(f"{datasource}_schema_index")


def suite_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey(f"{suite}_suite")


def regenerated_rows_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey(f"{suite}_regenerated_rows")


def neighbours_key(datasource: str) -> dg.AssetKey:
    return dg.AssetKey(f"{datasource}_neighbours")


def neighbour_rows_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey(f"{suite}_neighbour_rows")


def case_runs_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey(f"{suite}_case_runs")


def scoreboards_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey(f"{suite}_scoreboards")


def scoreboard_history_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey(f"{suite}_scoreboard_history")


def eval_report_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey(f"{suite}_eval_report")


def benchmark_records_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey(f"{suite}_benchmark_records")


def op_name(key: dg.AssetKey) -> str:
    """The op behind an asset (what run config names under ``ops:``)."""
    return key.to_python_identifier()
