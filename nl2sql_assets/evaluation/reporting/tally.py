"""A board's numbers taken in one pass over its case records, so a board can be built from a
stream (the JSON Lines a run writes) without holding the records.

``BoardTally.add`` reads each record once and keeps counters, plus what a number cannot be
computed without: one small entry per case run for pass^k and determinism (a verdict or the
output's digest, by case), the latencies for the percentiles, and the scores of the scorers that
summarize themselves. Fed the records in the run's order, ``board`` gives exactly the board the
records would give held in a list (float sums are added in the same order).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nl2sql_assets.engine.result import QUESTION_NOT_ANSWERABLE
from nl2sql_assets.evaluation.judging import stats
from nl2sql_assets.evaluation.judging.scorers import Scored
from nl2sql_assets.evaluation.judging.scorers import execution_lenient_status as execution_lenient
from nl2sql_assets.evaluation.judging.stats import Rate
from nl2sql_assets.evaluation.reporting.board import (
    SUMMARY_COLUMNS,
    Accuracy,
    Answerability,
    Averages,
    Board,
    Cost,
    CuratedHits,
    Determinism,
    Latency,
    NodeLatency,
    PassK,
    Retries,
    ScorerTally,
    Summary,
)
from nl2sql_assets.evaluation.reporting.coverage import Coverage, DomainRates
from nl2sql_assets.evaluation.reporting.uplift import CandidateUplift
from nl2sql_assets.evaluation.running.modes import get_mode
from nl2sql_assets.evaluation.running.results import CaseRecord, ConfigMeta, RunMeta
from nl2sql_assets.evaluation.running.scorers import scorer_class
from nl2sql_assets.llm.calls import TokenSource, Usage, combine_sources

Verdictor = Callable[[CaseRecord], str | None]


def case_key(record: CaseRecord) -> str:
    """A case run's identity across passes and across runs."""
    return f"{record.case_id}@{record.role}"


def generated_status(record: CaseRecord) -> str:
    """The generated path: the curated-off rerun when the answer came from a verified query."""
    return record.generated.status if record.generated is not None else record.status


def lenient_status(record: CaseRecord) -> str:
    return record.lenient_status if record.lenient_status is not None else record.status


def execution_lenient_status(record: CaseRecord) -> str | None:
    """Execution accuracy with result_match read leniently (see judging's ``execution_lenient_status``)."""
    return execution_lenient(record.scores, record.execution_status)


def overall_status(record: CaseRecord) -> str:
    return record.status


def execution_status(record: CaseRecord) -> str | None:
    return record.execution_status


def is_query(record: CaseRecord) -> bool:
    """A run that asks the engine a question (answer and routing cases; not a policy probe)."""
    return record.kind != "probe"


def ran_sql(record: CaseRecord) -> bool:
    """An allowed question on an answerable case, in a mode that executes: its SQL should run."""
    return record.kind == "answer" and record.expected == "allowed" and get_mode(record.mode).executes


def _counted(value: str | None) -> bool:
    return value is not None and value != "skip"


@dataclass
class RateCount:
    """Passed of total, growing one verdict at a time (a verdict of None or skip is not counted)."""

    passed: int = 0
    total: int = 0

    def add(self, value: str | None) -> None:
        if _counted(value):
            self.total += 1
            self.passed += value == "pass"

    def rate(self) -> Rate:
        return Rate.of(self.passed, self.total)


class PassRuns:
    """Each case's verdicts by pass (pass^k, the comparison of configs)."""

    def __init__(self) -> None:
        self.runs: dict[str, list[tuple[int, bool]]] = defaultdict(list)

    def add(self, record: CaseRecord, value: str | None) -> None:
        if _counted(value):
            self.runs[case_key(record)].append((record.pass_index, value == "pass"))

    def by_key(self) -> dict[str, list[bool]]:
        return {key: [ok for _, ok in sorted(values)] for key, values in self.runs.items()}

    def rate(self, k: int) -> Rate:
        results = {key: runs for key, runs in self.by_key().items() if len(runs) >= k}
        if not results:
            return Rate.of(0, 0)
        passed = sum(1 for runs in results.values() if all(runs[:k]))
        return Rate.of(passed, len(results)).model_copy(update={"rate": float(stats.pass_k(results, k))})


