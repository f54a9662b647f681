"""Neighbour databases: small databases of a datasource's schema on which near-miss SQL and its
gold give different rows (test-suite accuracy). ``mutants`` makes the near misses of a gold query.
"""

from nl2sql_assets.evaluation.neighbours.mutants import RULES, Mutant, mutants

__all__ = ["RULES", "Mutant", "mutants"]
