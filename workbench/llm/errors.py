"""Errors from talking to a model. str() is always one line saying what failed and what to do."""
from __future__ import annotations


class ProviderError(Exception):
    """A provider call that failed for good (bad key, bad request, retries used up, budget).

    transient: the cause may pass (rate limits, server errors, timeouts): stop and resume later.
    """

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


class TransientError(Exception):
    """Raised inside a provider for one failed attempt that is worth retrying."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after
