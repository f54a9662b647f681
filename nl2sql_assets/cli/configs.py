"""``configs add`` and ``configs list``: the configs Dagster partitions case runs by."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nl2sql_assets.cli.common import add_command, add_group, dagster_instance, project_config_path
from nl2sql_assets.errors import UsageError


def add(sub: Any) -> None:
    csub = add_group(sub, "configs", help="LLM configs known to the Dagster project",
                     description="The configs the Dagster project partitions its case runs by.",
                     dest="configs_command")
    cadd = add_command(
        csub, "add", _cmd_configs, help="register a config name as a case runs partition",
        description="Register NAME as a partition of the case runs in the project's Dagster instance; with "
                    "--llm, write its llm section to configs/NAME.yaml first (a key stays a ${env:VAR} "
                    "reference). Exit 2 for a name that is invalid, reserved, or resolves to no config.")
    cadd.add_argument("name", help="the config's name (letters, digits, '.', '_', '-')")
    cadd.add_argument("--llm", default=None, metavar="SPEC",
                      help="a preset name or an llm section file, written to configs/NAME.yaml "
                           "(default: a preset or configs/NAME.yaml of that name)")
    add_command(csub, "list", _cmd_configs, help="list registered configs",
                description="Print the configs registered as case runs partitions, one a line. Writes nothing.")


def _llm_section_text(spec: str) -> str:
    """The YAML to store for ``configs add --llm SPEC``. A preset or a file is copied as written,
    so its ``${env:...}`` key stays a reference: the resolved section would hold the key itself."""
    from nl2sql_assets.llm.presets import PRESETS_DIR, preset_names, resolve_llm_spec
    from nl2sql_assets.yamlio import dump_yaml

    _, llm = resolve_llm_spec(spec)  # validates the spec and the section
    target = spec.split("=", 1)[1] if "=" in spec else spec
    short = [n for n in preset_names() if n.endswith("-" + target)]
    if target in preset_names():
        source: Path | None = PRESETS_DIR / f"{target}.yaml"
    elif Path(target).expanduser().is_file():
        source = Path(target).expanduser()
    elif len(short) == 1:
        source = PRESETS_DIR / f"{short[0]}.yaml"
    else:
        source = None  # a bare model name: a section with no key in it
    if source is not None:
        return source.read_text(encoding="utf-8")
    return dump_yaml(llm.model_dump(mode="json", exclude_none=True))


def _cmd_configs(args: argparse.Namespace) -> int:
    from nl2sql_assets.config import validate_config_name
    from nl2sql_assets.defs.partitions import CONFIGS, register_configs
    from nl2sql_assets.evaluation.running.modes import reserved_config_names, resolve_config
    from nl2sql_assets.evaluation.running.named_configs import project_configs_dir
    from nl2sql_assets.project import load_project_config

    with dagster_instance(project_config_path(args)) as instance:
        if args.configs_command == "list":
            for name in instance.get_dynamic_partitions(CONFIGS.name):
                print(name)
            return 0
        config = load_project_config(project_config_path(args))
        name = validate_config_name(args.name)
        reserved = reserved_config_names()
        if args.llm and name in reserved:
            raise UsageError(f"config name {name!r} is reserved ({', '.join(reserved)}); "
                             "choose another name for an llm section")
        if args.llm:
            target = project_configs_dir(config) / f"{name}.yaml"
            from nl2sql_assets.atomic import atomic_write

            atomic_write(target, f"# llm section for config {name} (from {args.llm})\n" + _llm_section_text(args.llm))
        mode, _ = resolve_config(name, config)  # refuses a name that resolves to nothing
        new = register_configs(instance, [name])
    print(f"config {name!r} ({mode}) " + ("registered" if new else "was already registered"))
    if args.llm:
        print(f"wrote {target}: the project's configuration, meant to be committed with it (keys stay in "
              "the environment, as ${env:VAR})")
    return 0
