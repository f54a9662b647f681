"""Every asset key and group of the graph, in one place.

The UI titles a node by the last part of its key and cuts a title longer than 18 characters in
the middle at the lineage's default zoom (``chino…_scoreboards``). So a key is two parts, its
subject then its stage, ``chinook/case_runs``, ``support/schema_snapshot``: the title is the
stage (18 characters at most), and the subject is the node's group, one per suite and one per
datasource. The lineage then reads as one chain per suite (suite, rows, neighbour rows, case
runs, scoreboards, history, report, records) fed by its datasources' chains (schema snapshot,
index, neighbours), and no two nodes of one group share a title.
"""

import dagster as dg

#: The demo databases every datasource's chain starts from.
DATASETS_GROUP = "datasets"
DEMO_DATASETS = dg.AssetKey("demo_datasets")
#: The code location's name, as pyproject.toml ([tool.dg.project] code_location_name) and
#: workspace.yaml give it: the UI files runs under it.
CODE_LOCATION = "nl2sql"
#: The stages: the titles of the nodes, each short enough to be drawn whole.
DATASOURCE_STAGES = ("schema_snapshot", "schema_index", "neighbours")
SUITE_STAGES = ("suite", "regenerated_rows", "neighbour_rows", "case_runs", "scoreboards", "scoreboard_history",
                "eval_report", "benchmark_records", "dashboard")
TITLE_MAX = 18  # what the lineage draws whole at its default zoom


def suite_group(suite: str) -> str:
    """A suite's chain is its own group, named as the suite."""
    return suite


def datasource_group(datasource: str) -> str:
    """A datasource's chain (snapshot, index, neighbours): its own group, told apart from a suite
    of the same name."""
    return f"{datasource}_db"


def schema_snapshot_key(datasource: str) -> dg.AssetKey:
    return dg.AssetKey([datasource, "schema_snapshot"])


def schema_index_key(datasource: str) -> dg.AssetKey:
    return dg.AssetKey([datasource, "schema_index"])


def neighbours_key(datasource: str) -> dg.AssetKey:
    return dg.AssetKey([datasource, "neighbours"])


def suite_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey([suite, "suite"])


def regenerated_rows_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey([suite, "regenerated_rows"])


def neighbour_rows_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey([suite, "neighbour_rows"])


def case_runs_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey([suite, "case_runs"])


def scoreboards_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey([suite, "scoreboards"])


def scoreboard_history_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey([suite, "scoreboard_history"])


def eval_report_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey([suite, "eval_report"])


def benchmark_records_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey([suite, "benchmark_records"])


def dashboard_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey([suite, "dashboard"])


def check_groups(suites: list[str], datasources: list[str]) -> None:
    """Each suite and datasource its own group: two that would share one name are an error."""
    from nl2sql_assets.errors import UserError

    owners: dict[str, str] = {DATASETS_GROUP: "the demo databases"}
    for kind, names, group in (("suite", suites, suite_group), ("datasource", datasources, datasource_group)):
        for name in names:
            other = owners.setdefault(group(name), f"{kind} {name}")
            if other != f"{kind} {name}":
                raise UserError(f"{kind} {name!r} and {other} would share the Dagster group {group(name)!r}: "
                                f"rename the {kind} (each suite and datasource is its own group)")


def op_name(key: dg.AssetKey) -> str:
    """The op behind an asset (what run config names under ``ops:``)."""
    return key.to_python_identifier()
