"""The scorer registry: the built-ins plus plugins (entry points or ``add``), checked on the way in,
and built into scorer objects for the mode a run is in.

Scorers are looked up by name from evals.yaml, so a plugin that speaks another interface
version must fail loudly when it is registered, not half-way through a paid run.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.judging.scorers import BUILTIN_SCORERS, INTERFACE_VERSION, Scorer, ScorerSummary
from nl2sql_assets.evaluation.neighbours.scorer import NeighbourMatch
from nl2sql_assets.evaluation.running.modes import MODES

ENTRY_POINT_GROUP = "nl2sql.scorers"

#: The built-in scorers: judging's six, then neighbour_match (a stage above judging: it grades on
#: neighbour databases; a run with ``neighbours:`` adds it to its scorers).
NEIGHBOUR_SCORER = "neighbour_match"
BUILTINS: dict[str, type] = {**BUILTIN_SCORERS, NEIGHBOUR_SCORER: NeighbourMatch}


class ScorerError(UserError, ValueError):
    """A scorer could not be registered or built; the message names it and says why."""


def _describe(cls: Any) -> str:
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', repr(cls))}"


def check_scorer_class(name: str, cls: Any) -> None:
    """Raise ScorerError unless ``cls`` has what interface version 1 asks for."""
    where = f"scorer {name!r} ({_describe(cls)})"
    version = getattr(cls, "interface_version", None)
    if version is None:
        raise ScorerError(f"{where}: has no interface_version (this package speaks version {INTERFACE_VERSION})")
    if version != INTERFACE_VERSION:
        raise ScorerError(
            f"{where}: interface_version is {version!r}, but this package speaks version {INTERFACE_VERSION}"
        )
    config_model = getattr(cls, "config_model", None)
    if not (inspect.isclass(config_model) and issubclass(config_model, BaseModel)):
        raise ScorerError(f"{where}: config_model must be a pydantic model class, got {config_model!r}")
    modes = getattr(cls, "modes", None)
    if not isinstance(modes, (frozenset, set)) or not modes or not set(modes) <= set(MODES):
        raise ScorerError(f"{where}: modes must be a non-empty frozenset of {sorted(MODES)}, got {modes!r}")
    for attr in ("from_config", "score"):
        if not callable(getattr(cls, attr, None)):
            raise ScorerError(f"{where}: has no callable {attr}")
    if hasattr(cls, "summarize"):  # optional: a scorer that sums its scores up names its summary model
        summary_model = getattr(cls, "summary_model", None)
        if not callable(cls.summarize) or not (inspect.isclass(summary_model) and issubclass(summary_model, ScorerSummary)):
            raise ScorerError(f"{where}: summarize needs a summary_model, a ScorerSummary subclass, got {summary_model!r}")


#: Plugins registered in code (``register_scorer``), by name: every default registry has them.
_REGISTERED: dict[str, type] = {}


def register_scorer(name: str, cls: type, *, replace: bool = False) -> None:
    """Register a plugin scorer in code, for every run of this process (and the boards that read
    its summary). A built-in's name is taken; ``replace`` overrides an earlier registration."""
    if name in BUILTINS:
        raise ScorerError(f"scorer {name!r} is a built-in; choose another name")
    existing = _REGISTERED.get(name)
    if existing is not None and existing is not cls and not replace:
        raise ScorerError(
            f"scorer {name!r} is already registered ({_describe(existing)}); pass replace=True to override it"
        )
    check_scorer_class(name, cls)
    _REGISTERED[name] = cls


def unregister_scorer(name: str) -> None:
    """Forget a scorer ``register_scorer`` added (a test's plugin, when the test is done)."""
    _REGISTERED.pop(name, None)


def scorer_class(name: str) -> type | None:
    """The scorer class a stored board's scorer name stands for (a built-in, a plugin registered
    in code, or an installed entry point), or None when it is not installed here."""
    return BUILTINS.get(name) or _REGISTERED.get(name) or _entry_point_classes().get(name)


