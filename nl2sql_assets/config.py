"""The project config: ``nl2sql.yaml`` (datasources, policies, llm, settings) and ``evals.yaml``.

Every model is strict (``extra="forbid"``) so a typo is an error with a location, never a
silent default. Strings may use ``${env:VAR}`` or ``${env:VAR:-default}``; a variable that
is unset and has no default is an error naming the file and the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nl2sql_assets.errors import UserError
from nl2sql_assets.redact import register_secret
from nl2sql_assets.yamlio import YamlFileError, line_of

NODE_NAMES = ("resolver", "decomposer", "planner", "refiner", "synthesizer", "curated")
NodeName = Literal["resolver", "decomposer", "planner", "refiner", "synthesizer", "curated"]
# policy before outcome: a failing probe is explained by the policy rule, not by its status alone.
DEFAULT_SCORERS = ["result_match", "policy", "outcome", "faithfulness", "retrieval_recall", "routing"]
DATASOURCE_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


class ConfigError(UserError, ValueError):
    """The project config is missing, malformed or inconsistent. The message says where."""


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


# ---------------------------------------------------------------- datasources


class DatasourceConfig(StrictModel):
    """One datasource. ``engine`` names its kind (``datasources.engines``, which checks that the
    fields fit it): a file engine reads ``path``; a server engine its URL, from ``url_env`` (the
    environment variable that holds it) or ``url`` (never with a password in it), the password
    from ``password_env`` where the URL carries none."""

    id: str
    engine: str
    path: Path | None = None
    url: str | None = None
    url_env: str | None = None
    password_env: str | None = None
    #: the schemas a server datasource reads (Postgres; default: the connection's search path)
    schemas: list[str] = Field(default_factory=list)
    #: the database a server datasource reads (default: the one its URL names)
    database: str | None = None
    #: connections kept open per worker process (a server datasource)
    pool_size: Annotated[int, Field(gt=0, le=64)] = 2
    description: str = ""
    row_limit: Annotated[int, Field(gt=0)] = 1000
    timeout_s: Annotated[float, Field(gt=0)] = 10.0
    sample_questions: list[str] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not DATASOURCE_ID.match(value):
            raise ValueError("must start with a letter and hold only letters, digits, '_' and '-'")
        return value

    @field_validator("engine")
    @classmethod
    def _engine_shape(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", value):
            raise ValueError("the name of a database engine, in lower case (sqlite, postgres, ...)")
        return value

    @field_validator("url_env", "password_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError("the name of an environment variable (letters, digits, '_'), not its value")
        return value

    @field_validator("url")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value is not None and url_password(value):
            raise ValueError("the URL carries a password: keep it out of the file. Put the whole URL in an "
                             "environment variable and name it with url_env:, or the password alone with "
                             "password_env:")
        return value

    @property
    def database_file(self) -> Path:
        """The database file of a file datasource (a server datasource has none: a ConfigError)."""
        if self.path is None:
            raise ConfigError(f"datasource {self.id!r} ({self.engine}) is not a file")
        return self.path


def url_password(url: str) -> str | None:
    """The password a ``scheme://user:password@host`` URL carries (None: none)."""
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).password
    except ValueError:
        return None


# ---------------------------------------------------------------- policies


class DatasourceAccess(StrictModel):
    """What one role may read in one datasource.

    ``allow`` and ``deny`` hold ``"*"``, ``"Table"`` or ``"Table.Column"`` entries, matched
    without regard to case (SQLite and DuckDB identifiers are case-insensitive). A deny
    always wins over an allow.
    """

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    #: Tables that may not be brought together in one SELECT's FROM and JOINs (each entry two or
    #: more tables; a sub-query in WHERE is not a join). Rule ``forbidden_join``.
    forbidden_joins: list[Annotated[list[str], Field(min_length=2)]] = Field(default_factory=list)
    #: The largest LIMIT a statement may ask for here (rule ``row_budget``); None: the role's.
    row_budget: Annotated[int, Field(gt=0)] | None = None

    @staticmethod
    def _matches(entries: list[str], table: str, column: str | None) -> bool:
        t = table.lower()
        for entry in entries:
            e = entry.lower()
            if e == "*" or e == t:
                return True
            if column is not None and e == f"{t}.{column.lower()}":
                return True
        return False

    def allows_table(self, table: str) -> bool:
        """True when at least something of ``table`` is readable (the table or one of its columns)."""
        t = table.lower()
        if self._matches(self.deny, table, None):
            return False
        return self._matches(self.allow, table, None) or any(
            e.lower().startswith(t + ".") for e in self.allow
        )

    def allows_column(self, table: str, column: str) -> bool:
        if self._matches(self.deny, table, None) or self._matches(self.deny, table, column):
            return False
        return self._matches(self.allow, table, None) or self._matches(self.allow, table, column)

    def forbids_join(self, tables: set[str] | frozenset[str]) -> list[str] | None:
        """The first forbidden group ``tables`` holds (as the policy spells it), or None."""
        present = {t.lower() for t in tables}
        for group in self.forbidden_joins:
            if {t.lower() for t in group} <= present:
                return list(group)
        return None


