"""The Definitions of the project Dagster was started in (``$NL2SQL_PROJECT`` or ./nl2sql.yaml)."""


import dagster as dg

from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.resources import default_config_path


@dg.definitions
def project_definitions() -> dg.Definitions:
    return build_defs(default_config_path())