@functools.cache
def _entry_point_classes() -> dict[str, type]:
    """Installed plugins, loaded once, for reading boards: one that fails to load is left out
    (running a scorer that fails to load is an error, in ``ScorerRegistry.default``)."""
    found: dict[str, type] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            found[ep.name] = ep.load()
        except Exception:
            continue
    return found


class ScorerRegistry:
    """Scorer classes by name. ``build`` turns names into scorer objects for one run."""

    def __init__(self) -> None:
        self._classes: dict[str, type] = {}

    @classmethod
    def builtins(cls) -> ScorerRegistry:
        registry = cls()
        for name, scorer_cls in BUILTINS.items():
            registry.add(name, scorer_cls)
        return registry

    @classmethod
    def default(cls) -> ScorerRegistry:
        """The built-ins, the plugins registered in code, then every entry point of group
        ``nl2sql.scorers``."""
        registry = cls.builtins()
        for name, scorer_cls in _REGISTERED.items():
            registry.add(name, scorer_cls)
        registry.load_entry_points()
        return registry

    def copy(self) -> ScorerRegistry:
        """A registry with the same scorers, to add a run's own to without changing this one."""
        other = ScorerRegistry()
        other._classes = dict(self._classes)
        return other

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> list[str]:
        """Register each installed plugin; a broken one is an error naming the entry point."""
        added: list[str] = []
        for ep in importlib.metadata.entry_points(group=group):
            try:
                scorer_cls = ep.load()
            except Exception as exc:
                raise ScorerError(
                    f"entry point {ep.name!r} = {ep.value!r} (group {group}) could not be loaded: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            try:
                self.add(ep.name, scorer_cls)
            except ScorerError as exc:
                raise ScorerError(f"entry point {ep.name!r} = {ep.value!r} (group {group}): {exc}") from None
            added.append(ep.name)
        return added

    def add(self, name: str, cls: type, *, replace: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise ScorerError(f"a scorer needs a non-empty name, got {name!r}")
        check_scorer_class(name, cls)
        existing = self._classes.get(name)
        if existing is not None and existing is not cls and not replace:
            raise ScorerError(
                f"scorer {name!r} is already registered ({_describe(existing)}); pass replace=True to override it"
            )
        self._classes[name] = cls

    def names(self) -> list[str]:
        return list(self._classes)

    def get(self, name: str) -> type:
        try:
            return self._classes[name]
        except KeyError:
            raise ScorerError(f"unknown scorer {name!r}; registered scorers: {self.names()}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._classes

    def build(
        self,
        names: Iterable[str],
        mode: str,
        configs: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        project: ProjectConfig | None = None,
    ) -> dict[str, Scorer]:
        """One scorer object per name, from its config model's defaults. With ``project``, a
        config model that has ``from_project`` takes its fields from the project (routing's
        ``max_datasources`` from the routing settings); ``configs`` may set fields by name.
        Scorers that cannot score ``mode`` are left out."""
        if mode not in MODES:
            raise ScorerError(f"unknown mode {mode!r}; expected one of {sorted(MODES)}")
        wanted = list(dict.fromkeys(names))
        unknown = [n for n in wanted if n not in self._classes]
        if unknown:
            raise ScorerError(f"unknown scorer(s) {unknown}; registered scorers: {self.names()}")
        built: dict[str, Scorer] = {}
        for name in wanted:
            cls: Any = self._classes[name]
            if mode not in cls.modes:
                continue
            from_project = getattr(cls.config_model, "from_project", None)
            fields = dict(from_project(project)) if project is not None and callable(from_project) else {}
            fields.update((configs or {}).get(name, {}))
            known = set(cls.config_model.model_fields)
            fields = {k: v for k, v in fields.items() if k in known}
            try:
                cfg = cls.config_model(**fields)
            except ValidationError as exc:
                raise ScorerError(f"scorer {name!r}: bad config: {exc}") from None
            built[name] = cls.from_config(cfg)
        return built
