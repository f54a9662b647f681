"""Partitions: ``config`` (dynamic: plans, retrieval and LLM configs) x ``pass`` (static 1..N)."""


import os

import dagster as dg

from nl2sql_assets.config import validate_config_name

CONFIGS = dg.DynamicPartitionsDefinition(name="llm_config")
MAX_PASSES = int(os.environ.get("NL2SQL_MAX_PASSES", "3"))
PASSES = dg.StaticPartitionsDefinition([str(n) for n in range(1, MAX_PASSES + 1)])
CONFIG_X_PASS = dg.MultiPartitionsDefinition({"config": CONFIGS, "pass": PASSES})


def config_pass_key(config: str, pass_index: int | str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"config": validate_config_name(config), "pass": str(pass_index)})


def register_configs(instance: dg.DagsterInstance, names: list[str]) -> list[str]:
    """Add configs that are not partitions yet; every name is validated first."""
    for name in names:
        validate_config_name(name)
    known = set(instance.get_dynamic_partitions(CONFIGS.name))
    new = [n for n in names if n not in known]
    if new:
        instance.add_dynamic_partitions(CONFIGS.name, new)
    return new