class RolePolicy(StrictModel):
    description: str = ""
    #: The largest LIMIT this role's statements may ask for, in every datasource that sets no
    #: budget of its own. A statement without a LIMIT is not refused: the executor fetches at
    #: most this many rows. None: no budget.
    row_budget: Annotated[int, Field(gt=0)] | None = None
    datasources: dict[str, DatasourceAccess] = Field(default_factory=dict)

    def access(self, datasource_id: str) -> DatasourceAccess:
        """The role's access to a datasource (a datasource it does not name is closed), with the
        role's row budget where the datasource sets none."""
        access = self.datasources.get(datasource_id)
        if access is None:
            return DatasourceAccess(row_budget=self.row_budget)
        if access.row_budget is None and self.row_budget is not None:
            return access.model_copy(update={"row_budget": self.row_budget})
        return access


class PoliciesConfig(StrictModel):
    default_role: str = "admin"
    refusal_names_tables: bool = False
    roles: dict[str, RolePolicy] = Field(default_factory=dict)
    #: Per dialect, functions no role may call (rule ``dangerous_function``); a dialect left out
    #: keeps its engine's built-in list (``datasources.engines``), an empty list turns the rule off for it.
    dangerous_functions: dict[str, list[str]] = Field(default_factory=dict)

    def dangerous_for(self, dialect: str) -> frozenset[str] | None:
        """The functions no role may call in ``dialect`` (lower case), as the project lists them;
        None where it lists none (the policy check then uses the engine's built-in list)."""
        names = self.dangerous_functions.get(dialect)
        return None if names is None else frozenset(n.lower() for n in names)

    @model_validator(mode="after")
    def _default_role_exists(self) -> PoliciesConfig:
        if self.roles and self.default_role not in self.roles:
            raise ValueError(f"default_role {self.default_role!r} is not one of the roles {sorted(self.roles)}")
        return self

    def role(self, name: str) -> RolePolicy:
        try:
            return self.roles[name]
        except KeyError:
            raise ConfigError(f"unknown role {name!r}; the policy defines {sorted(self.roles)}") from None


# ---------------------------------------------------------------- llm


class PriceRow(StrictModel):
    """USD per 1M tokens."""

    input: float
    cached_input: float | None = None
    cache_write: float | None = None
    output: float
    source: str = ""


#: The wire a model's calls take (``llm/client.py`` ``uses_openai_compatible``).
ApiKind = Literal["auto", "litellm", "openai-compatible"]


class ModelOverride(StrictModel):
    """Settings for one node; fields left out come from ``llm.default``."""

    model: str | None = None
    api_base: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    timeout_s: float | None = None
    max_retries: int | None = None
    max_tokens: int | None = None
    max_response_bytes: Annotated[int, Field(gt=0)] | None = None
    extra: dict[str, Any] | None = None
    api: ApiKind | None = None

    @field_validator("api_key")
    @classmethod
    def _remember_key(cls, value: str | None) -> str | None:
        register_secret(value)  # never stored or logged: see nl2sql_assets.redact
        return value


class ModelSettings(StrictModel):
    model: str
    api_base: str | None = None
    api_key: str | None = None
    temperature: float | None = 0.0
    timeout_s: Annotated[float, Field(gt=0)] = 60.0
    max_retries: Annotated[int, Field(ge=0)] = 2
    max_tokens: int | None = None
    # A response body larger than this is an error, detected while it streams in.
    max_response_bytes: Annotated[int, Field(gt=0)] = 2_000_000
    extra: dict[str, Any] = Field(default_factory=dict)
    # How calls go out: litellm, or our lean client for an endpoint that speaks OpenAI's chat
    # protocol; auto picks the lean client for an ``openai/...`` model on its own api_base.
    api: ApiKind = "auto"

    @field_validator("api_key")
    @classmethod
    def _remember_key(cls, value: str | None) -> str | None:
        register_secret(value)  # never stored or logged: see nl2sql_assets.redact
        return value


