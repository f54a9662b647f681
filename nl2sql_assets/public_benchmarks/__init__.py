"""Public NL2SQL benchmarks (Spider, BIRD): import a folder of one as a project and a suite."""

from nl2sql_assets.public_benchmarks.formats import FORMATS, BenchmarkFolderError, read_folder
from nl2sql_assets.public_benchmarks.importer import BenchImportReport, import_benchmark

__all__ = ["FORMATS", "BenchImportReport", "BenchmarkFolderError", "import_benchmark", "read_folder"]
