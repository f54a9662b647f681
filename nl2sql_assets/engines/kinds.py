"""Engine kinds, registered once: how an ``engines:`` entry of nl2sql.yaml (or ``--engine``)
becomes an ``NL2SQLEngine``. Adding a kind is one ``EngineKind`` and one entry in ``ENGINE_KINDS``.

``http`` is an engine behind the HTTP contract; ``python`` an installed class found by entry
point (group ``nl2sql.engines``), checked against the interface before any case runs.
"""

from __future__ import annotations

import importlib.metadata
import inspect
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError

from nl2sql_assets.config import ConfigError, ProjectConfig, StrictModel, validate_config_name
from nl2sql_assets.engines.contract import NL2SQLEngine
from nl2sql_assets.engines.http_client import HttpEngine, HttpEngineConfig
from nl2sql_assets.errors import RunRefused, validation_summary

ENTRY_POINT_GROUP = "nl2sql.engines"


class EngineConfigError(RunRefused):
    """An engine entry that cannot be used: the message names the engine and the field."""


class PythonEngineConfig(StrictModel):
    """``{kind: python, entry_point: NAME, options: {...}}``: the class the installed entry point
    names, built with ``options`` as keyword arguments."""

    kind: Literal["python"] = "python"
    entry_point: str = Field(min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)
    reports_cost: bool = False


class EngineKind:
    """One kind of engine: its config model, how to build it, and how a record names it."""

    name: ClassVar[str]
    model: ClassVar[type[StrictModel]]

    def build(self, config: Any) -> NL2SQLEngine:
        raise NotImplementedError

    def describe(self, config: Any) -> str:
        raise NotImplementedError

    def reports_cost(self, config: Any) -> bool:
        return bool(getattr(config, "reports_cost", False))


class HttpKind(EngineKind):
    name: ClassVar[str] = "http"
    model: ClassVar[type[StrictModel]] = HttpEngineConfig

    def build(self, config: Any) -> NL2SQLEngine:
        return HttpEngine(config)

    def describe(self, config: Any) -> str:
        return f"http:{config.url}"


def check_engine_class(name: str, cls: Any) -> None:
    """Refuse, naming the entry point, a class that is not an engine: it must be a class whose
    instances have ``ask(question, role, datasource=None, conversation=None)``."""
    if not inspect.isclass(cls):
        raise EngineConfigError(f"engine entry point {name!r} is {type(cls).__name__} {cls!r}, not a class")
    ask = getattr(cls, "ask", None)
    if not callable(ask):
        raise EngineConfigError(f"engine entry point {name!r} ({cls.__module__}.{cls.__qualname__}) has no ask method: "
                                "an engine has ask(question, role, datasource=None, conversation=None) -> EngineReply")
    params = list(inspect.signature(ask).parameters)
    wanted = ["self", "question", "role", "datasource", "conversation"]
    if params[:5] != wanted:
        raise EngineConfigError(f"engine entry point {name!r} ({cls.__module__}.{cls.__qualname__}): ask takes "
                                f"({', '.join(params)}), expected ({', '.join(wanted)})")
    if inspect.iscoroutinefunction(ask):
        raise EngineConfigError(f"engine entry point {name!r}: ask must be a plain method returning an EngineReply, "
                                "not a coroutine function")


def find_entry_point(name: str, group: str = ENTRY_POINT_GROUP) -> type:
    """The class an installed entry point of ``group`` names; refused clearly when there is
    none, when it fails to load, or when it is not an engine."""
    found = [ep for ep in importlib.metadata.entry_points(group=group) if ep.name == name]
    if not found:
        known = sorted(ep.name for ep in importlib.metadata.entry_points(group=group))
        raise EngineConfigError(f"no engine entry point {name!r} in group {group} (installed: {known or 'none'})")
    ep = found[0]
    try:
        cls = ep.load()
    except Exception as exc:
        raise EngineConfigError(f"engine entry point {name!r} = {ep.value!r} could not be loaded: "
                                f"{type(exc).__name__}: {exc}") from exc
    check_engine_class(name, cls)
    return cls


class PythonKind(EngineKind):
    name: ClassVar[str] = "python"
    model: ClassVar[type[StrictModel]] = PythonEngineConfig

    def build(self, config: Any) -> NL2SQLEngine:
        cls = find_entry_point(config.entry_point)
        try:
            engine = cls(**config.options)
        except Exception as exc:
            raise EngineConfigError(f"engine entry point {config.entry_point!r} could not be built with options "
                                    f"{sorted(config.options)}: {type(exc).__name__}: {exc}") from exc
        return engine

    def describe(self, config: Any) -> str:
        return f"python:{config.entry_point}"


#: Every engine kind by name.
ENGINE_KINDS: dict[str, EngineKind] = {kind.name: kind for kind in (HttpKind(), PythonKind())}


def parse_engine_config(name: str, data: Mapping[str, Any] | StrictModel, where: str = "engines") -> StrictModel:
    """One engine entry validated by its kind's model; errors name the entry and the field."""
    if isinstance(data, StrictModel):
        return data
    if not isinstance(data, Mapping):
        raise EngineConfigError(f"{where}.{name}: expected a mapping with kind, got {type(data).__name__}")
    kind_name = data.get("kind", "http")
    kind = ENGINE_KINDS.get(str(kind_name))
    if kind is None:
        raise EngineConfigError(f"{where}.{name}.kind: unknown engine kind {kind_name!r}: "
                                f"expected {', '.join(ENGINE_KINDS)}")
    try:
        return kind.model.model_validate({**data, "kind": kind.name})
    except ValidationError as exc:
        raise EngineConfigError(f"{where}.{name}: {validation_summary(exc)}") from None


def check_engine_entries(config: ProjectConfig) -> ProjectConfig:
    """Every ``engines:`` entry of a loaded project checked by its kind (the config file's model
    knows no kinds): a bad one is a ConfigError naming the file, the entry and the field."""
    for name, entry in config.engines.items():
        try:
            parse_engine_config(name, entry)
        except EngineConfigError as exc:
            raise ConfigError(f"{config.source or 'nl2sql.yaml'}: {exc}") from None
    return config


def kind_of(config: StrictModel) -> EngineKind:
    return ENGINE_KINDS[str(config.kind)]  # type: ignore[attr-defined]


def engines_from_specs(specs: list[str], named: Mapping[str, Any], taken: list[str] | None = None) -> dict[str, Any]:
    """``--engine NAME=URL`` (an HTTP engine) or ``--engine NAME`` (an entry of nl2sql.yaml's
    ``engines``) -> config name -> engine entry; a name given twice is refused."""
    out: dict[str, Any] = {}
    for spec in specs:
        name, sep, url = spec.partition("=")
        name = name.strip()
        if sep:
            if not url.startswith(("http://", "https://")):
                raise EngineConfigError(f"--engine {spec}: expected NAME=URL with an http(s) URL")
            entry: Any = {"kind": "http", "url": url}
        elif name in named:
            entry = named[name]
        else:
            raise EngineConfigError(f"--engine {spec}: no engine {name!r} under engines in nl2sql.yaml "
                                    f"(named: {sorted(named) or 'none'}); or give NAME=URL")
        validate_config_name(name)
        if name in out or name in (taken or []):
            raise EngineConfigError(f"--engine {spec}: a config named {name!r} is given twice")
        parse_engine_config(name, entry, where="--engine")
        out[name] = dict(entry)
    return out