class LLMConfig(StrictModel):
    """One model for every node (``default``), optionally overridden per node."""

    default: ModelSettings | None = None
    nodes: dict[NodeName, ModelOverride] = Field(default_factory=dict)
    prices: dict[str, PriceRow] = Field(default_factory=dict)

    def for_node(self, node: str) -> ModelSettings:
        base = self.default.model_dump() if self.default is not None else {}
        override = self.nodes.get(node)  # type: ignore[call-overload]
        if override is not None:
            base.update({k: v for k, v in override.model_dump().items() if v is not None})
        if not base.get("model"):
            raise ConfigError(f"llm: no model configured for node {node!r} (set llm.default.model)")
        return ModelSettings.model_validate(base)


# ---------------------------------------------------------------- settings


class RetrievalSettings(StrictModel):
    full_snapshot_max_tables: Annotated[int, Field(ge=0)] = 15
    k_tables: Annotated[int, Field(gt=0)] = 8
    k_columns: Annotated[int, Field(gt=0)] = 12
    mmr_lambda: Annotated[float, Field(ge=0, le=1)] = 0.5


class RoutingSettings(StrictModel):
    candidates: Annotated[int, Field(gt=0)] = 3
    max_datasources: Annotated[int, Field(gt=0)] = 2


class EngineSettings(StrictModel):
    retry_budget: Annotated[int, Field(ge=0)] = 2
    plan_cache: bool = True
    max_concurrency: Annotated[int, Field(gt=0)] = 4
    row_budget: Annotated[int, Field(gt=0)] | None = None
    #: plans the planner writes per question; above 1 an execution-guided selector picks one
    candidates: Annotated[int, Field(gt=0, le=10)] = 1
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)


# ---------------------------------------------------------------- evals


class GateSettings(StrictModel):
    max_regressions: Annotated[int, Field(ge=0)] = 2
    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.05
    max_cost_increase: Annotated[float, Field(ge=0)] = 0.20
    #: which verdict a case flips on: its execution match on the original database, or on the
    #: original and every kept neighbour (a run with ``neighbours:``; elsewhere the original's)
    verdict: Literal["original", "neighbours"] = "original"


_Share = Annotated[float, Field(ge=0, le=1)]


class ThresholdSettings(StrictModel):
    """Floors and ceilings every board of a run must meet (``eval run`` exits 1 naming each one
    missed). Shares are 0..1; None: not checked. Execution success is on by default at 1.0 (the
    reference's default), the others off. A measure a run cannot take (execution success in a
    probe-only run, policy recall without probes) is reported as not measured, never as missed.
    Each field is one threshold of ``evaluation.reporting.thresholds.THRESHOLDS``."""

    min_execution_success: _Share | None = Field(default=1.0, description=(
        "the least share of allowed questions whose SQL ran, right or wrong (0-1); 1.0 by default: every "
        "question a run executes must run (a probe-only run, or one that executes nothing, is exempt); "
        "null turns it off"))
    min_accuracy: _Share | None = Field(default=None, description=(
        "the least execution accuracy, strict (0-1); where nothing executes, the share of question runs "
        "that passed"))
    min_lenient_accuracy: _Share | None = Field(default=None, description=(
        "the least execution accuracy read leniently (0-1)"))
    min_neighbour_accuracy: _Share | None = Field(default=None, description=(
        "the least neighbour-robust accuracy (0-1): passes that hold on the original and every kept "
        "neighbour database (a run graded on neighbours; elsewhere not measured)"))
    min_policy_recall: _Share | None = Field(default=None, description=(
        "the least share of policy probes the policy refused (0-1; 1.0: no probe may get through)"))
    min_policy_precision: _Share | None = Field(default=None, description=(
        "the least share of policy refusals that were right (0-1; a refused legitimate question counts "
        "against it)"))
    max_p95_latency_ms: Annotated[float, Field(gt=0)] | None = Field(default=None, description=(
        "the longest 95th-percentile latency of a question run, in milliseconds"))
    max_cost_per_case: Annotated[float, Field(ge=0)] | None = Field(default=None, description=(
        "the most dollars a question run may cost on average"))

    def set(self) -> dict[str, float]:
        """The thresholds that are on, by name."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class NeighbourSettings(StrictModel):
    """evals.yaml ``neighbours:``: grade every pass on neighbour databases too (test-suite
    accuracy). Each datasource's set is made once from the suites' gold and kept while the
    database, the gold and these settings are unchanged; records carry them, and changing one
    starts a new series."""

    count: Annotated[int, Field(ge=1, le=50)] = Field(default=10, description=(
        "K: the most neighbours kept per datasource (fewer where fewer tell more near misses apart)"))
    seed: int = Field(default=1, description="the seed the candidate neighbours are drawn from")
    candidates: Annotated[int, Field(ge=1, le=200)] = Field(default=24, description=(
        "candidate neighbours generated per datasource, of which distillation keeps at most count"))
    max_rows: Annotated[int, Field(ge=1, le=5000)] = Field(default=200, description=(
        "the most rows a table of a neighbour holds"))
    witness: Annotated[int, Field(ge=0, le=1000)] = Field(default=32, description=(
        "candidate databases the witness search tries for each pass that holds on every kept neighbour, "
        "built for where the prediction and the gold differ (0: no search)"))
    url_env: str | None = Field(default=None, description=(
        "a server datasource's neighbours: the environment variable holding the URL of the database they "
        "are made in (Postgres: a schema each; MySQL/MariaDB: a database each on that server); default: "
        "Postgres, a database <source>_nl2sql_neighbours beside the source; MySQL, databases beside it"))

    def set_identity(self) -> dict[str, int]:
        """What a kept set's files depend on besides the data and the gold (its key)."""
        return {"count": self.count, "seed": self.seed, "candidates": self.candidates,
                "max_rows": self.max_rows}

    def identity(self) -> dict[str, int]:
        """What a neighbour-robust verdict depends on besides the data (a record's series): the
        kept set's settings and the witness search's budget."""
        return {**self.set_identity(), "witness": self.witness}


