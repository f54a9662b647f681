"""Reporting: boards built from case records, their statistics, and the regression gate."""
