"""Analyses: pure functions from loaded tables (and keyword options) to new, declared frames."""