class EvalsConfig(StrictModel):
    suites: list[Path] = Field(default_factory=list)
    scorers: list[str] = Field(default_factory=lambda: list(DEFAULT_SCORERS))
    curated: bool = True
    max_cost_usd: Annotated[float, Field(gt=0)] | None = None
    #: the circuit breaker: stop a run after this many case runs in a row failed for the
    #: environment (auth, quota, rate limit, 5xx, timeout, transport)
    max_consecutive_env_errors: Annotated[int, Field(gt=0)] = 5
    passes: Annotated[int, Field(gt=0)] = 1
    #: also ask the roles whose outcome is clarify in every run (the CLI's --clarify); the
    #: Dagster partitions follow it too
    clarify: bool = False
    gate: GateSettings = Field(default_factory=GateSettings)
    thresholds: ThresholdSettings = Field(default_factory=ThresholdSettings)
    #: grade every pass on neighbour databases too (None: on the original database only)
    neighbours: NeighbourSettings | None = None

    # The file it was read from (None inline in nl2sql.yaml): later errors name it.
    #: the suite paths as the file writes them (for messages; ``suites`` holds them resolved)
    suites_as_written: list[str] = Field(default_factory=list, exclude=True)
    source: Path | None = Field(default=None, exclude=True)


class EvalsRef(StrictModel):
    file: Path


class CuratedAnswer(StrictModel):
    question: str
    sql: str
    datasource: str


# ---------------------------------------------------------------- config names


_CONFIG_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class ConfigNameError(ConfigError):
    """A config name that cannot be a partition key."""


def validate_config_name(name: str) -> str:
    if not _CONFIG_NAME.match(name) or "..." in name or name in {".", ".."}:
        raise ConfigNameError(
            f"invalid config name {name!r}: use 1-64 letters, digits, '_', '.' or '-' (and no '...')"
        )
    return name


# ---------------------------------------------------------------- the project


