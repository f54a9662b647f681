"""Suites: the reviewed cases, their files, and the tools that write them (regenerate, seed)."""