@dataclass
class DomainCount:
    query_runs: int = 0
    ran: int = 0
    succeeded: int = 0
    accuracy: RateCount = field(default_factory=RateCount)
    lenient: RateCount = field(default_factory=RateCount)
    probes: int = 0


@dataclass
class ScoreCount:
    applied: int = 0
    errored: int = 0
    passed: int = 0
    failed: int = 0
    value_sum: float = 0.0
    values: int = 0
    runs: list[Scored] | None = None  # kept only for a scorer that summarizes itself


@dataclass
class Spending:
    """What the runs that spent tokens add up to (each record and its curated-off rerun)."""

    tokens: dict[str, dict[str, int]] = field(default_factory=dict)
    total_usd: float = 0
    unknown: int = 0
    estimated: int = 0
    sources: set[TokenSource] = field(default_factory=set)

    def add(self, record: CaseRecord) -> None:
        for one in (record, record.generated) if record.generated is not None else (record,):
            for node, usage in one.usage.items():
                counts = self.tokens.setdefault(node, dict.fromkeys(Usage.model_fields, 0))
                for name in Usage.model_fields:
                    counts[name] += getattr(usage, name)
            if one.cost_usd is not None:
                self.total_usd += one.cost_usd
            self.unknown += one.unknown_cost_calls
            self.estimated += one.estimated_calls
            if one.token_source is not None:
                self.sources.add(one.token_source)


