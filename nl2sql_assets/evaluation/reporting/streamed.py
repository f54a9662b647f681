"""Case records as JSON Lines, written as each case run finishes, and a small summary report that
points at them: a 10,000-case run writes its records as it goes, never one huge JSON at the end.

``RecordStream`` appends every record (redacted, one line each) to ``<records>.partial`` the
moment it is counted; ``finish`` writes the records file in the run's order (the lines as they
were streamed), atomically, and drops the partial file. A run that dies leaves the partial file
with every record finished so far. The report's boards are then built in one pass over the
records file (``report.report_from_records``), so the run need not hold its records.

``board.save_summary`` writes the report without its boards' ``results`` and with ``records_file``
naming that file (beside the report); ``load_report`` reads the records back into the boards,
so the gate, thresholds and ``eval publish`` read a summary like a full report (and a full
report, older ones included, as before).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from nl2sql_assets.atomic import atomic_write_chunks
from nl2sql_assets.redact import redact

if TYPE_CHECKING:
    from nl2sql_assets.evaluation.running.results import CaseRecord, RecordKey

RECORDS_SUFFIX = ".records.jsonl"


def records_path_for(report_path: str | Path) -> Path:
    """``eval_plans.json`` → ``eval_plans.records.jsonl`` (beside it)."""
    path = Path(report_path)
    return path.with_name(path.stem + RECORDS_SUFFIX)


def partial_path_for(records: str | Path) -> Path:
    """Where a run streams its records until it ends: ``<records>.partial`` (what a run that dies
    or is interrupted leaves)."""
    path = Path(records)
    return path.with_name(path.name + ".partial")


class RecordStream:
    """Records appended to ``<path>.partial`` as they finish (an ``on_case`` callback).

    The stream keeps each line's place in the partial file (its key, offset and length), never
    the line: ``finish`` copies the lines into the run's order one at a time, so neither the run
    nor the copy holds its records."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.partial = partial_path_for(self.path)
        # Opened at the first record: a run refused before it starts leaves no file behind.
        self._fh: IO[bytes] | None = None
        self._spans: dict[RecordKey, tuple[int, int]] = {}  # key -> (offset, length) in the partial file
        self._end = 0
        self.count = 0

    @property
    def keys(self) -> list[RecordKey]:
        """Each streamed line's record key, in the order written."""
        return list(self._spans)

    def on_case(self, config: str, record: CaseRecord, spent: float) -> None:
        from nl2sql_assets.evaluation.running.results import record_key

        if self._fh is None:
            assert not self._spans, "the stream is closed"
            self.partial.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.partial.open("wb")
        line = (redact(record.model_dump_json()) + "\n").encode("utf-8")
        self._fh.write(line)
        self._fh.flush()  # a reader (or a crash) sees every finished record
        self._spans[record_key(record)] = (self._end, len(line))
        self._end += len(line)
        self.count += 1

    def finish(self, order: Iterable[RecordKey]) -> Path:
        """Write the records file in ``order`` (the run's record keys) from the streamed lines;
        returns it. Lines are copied one at a time, never parsed again nor held together."""
        self.close()
        spans = dict(self._spans)

        def lines() -> Iterator[bytes]:
            if not spans:
                return
            with self.partial.open("rb") as fh:
                for offset, length in [*(spans.pop(key) for key in order),
                                       *sorted(spans.values())]:  # none expected: every record is in the run
                    fh.seek(offset)
                    yield fh.read(length)

        atomic_write_chunks(self.path, lines())
        self.partial.unlink(missing_ok=True)
        return self.path

    def discard(self) -> None:
        """Close the stream and remove what it wrote (a run whose records are not to be kept)."""
        self.close()
        self.partial.unlink(missing_ok=True)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> RecordStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if not self._spans:  # nothing was streamed (the run was refused, or failed at once): no file
            self.partial.unlink(missing_ok=True)


def read_records(path: Path) -> Iterator[CaseRecord]:
    """The case records of a records file, one at a time; a bad line raises ValueError naming it."""
    from nl2sql_assets.evaluation.running.results import CaseRecord

    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield CaseRecord.model_validate_json(line)
            except ValueError as exc:
                raise ValueError(f"{path}, line {n}: not a case record: {exc}") from None
