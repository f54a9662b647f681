"""History: the committed benchmark records, the pages made from them, and the warehouse of runs."""

from nl2sql_assets.evaluation.history.warehouse import SpendLedger, Warehouse

__all__ = ["SpendLedger", "Warehouse"]
