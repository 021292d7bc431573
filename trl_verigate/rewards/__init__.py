"""Reward functions (TRL signature) and process reward models (`StepScorer`)."""