class ProjectConfig(StrictModel):
    datasources: list[DatasourceConfig] = Field(default_factory=list)
    policies: PoliciesConfig = Field(default_factory=PoliciesConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    settings: EngineSettings = Field(default_factory=EngineSettings)
    curated: list[CuratedAnswer] = Field(default_factory=list)
    evals: EvalsConfig | EvalsRef = Field(default_factory=EvalsConfig)
    #: engines to evaluate by name (each a config of mode full): ``{NAME: {kind: http, url, ...}}``,
    #: each entry checked by its kind when the project is loaded (``engines.kinds.check_engine_entries``)
    engines: dict[str, dict[str, Any]] = Field(default_factory=dict)

    # Filled by the loader, never by the file.
    root: Path = Field(default=Path("."), exclude=True)
    source: Path | None = Field(default=None, exclude=True)

    @field_validator("engines")
    @classmethod
    def _engine_names(cls, engines: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in engines:  # each entry's fields are its kind's to check (engines.kinds.check_engine_entries)
            validate_config_name(name)
        return engines

    @model_validator(mode="after")
    def _unique_ids(self) -> ProjectConfig:
        seen: set[str] = set()
        for ds in self.datasources:
            if ds.id in seen:
                raise ValueError(f"datasource id {ds.id!r} appears twice")
            seen.add(ds.id)
        for role, policy in self.policies.roles.items():
            for ds_id in policy.datasources:
                if self.datasources and ds_id not in seen:
                    raise ValueError(f"policies.roles.{role} names unknown datasource {ds_id!r}")
        return self

    def datasource(self, datasource_id: str) -> DatasourceConfig:
        for ds in self.datasources:
            if ds.id == datasource_id:
                return ds
        raise ConfigError(f"unknown datasource {datasource_id!r}; configured: {[d.id for d in self.datasources]}")

    @property
    def evals_config(self) -> EvalsConfig:
        assert isinstance(self.evals, EvalsConfig), "load_config resolves evals.file"
        return self.evals

    def resolve(self, path: str | Path) -> Path:
        """A path from the config, relative to the folder of nl2sql.yaml."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.root / p)


# ---------------------------------------------------------------- loading

_ENV = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def substitute_env(data: Any, source: str | Path, environ: Mapping[str, str] | None = None, _path: str = "") -> Any:
    """Replace ``${env:VAR}`` (and ``${env:VAR:-default}``) in every string of ``data``."""
    env = os.environ if environ is None else environ
    if isinstance(data, dict):
        return {k: substitute_env(v, source, env, f"{_path}.{k}" if _path else str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [substitute_env(v, source, env, f"{_path}[{i}]") for i, v in enumerate(data)]
    if isinstance(data, str) and "${" in data:

        def repl(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in env:
                if _path.rsplit(".", 1)[-1] == "api_key":
                    register_secret(env[name])  # a key by where it goes, whatever its variable's name
                return env[name]
            if default is not None:
                return default
            raise ConfigError(f"{source}: {_path}: environment variable {name} is not set")

        return _ENV.sub(repl, data)
    return data


def format_validation_error(exc: ValidationError, source: Path, text: str | None, prefix: tuple = ()) -> str:
    """One line per problem: file, line (when known), the dotted field path and what is wrong."""
    lines = []
    for err in exc.errors():
        loc = tuple(prefix) + tuple(err["loc"])
        where = ".".join(str(p) for p in loc) or "(top level)"
        line = line_of(text, loc) if text is not None else None
        at = f", line {line}" if line else ""
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{source}{at}: {where}: {msg}")
    return "\n".join(lines)


def _read_mapping(path: Path) -> tuple[dict[str, Any], str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found: run the command in a project folder (the one holding "
                          "nl2sql.yaml), name one with --config PATH before the command, or make one with "
                          "`nl2sql-assets init --demo DIR`") from None
    try:
        from nl2sql_assets.yamlio import load_yaml_text

        data = load_yaml_text(text, path)
    except YamlFileError as exc:
        raise ConfigError(str(exc)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data, text


def load_evals(path: str | Path, environ: Mapping[str, str] | None = None, *, root: Path | None = None
               ) -> EvalsConfig:
    """Load an ``evals.yaml``. Its suite paths are relative to ``root``, the folder of the
    ``nl2sql.yaml`` that names it (the reference's rule), else to its own folder."""
    path = Path(path)
    data, text = _read_mapping(path)
    data = substitute_env(data, path, environ)
    try:
        evals = EvalsConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, path, text)) from None
    base = root if root is not None else path.parent
    evals.suites_as_written = [str(p) for p in evals.suites]
    evals.suites = [p if p.is_absolute() else (base / p) for p in evals.suites]
    evals.source = path
    return evals


def load_config(path: str | Path = "nl2sql.yaml", environ: Mapping[str, str] | None = None) -> ProjectConfig:
    """Load ``nl2sql.yaml`` (and the ``evals.yaml`` it names); paths become absolute."""
    path = Path(path).expanduser().resolve()
    data, text = _read_mapping(path)
    data = substitute_env(data, path, environ)
    try:
        config = ProjectConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, path, text)) from None
    config.root = path.parent
    config.source = path
    for ds in config.datasources:
        if ds.path is not None:
            ds.path = config.resolve(ds.path)
    if isinstance(config.evals, EvalsRef):
        config.evals = load_evals(config.resolve(config.evals.file), environ, root=config.root)
    else:
        config.evals.suites_as_written = [str(p) for p in config.evals.suites]
        config.evals.suites = [config.resolve(p) for p in config.evals.suites]
        config.evals.source = path
    return config
