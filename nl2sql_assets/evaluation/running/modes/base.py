"""The mode interface: what a mode says about itself, what it sets up for a run, and how its case
runs go. The runner owns everything a mode does not: selection, scoring, records and events.

A mode never handles a case record: its loop asks the runner to answer (or retrieve) a job, which
gives back what the job cost, and then to count it. That keeps the loops small enough to swap
(a concurrent loop under a shared cap, a loop that stops on environment errors, a shard of the
jobs in another process) without touching scoring or reporting.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from nl2sql_assets.config import ConfigError, GateSettings, LLMConfig, ProjectConfig
from nl2sql_assets.evaluation.running.selection import RoleRun

if TYPE_CHECKING:
    from nl2sql_assets.engine.pipeline import Engine

#: What the gate compares case by case: execution status, the same on the curated-off rerun,
#: or (where nothing executes) the case's status.
Measure = Literal["execution", "execution_generated", "status"]
#: Why a run stopped before its last case: the dollar cap, or the circuit breaker on
#: consecutive environment errors (an outage).
Stopped = Literal["max_cost", "env_errors"]


@dataclass(frozen=True)
class GateRules:
    """How the gate reads a mode: the measures it compares, how many cases may flip from pass to
    fail on each, and the level of McNemar's test on the flips (None: no test)."""

    measures: tuple[Measure, ...]
    max_lost: int = 0
    alpha: float | None = None


@dataclass
class ConfigRun:
    """One config of a run: the runtime that answers, its llm section and its tallies."""

    name: str
    llm: LLMConfig
    runtime: Any  # an Engine, or anything with its aask / aretrieve
    models: dict[str, str]
    generated_runtime: Any = None  # curated answers on: the curated-off runtime a verified answer is asked again on
    planned: int = 0
    completed: int = 0
    unknown_cost_calls: int = 0
    estimated_calls: int = 0
    token_sources: set[str] = field(default_factory=set)
    env_errors: dict[str, int] = field(default_factory=dict)
    stopped_by_cap: int = 0  # case runs the cost cap stopped in flight (no record, no verdict)
    engine: bool = False  # an outside engine asked through the engine contract (no model of ours)


@dataclass
class Lineup:
    """What a mode sets up for a run: the configs it answers with, and what the run records of it."""

    configs: dict[str, ConfigRun]
    settings: dict[str, Any] = field(default_factory=dict)  # recorded in the run's metadata
    curated: bool = False
    max_cost_usd: float | None = None
    #: what the mode serves on the run's own event loop while its case runs go out (mode plans:
    #: the gold LLM server), entered by the mode's ``execute``; None: nothing
    on_loop: Callable[[], contextlib.AbstractAsyncContextManager[None]] | None = None


@dataclass(frozen=True)
class RunSetup:
    """What a mode is given to set a run up: the project, its engine (every runtime derives from
    it, on its datasources and event bus), the role runs selected, and the request's options."""

    config: ProjectConfig
    engine: Engine
    runs: Sequence[RoleRun]
    llm: dict[str, LLMConfig] | None = None
    curated: bool | None = None
    max_cost_usd: float | None = None
    engines: dict[str, dict[str, Any]] | None = None  # config name -> engine entry (``engines.kinds``)


@dataclass(frozen=True)
class CaseJob:
    """One case run to make: a role run, in one pass, for one config (``index`` orders the records)."""

    index: int
    rr: RoleRun
    pass_index: int
    config: str


class Budget(Protocol):
    """A dollar budget: a run's own (``running.spend.MemoryLedger``) or one several runs share (the
    warehouse's SpendLedger, the cluster's PgSpendLedger). The rules are ``running.spend``'s."""

    def reserve(self, entry_id: str, cap: float) -> Literal["go", "wait", "stop"]: ...

    def spend(self, entry_id: str, usd: float, **info: Any) -> None: ...

    def reserve_call(self, entry_id: str, node: str, cap: float) -> Literal["go", "wait", "stop"]: ...

    def spend_call(self, entry_id: str, node: str, usd: float) -> None: ...

    def totals(self) -> dict[str, float]: ...


