"""Public NL2SQL benchmarks (Spider, BIRD): import a folder of one as a project and a suite.

The importer (which pulls in the suite writer and regenerate) loads on first use, so the command
line can list the formats without paying for it.
"""

from __future__ import annotations

from typing import Any

from nl2sql_assets.public_benchmarks.formats import FORMATS, BenchmarkFolderError, read_folder

__all__ = ["FORMATS", "BenchImportReport", "BenchmarkFolderError", "import_benchmark", "read_folder"]


def __getattr__(name: str) -> Any:
    if name in ("BenchImportReport", "import_benchmark"):
        from nl2sql_assets.public_benchmarks import importer

        return getattr(importer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
