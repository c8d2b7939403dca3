"""The timeout bounds the whole call, not each read.

HTTP clients time each socket read: a server that drips a byte a second is never "timed out"
(a 5 s timeout was still reading at 90 s). Two layers fix that. `bounded` runs one attempt on
its own thread and stops waiting at the deadline, whatever the transport does. The SDKs' HTTP
clients get a `DeadlineTransport`, which fails the response at the first chunk past the
deadline, so the abandoned request ends soon after instead of reading on.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

from workbench.llm.errors import TransientError

T = TypeVar("T")
GRACE_S = 0.5     # the transport's own failure usually arrives first; this is a backstop


def _httpx():
    # The SDKs moved from httpx to its fork httpx2; build on whichever this install has.
    try:
        import httpx2 as module
    except ImportError:
        import httpx as module
    return module


def transport(timeout_s: float):
    """An HTTP transport (httpx2, else httpx) that fails a response read past `timeout_s`."""
    httpx = _httpx()

    class DeadlineStream(httpx.SyncByteStream):
        def __init__(self, stream, deadline: float) -> None:
            self._stream, self._deadline = stream, deadline

        def __iter__(self):
            for chunk in self._stream:
                if time.monotonic() > self._deadline:
                    raise httpx.ReadTimeout(f"no complete answer within {timeout_s:g} s")
                yield chunk

        def close(self) -> None:
            self._stream.close()

    class DeadlineTransport(httpx.BaseTransport):
        def __init__(self) -> None:
            self._inner = httpx.HTTPTransport()

        def handle_request(self, request):
            deadline = time.monotonic() + timeout_s
            response = self._inner.handle_request(request)
            response.stream = DeadlineStream(response.stream, deadline)
            return response

        def close(self) -> None:
            self._inner.close()

    return DeadlineTransport()


def bounded(attempt: Callable[[], T], timeout_s: float) -> T:
    """attempt(), or TransientError once `timeout_s` (wall clock) has passed without it ending.

    The attempt runs on a daemon thread; past the deadline it is abandoned (its transport ends
    it soon after) and its outcome ignored.
    """
    done = threading.Event()
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = attempt()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, daemon=True, name="kwb-llm-call").start()
    if not done.wait(timeout_s + GRACE_S):
        raise TransientError(f"no complete answer within {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
