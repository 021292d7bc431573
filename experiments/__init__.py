"""Reproducible experiments on top of trl_verigate (see docs/experiments.md)."""