class CaseLoop(Protocol):
    """What a mode's loop drives. ``answer`` and ``retrieve`` make one case run (priced and
    scored) and return the dollars it spent; ``finish`` counts it (the record, the event, the
    caller's callback). A job is finished once, after it was answered or retrieved."""

    config: ProjectConfig
    lineup: Lineup
    budget: Budget | None
    spent: float
    #: set once the circuit breaker tripped (consecutive environment errors): start no more case runs
    broken: str | None

    async def answer(self, job: CaseJob) -> float: ...

    async def retrieve(self, job: CaseJob) -> float: ...

    def finish(self, job: CaseJob) -> None: ...

    def price_call(self, job: CaseJob, call: Any) -> float:
        """The dollars one model call of ``job`` cost (0.0 when it cannot be priced)."""
        ...

    def stopped_by_cap(self, job: CaseJob, spent: float) -> None:
        """Count a case run the cap stopped in flight: what it spent, no record, no verdict."""
        ...


class Mode:
    """A way to run a suite. Subclasses set the class attributes and implement ``lineup`` and
    ``execute``; the registry (``running.modes``) holds one instance of each."""

    name: ClassVar[str]
    #: The key-free config that runs this mode (a Dagster partition); None when the mode runs
    #: named LLM configs instead.
    config_name: ClassVar[str | None] = None
    #: Calls a paid provider: it needs a key and a dollar cap, and never runs in CI.
    needs_key: ClassVar[bool] = False
    #: Runs the llm sections it is given (``llm=``, ``--llm``, LLM configs).
    takes_llm: ClassVar[bool] = False
    #: Why ``llm=`` means nothing here (modes that do not take llm sections).
    no_llm: ClassVar[str] = ""
    #: Runs the SQL: execution accuracy is its headline, and answerability and determinism read
    #: what was executed. A mode that executes nothing is read by its cases' status.
    executes: ClassVar[bool] = True
    #: Curated answers may be on: then the gate also compares the curated-off reruns, and runs
    #: with curated answers on and off are not comparable.
    uses_curated: ClassVar[bool] = False
    #: The kinds of case it runs (``answer``, ``routing``, ``probe``); the runner leaves the
    #: others out and counts them in the run's ``left_out``.
    kinds: ClassVar[frozenset[str]] = frozenset({"answer", "routing", "probe"})
    #: Its jobs may be sharded over worker processes (``running.shards``): it spends nothing,
    #: so no cap has to hold across processes.
    shardable: ClassVar[bool] = False

    def select(self, runs: list[RoleRun]) -> list[RoleRun]:
        """The role runs this mode makes of those selected (by default all of them)."""
        return runs

    #: why ``select`` kept none of the runs it was given (the runner's error says it)
    nothing_selected: ClassVar[str] = "it runs none of the selected role runs"

    def lineup(self, setup: RunSetup) -> contextlib.AbstractContextManager[Lineup]:
        """Set the run up (runtimes, servers) and yield its lineup; tear it down on exit. Raises
        RunRefused, before anything is spent, when the run cannot go as asked."""
        raise NotImplementedError

    async def execute(self, loop: CaseLoop, jobs: Sequence[CaseJob]) -> Stopped | None:
        """Make the case runs; returns why the run stopped early, or None."""
        raise NotImplementedError

    def gate_rules(self, settings: GateSettings, curated: bool) -> GateRules:
        """What the gate compares for a run of this mode (by default: execution, no flip allowed)."""
        return GateRules(measures=("execution",))

    def series_of(self, roles: Sequence[str], curated: bool) -> tuple[tuple[str, ...], bool | None]:
        """Beside the suites and schemas, what makes two recorded runs one series: the roles and
        the curated setting where they matter, else nothing."""
        return (), None

    def __repr__(self) -> str:
        return f"<mode {self.name}>"


def models_of(llm: LLMConfig, nodes: Sequence[str]) -> dict[str, str]:
    """Node -> the model the llm section gives it (nodes it gives none are left out)."""
    out: dict[str, str] = {}
    for node in nodes:
        try:
            out[node] = llm.for_node(node).model
        except ConfigError:
            continue
    return out


@contextlib.contextmanager
def nothing_to_tear_down(lineup: Lineup) -> Iterator[Lineup]:
    """A lineup that needs no teardown, as the context manager ``Mode.lineup`` returns."""
    yield lineup
