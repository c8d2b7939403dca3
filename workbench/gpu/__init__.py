"""Verifier: compile pool, isolated GPU workers, correctness checks, timing and guards."""
