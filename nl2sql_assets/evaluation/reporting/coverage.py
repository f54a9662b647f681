"""What a board covers and how the SQL fared beside whether it was right: coverage counts (query
cases, probes, unique cases), the execution success rate (the SQL ran, right or wrong), and both
rates per domain (a case's ``domain``, else its datasource).

Coverage is counted from the case definitions a run asked (each record carries its case's kind and
fingerprint: question plus expected SQL or probe), never from what the engine produced, so two
cases that ask the same thing count once in ``unique_case_count``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pydantic import Field

from nl2sql_assets.config import StrictModel
from nl2sql_assets.evaluation.judging.scorers import execution_lenient_status
from nl2sql_assets.evaluation.judging.stats import Rate, rate_cell
from nl2sql_assets.evaluation.running.modes import get_mode
from nl2sql_assets.evaluation.running.results import CaseRecord


class Coverage(StrictModel):
    """Cases a board covers: query cases (answer and routing), policy probes, and how many of
    them are distinct definitions; ``duplicates`` names the cases that share one."""

    query_count: int = 0
    probe_count: int = 0
    unique_case_count: int = 0
    duplicates: list[list[str]] = Field(default_factory=list)


class DomainRates(StrictModel):
    """One domain's query runs: how many, the share whose SQL ran (execution success), and the
    share that was right (execution accuracy, strict and lenient); ``probes`` counts its probe runs."""

    query_runs: int = 0
    execution_success: Rate | None = None
    accuracy: Rate | None = None
    lenient: Rate | None = None
    probes: int = 0


def is_query(record: CaseRecord) -> bool:
    """A run that asks the engine a question (answer and routing cases; not a policy probe)."""
    return record.kind != "probe"


def _ran(record: CaseRecord) -> bool:
    """An allowed question on an answerable case, in a mode that executes: its SQL should run."""
    return record.kind == "answer" and record.expected == "allowed" and get_mode(record.mode).executes


def execution_success(records: Sequence[CaseRecord]) -> Rate | None:
    """Allowed runs of answerable cases whose SQL ran, right or wrong (None: none to count)."""
    runs = [r for r in records if _ran(r) and r.status != "skip"]
    if not runs:
        return None
    return Rate.of(sum(1 for r in runs if r.result_status == "success"), len(runs))


def _rate(records: Sequence[CaseRecord], lenient: bool) -> Rate | None:
    verdicts = [execution_lenient_status(r.scores, r.execution_status) if lenient else r.execution_status
                for r in records]
    counted = [v for v in verdicts if v is not None and v != "skip"]
    return Rate.of(sum(1 for v in counted if v == "pass"), len(counted)) if counted else None


def by_domain(records: Sequence[CaseRecord]) -> dict[str, DomainRates]:
    """Each domain's rates (records written before domains were recorded are left out)."""
    groups: dict[str, list[CaseRecord]] = defaultdict(list)
    for record in records:
        if record.domain is not None and record.status != "skip":
            groups[record.domain].append(record)
    out: dict[str, DomainRates] = {}
    for domain, group in sorted(groups.items()):
        queries = [r for r in group if is_query(r)]
        out[domain] = DomainRates(
            query_runs=len(queries),
            execution_success=execution_success(queries),
            accuracy=_rate(queries, lenient=False),
            lenient=_rate(queries, lenient=True),
            probes=len(group) - len(queries),
        )
    return out


def coverage(records: Sequence[CaseRecord]) -> Coverage | None:
    """Distinct cases by kind and by fingerprint (None: records without fingerprints)."""
    cases: dict[tuple[str, str], CaseRecord] = {}
    for record in records:
        cases.setdefault((record.suite, record.case_id), record)
    if not cases or any(r.fingerprint is None for r in cases.values()):
        return None
    by_print: dict[str, list[str]] = defaultdict(list)
    for (suite, case_id), record in cases.items():
        assert record.fingerprint is not None
        by_print[record.fingerprint].append(f"{suite}:{case_id}")
    return Coverage(
        query_count=sum(1 for r in cases.values() if is_query(r)),
        probe_count=sum(1 for r in cases.values() if not is_query(r)),
        unique_case_count=len(by_print),
        duplicates=sorted(sorted(ids) for ids in by_print.values() if len(ids) > 1),
    )


def domains_markdown(domains: dict[str, DomainRates]) -> str:
    """The per-domain table: query runs, execution success and accuracy (strict, lenient)."""
    def cell(rate: Rate | None) -> str:
        return rate_cell(rate) if rate is not None and rate.total else "—"

    lines = ["| domain | query runs | execution success (95% CI) | accuracy (95% CI) | lenient | probes |",
             "| --- | ---: | --- | --- | --- | ---: |"]
    for name, d in domains.items():
        lines.append(f"| {name} | {d.query_runs} | {cell(d.execution_success)} | {cell(d.accuracy)} | "
                     f"{cell(d.lenient)} | {d.probes} |")
    return "\n".join(lines)


def coverage_line(c: Coverage) -> str:
    dup = f"; {len(c.duplicates)} definition(s) asked twice: {c.duplicates}" if c.duplicates else ""
    return (f"Coverage: {c.query_count} query case(s), {c.probe_count} policy probe(s), "
            f"{c.unique_case_count} unique case definition(s){dup}.")