class BoardTally:
    """One config's board, added to one record at a time (see the module's docstring)."""

    def __init__(self, config: str, meta: RunMeta, scorer_classes: Mapping[str, type] | None = None) -> None:
        self.config = config
        self.meta = meta
        self.classes = dict(scorer_classes or {})
        self.executes = get_mode(meta.mode).executes
        self.records = 0
        self.asked = 0  # runs that asked a question and were not skipped (outages included)
        self.roles: dict[str, dict[str, int]] = {}
        self.total = dict.fromkeys(SUMMARY_COLUMNS, 0)
        self.models: dict[str, str] = {}
        self.cases: dict[tuple[str, str], tuple[str | None, bool]] = {}  # (suite, case) -> (fingerprint, query)
        self.domains: dict[str, DomainCount] = defaultdict(DomainCount)
        self.all_overall = PassRuns()  # every record's verdict by case: the comparison of configs
        # the scored runs (not skipped, not an outage)
        self.rates = {name: RateCount() for name in ("overall", "lenient", "generated", "execution",
                                                     "execution_lenient")}
        self.pass_runs = {name: PassRuns() for name in ("overall", "lenient", "execution", "execution_lenient")}
        self.by_tag: dict[str, RateCount] = defaultdict(RateCount)
        self.by_difficulty: dict[str, RateCount] = defaultdict(RateCount)
        self.by_source: dict[str, RateCount] = defaultdict(RateCount)
        self.generated_by_source: dict[str, RateCount] = defaultdict(RateCount)
        self.scores: dict[str, ScoreCount] = {}
        self.unanswerable = self.declined = self.answerable = self.wrongly = 0
        self.errors: dict[str, int] = defaultdict(int)
        self.retries = self.with_retries = 0
        self.outputs: dict[str, list[tuple[int, tuple[str | None, str | None]]]] = defaultdict(list)
        self.ran = self.succeeded = 0
        self.uplift_runs = self.uplift_selected = self.uplift_first = 0
        self.improved = self.worsened = 0
        self.extra_s = self.uplift_latency = 0.0
        # the scored runs that ask a question
        self.queries = 0
        self.query_tokens = [0, 0]  # input, output tokens over the question runs
        self.query_sources: list[str | None] = []
        self.query_oracle_s: list[float] = []
        self.warm: list[float] = []
        self.cold: list[float] = []
        self.warm_nodes: dict[str, list[float]] = defaultdict(list)
        self.cold_nodes: dict[str, list[float]] = defaultdict(list)
        self.oracle: set[tuple[str, float]] = set()
        self.exact = self.paraphrase = 0
        # spending: the scored runs', then the outages' (added last, as a list of them reads)
        self.spending = Spending()
        self.outages: list[CaseRecord] = []
        self.env_errors: dict[str, int] = defaultdict(int)

    # ------------------------------------------------------------ one record

    def add(self, record: CaseRecord) -> None:
        self.records += 1
        counts = self.roles.setdefault(record.role, dict.fromkeys(SUMMARY_COLUMNS, 0))
        column = "env_error" if record.env_error is not None else record.status
        counts[column] += 1
        self.total[column] += 1
        for node, model in record.models.items():
            self.models.setdefault(node, model)
        self.cases.setdefault((record.suite, record.case_id), (record.fingerprint, is_query(record)))
        self.all_overall.add(record, record.status)
        self.asked += is_query(record) and record.status != "skip"
        if record.domain is not None and record.status != "skip":
            self._add_domain(self.domains[record.domain], record)
        if record.env_error is not None:
            self.outages.append(record)
            self.env_errors[record.env_error] += 1
        elif record.status != "skip":
            self._add_scored(record)

    def _add_domain(self, domain: DomainCount, record: CaseRecord) -> None:
        if not is_query(record):
            domain.probes += 1
            return
        domain.query_runs += 1
        if ran_sql(record):
            domain.ran += 1
            domain.succeeded += record.result_status == "success"
        domain.accuracy.add(record.execution_status)
        domain.lenient.add(execution_lenient_status(record))

    def _add_scored(self, record: CaseRecord) -> None:
        verdicts: dict[str, str | None] = {
            "overall": record.status,
            "lenient": lenient_status(record),
            "generated": generated_status(record),
            "execution": record.execution_status,
            "execution_lenient": execution_lenient_status(record),
        }
        for name, rate in self.rates.items():
            rate.add(verdicts[name])
        for name, runs in self.pass_runs.items():
            runs.add(record, verdicts[name])
        for tag in record.tags:
            self.by_tag[tag].add(record.status)
        if record.difficulty:
            self.by_difficulty[record.difficulty].add(record.status)
        self.by_source[record.source].add(record.status)
        self.generated_by_source[record.source].add(verdicts["generated"])
        self._add_scores(record)
        if self.executes:
            if record.expected == "unanswerable":
                self.unanswerable += 1
                self.declined += record.error_code == QUESTION_NOT_ANSWERABLE
            elif record.expected == "allowed":
                self.answerable += 1
                self.wrongly += record.error_code == QUESTION_NOT_ANSWERABLE
        if record.error_code:
            self.errors[record.error_code] += 1
        self.retries += record.retries
        self.with_retries += record.retries > 0
        if self.meta.passes >= 2:
            self.outputs[case_key(record)].append((record.pass_index, _output(record)))
        if ran_sql(record):
            self.ran += 1
            self.succeeded += record.result_status == "success"
        if record.candidate_count > 1 and record.first_candidate_status is not None:
            self.uplift_runs += 1
            selected, first = record.status == "pass", record.first_candidate_status == "pass"
            self.uplift_selected += selected
            self.uplift_first += first
            self.improved += selected and not first
            self.worsened += first and not selected
            self.extra_s += record.candidate_extra_s or 0.0
            self.uplift_latency += record.latency_s
        self.spending.add(record)
        if is_query(record):
            self.queries += 1
            (self.cold if record.warmup else self.warm).append(record.latency_s)
            nodes = self.cold_nodes if record.warmup else self.warm_nodes
            for node, seconds in record.timings.items():
                nodes[node].append(seconds)
            if record.oracle_latency_s is not None:
                self.oracle.add((record.case_id, record.oracle_latency_s))
                self.query_oracle_s.append(record.oracle_latency_s)
            self.query_tokens[0] += sum(u.input_tokens for u in record.usage.values())
            self.query_tokens[1] += sum(u.output_tokens for u in record.usage.values())
            self.query_sources.append(record.token_source)
            self.exact += record.curated_match == "exact"
            self.paraphrase += record.curated_match == "paraphrase"

    def _add_scores(self, record: CaseRecord) -> None:
        for name, score in record.scores.items():
            count = self.scores.get(name)
            if count is None:
                cls = self.classes.get(name) or scorer_class(name)
                count = self.scores[name] = ScoreCount(runs=[] if callable(getattr(cls, "summarize", None)) else None)
            if count.runs is not None:
                count.runs.append(Scored(case_id=record.case_id, role=record.role, pass_index=record.pass_index,
                                         score=score))
            if not score.applies:
                continue
            count.applied += 1
            if score.errored:
                count.errored += 1
            elif score.passed:
                count.passed += 1
            else:
                count.failed += 1
            if score.value is not None:
                count.value_sum += score.value
                count.values += 1

    # ------------------------------------------------------------ the board

    def board(self, results: list[CaseRecord] | None = None) -> Board:
        """The board of every record added (``results``: the records to keep on it, if any)."""

        meta = self.meta
        spending = self.spending
        for record in self.outages:  # after the scored runs, as they were summed from a list
            spending.add(record)
        self.outages = []
        config_meta = meta.configs.get(self.config, ConfigMeta())
        k = max(1, meta.passes)
        accuracy = Accuracy(
            overall=self.rates["overall"].rate(),
            lenient=self.rates["lenient"].rate(),
            generated=self.rates["generated"].rate(),
            execution=self.rates["execution"].rate(),
            execution_lenient=self.rates["execution_lenient"].rate(),
            pass_k=PassK(k=k, **{name: runs.rate(k) for name, runs in self.pass_runs.items()}),
            by_tag=_rates(self.by_tag),
            by_difficulty=_rates(self.by_difficulty),
            by_source=_rates(self.by_source),
            generated_by_source=_rates(self.generated_by_source),
        )
        tallies: dict[str, ScorerTally] = {}
        order = list(meta.scorers)
        for name in order + sorted(set(self.scores) - set(order)):
            count = self.scores.get(name, ScoreCount())
            if not (count.applied or name in order):
                continue
            cls = self.classes.get(name) or scorer_class(name)
            summarize = getattr(cls, "summarize", None)
            summary = summarize(count.runs or []) if callable(summarize) else None
            tallies[name] = ScorerTally(
                applied=count.applied, errored=count.errored, passed=count.passed, failed=count.failed,
                mean=count.value_sum / count.values if count.values else None,
                summary=summary.model_dump(mode="json") if summary is not None else None,
            )
        answerability = None
        if self.executes and (self.unanswerable or self.answerable):
            answerability = Answerability(correctly_declined=Rate.of(self.declined, self.unanswerable),
                                          wrongly_declined=Rate.of(self.wrongly, self.answerable))
        models = dict(config_meta.models) or dict(self.models)
        uplift = None
        if self.uplift_runs:
            n = self.uplift_runs
            uplift = CandidateUplift(
                runs=n, selected=Rate.of(self.uplift_selected, n), first=Rate.of(self.uplift_first, n),
                uplift=(self.uplift_selected - self.uplift_first) / n, improved=self.improved,
                worsened=self.worsened, p_value=stats.mcnemar_exact(self.worsened, self.improved),
                extra_latency_ms=1000.0 * self.extra_s / n,
                latency_share=self.extra_s / self.uplift_latency if self.uplift_latency > 0 else 0.0,
            )
        coverage = None
        if self.cases and all(fp is not None for fp, _ in self.cases.values()):
            by_print: dict[str, list[str]] = defaultdict(list)
            for (suite, case_id), (fp, _) in self.cases.items():
                by_print[str(fp)].append(f"{suite}:{case_id}")
            coverage = Coverage(
                query_count=sum(1 for _, query in self.cases.values() if query),
                probe_count=sum(1 for _, query in self.cases.values() if not query),
                unique_case_count=len(by_print),
                duplicates=sorted(sorted(ids) for ids in by_print.values() if len(ids) > 1),
            )
        return Board(
            config=self.config,
            accuracy=accuracy,
            summary=Summary(roles=dict(sorted(self.roles.items())), total=self.total),
            scores=tallies,
            answerability=answerability,
            tokens_by_node={node: Usage(**counts) for node, counts in sorted(spending.tokens.items())},
            cost=_cost(spending, self.queries, config_meta),
            latency=self._latency(),
            averages=self._averages(),
            curated=CuratedHits(runs=self.queries, exact=self.exact, paraphrase=self.paraphrase,
                                hit_rate=(self.exact + self.paraphrase) / self.queries if self.queries else None)
            if meta.curated else None,
            retries=Retries(total=self.retries, cases_with_retries=self.with_retries),
            errors_by_code=dict(sorted(self.errors.items())),
            env_errors=dict(sorted(self.env_errors.items())),
            determinism=self._determinism(),
            models=dict(sorted(models.items())),
            planned_cases=config_meta.planned_cases or self.records,
            completed_cases=config_meta.completed_cases or self.records,
            stopped_by_cap=config_meta.stopped_by_cap,
            execution_success=Rate.of(self.succeeded, self.ran) if self.ran else None,
            by_domain={name: DomainRates(
                query_runs=d.query_runs,
                execution_success=Rate.of(d.succeeded, d.ran) if d.ran else None,
                accuracy=d.accuracy.rate() if d.accuracy.total else None,
                lenient=d.lenient.rate() if d.lenient.total else None,
                probes=d.probes,
            ) for name, d in sorted(self.domains.items())},
            coverage=coverage,
            candidate_uplift=uplift,
            query_runs=self.asked,
            results=list(results or []),
        )

    def _latency(self) -> Any:

        if not self.queries:
            return Latency()
        warm, nodes = (self.warm, self.warm_nodes) if self.warm else (self.cold, self.cold_nodes)
        mean, p50, p95, top = _percentiles(warm)
        by_node = {}
        for node, values in sorted(nodes.items()):
            _, n50, n95, nmax = _percentiles(values)
            by_node[node] = NodeLatency(p50=n50, p95=n95, max=nmax)
        oracle = sorted(self.oracle)
        return Latency(mean=mean, p50=p50, p95=p95, max=top, warmup_runs=len(self.cold),
                       warmup_max=max(self.cold, default=0.0), by_node=by_node,
                       oracle_p50=statistics.median(t for _, t in oracle) if oracle else None)

    def _averages(self) -> Any:
        """Spec 003's averages over the question runs (None where there were none)."""

        if not self.queries:
            return None
        service = self.warm or self.cold
        calls = [s for s in self.query_sources if s is not None]
        return Averages(
            question_runs=self.queries,
            average_input_tokens=self.query_tokens[0] / self.queries,
            average_output_tokens=self.query_tokens[1] / self.queries,
            token_source=combine_sources(calls) if calls else None,
            average_service_latency_ms=1000 * sum(service) / len(service) if service else None,
            average_oracle_latency_ms=(1000 * sum(self.query_oracle_s) / len(self.query_oracle_s)
                                       if self.query_oracle_s else None),
            oracle_timed_runs=len(self.query_oracle_s))

    def _determinism(self) -> Any:

        if self.meta.passes < 2:
            return None
        multi = {key: [v for _, v in sorted(values)] for key, values in self.outputs.items() if len(values) > 1}
        if not multi:
            return None
        found = stats.determinism(multi)
        return Determinism(deterministic_cases=int(found.deterministic_cases), total_cases=int(found.total_cases),
                           rate=float(found.rate), nondeterministic=sorted(found.nondeterministic))


def _rates(counts: Mapping[str, RateCount]) -> dict[str, Rate]:
    return {key: count.rate() for key, count in sorted(counts.items())}


def _cost(spending: Spending, queries: int, config_meta: ConfigMeta) -> Any:

    total = spending.total_usd
    return Cost(total_usd=total, per_case_usd=total / queries if queries else 0.0,
                unknown_cost_calls=max(config_meta.unknown_cost_calls, spending.unknown),
                estimated_calls=max(config_meta.estimated_calls, spending.estimated),
                token_source=config_meta.token_source or combine_sources(spending.sources))


def _percentiles(values: list[float]) -> tuple[float, float, float, float]:
    """(mean, p50, p95, max)."""
    summary = stats.latency_summary(list(values))
    get = summary.get if isinstance(summary, dict) else lambda name: getattr(summary, name)
    return float(get("mean")), float(get("p50")), float(get("p95")), float(max(values))


def _output(record: CaseRecord) -> tuple[str | None, str | None]:
    """What must repeat across passes: the SQL and rows, or in a mode that executes nothing
    (retrieval) what was sent and the routing ranking."""
    if not get_mode(record.mode).executes:
        sent = None if record.retrieval is None else json.dumps(record.retrieval, sort_keys=True)
        return sent, None if record.routed is None else ",".join(record.routed)
    return record.sql, record.rows_sha256
