"""Test doubles for the LLM loop, reusable by any test (engine, CLI, TUI).

FakeLLMServer: a real HTTP server on 127.0.0.1 (random port, own thread) that speaks the OpenAI
chat-completions and the Gemini generateContent wire formats, so the real `openai` and
`google-genai` clients talk to it. Script it with `push(Reply(...))` (answered in order) or a
`responder(prompt, request) -> Reply` for everything unscripted; `requests` records what came.

FakeExecutor: an Executor whose verdicts come from a marker in the candidate source:
`# VERDICT: correct 2.5` (status, speedup vs eager), `# VERDICT: compile_error`, ...
"""
from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from workbench.gpu.executor import EvaluationCancelled
from workbench.gpu.verdict import empty


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    delay_s: float = 0.0            # sleep before answering (timeouts)
    tokens_in: int = 100
    tokens_out: int = 50
    reasoning: int = 10             # reasoning_tokens / thoughtsTokenCount
    retry_after: float | None = None
    raw_body: bytes | None = None   # sent as-is instead of a well-formed answer
    drip_s: float = 0.0             # send the body a byte at a time, this far apart
    usage: bool = True              # False: the answer reports no token usage


@dataclass
class Request:
    path: str
    headers: dict
    body: dict
    prompt: str                     # the user message text
    system: str | None


def _prompt_of(body: dict) -> tuple[str, str | None]:
    if "messages" in body:          # OpenAI
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), None)
        return body["messages"][-1]["content"], system
    parts = body.get("contents", [{}])[-1].get("parts", [])
    sys_parts = (body.get("systemInstruction") or body.get("system_instruction") or {}).get(
        "parts", [])
    return ("".join(p.get("text", "") for p in parts),
            "".join(p.get("text", "") for p in sys_parts) or None)


@dataclass
class FakeLLMServer:
    responder: Callable[[str, Request], Reply] | None = None
    queue: list[Reply] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    hangups: list[float] = field(default_factory=list)   # when a client hung up mid-answer

    def __post_init__(self):
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                prompt, system = _prompt_of(body)
                request = Request(self.path, dict(self.headers), body, prompt, system)
                reply = server._next(request)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.raw_body if reply.raw_body is not None else \
                    json.dumps(server._payload(self.path, body, reply)).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    if reply.retry_after is not None:
                        self.send_header("retry-after", str(reply.retry_after))
                    self.end_headers()
                    if reply.drip_s:
                        for i in range(len(payload)):
                            self.wfile.write(payload[i:i + 1])
                            self.wfile.flush()
                            time.sleep(reply.drip_s)
                    else:
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    server.hangups.append(time.monotonic())   # the client gave up (timeouts)

            def log_message(self, *args):
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> "FakeLLMServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    # -- scripting ---------------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.queue.extend(replies)

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.queue:
                return self.queue.pop(0)
        if self.responder is None:
            return Reply(status=500, text="no scripted reply left")
        return self.responder(request.prompt, request)

    @staticmethod
    def _payload(path: str, body: dict, reply: Reply) -> dict:
        gemini = ":generateContent" in path
        if reply.status != 200:
            if gemini:
                return {"error": {"code": reply.status, "message": reply.text or "error",
                                  "status": "RESOURCE_EXHAUSTED" if reply.status == 429
                                  else "INTERNAL"}}
            return {"error": {"message": reply.text or "error", "type": "server_error",
                              "code": str(reply.status)}}
        if gemini:
            answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": reply.text}]},
                                      "finishReason": "STOP", "index": 0}],
                      "modelVersion": path.split("models/")[-1].split(":")[0]}
            if reply.usage:
                answer["usageMetadata"] = {
                    "promptTokenCount": reply.tokens_in, "candidatesTokenCount": reply.tokens_out,
                    "thoughtsTokenCount": reply.reasoning,
                    "totalTokenCount": reply.tokens_in + reply.tokens_out + reply.reasoning}
            return answer
        answer = {"id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                  "model": body.get("model", "test"),
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": reply.text}}]}
        if reply.usage:
            answer["usage"] = {
                "prompt_tokens": reply.tokens_in, "completion_tokens": reply.tokens_out,
                "total_tokens": reply.tokens_in + reply.tokens_out,
                "completion_tokens_details": {"reasoning_tokens": reply.reasoning}}
        return answer


_MARKER = re.compile(r"#\s*VERDICT:\s*(\w+)(?:\s+([\d.]+))?")


class FakeExecutor:
    """Verdicts computed from a `# VERDICT: status [speedup]` marker in the candidate."""

    def __init__(self, ref_ms: float = 1.0, delay_s: float = 0.0):
        self.ref_ms = ref_ms
        self.delay_s = delay_s
        self.requests = []
        self.cancelled: list = []       # requests stopped while running (no verdict)
        self._pool = ThreadPoolExecutor(max_workers=2)
        self._tokens: dict[Future, threading.Event] = {}

    def submit(self, request) -> Future:
        self.requests.append(request)
        token = threading.Event()
        future = self._pool.submit(self._verdict, request, token)
        self._tokens[future] = token
        return future

    def cancel(self, futures) -> None:
        for future in futures:
            if not future.cancel() and future in self._tokens:
                self._tokens[future].set()

    def shutdown(self, cancel: bool = False) -> None:
        if cancel:
            for token in self._tokens.values():
                token.set()
        self._pool.shutdown(wait=not cancel, cancel_futures=cancel)

    def _verdict(self, request, token: threading.Event) -> dict:
        if token.wait(self.delay_s) if self.delay_s else token.is_set():
            self.cancelled.append(request)
            raise EvaluationCancelled(request.label)
        match = _MARKER.search(request.candidate_source)
        status = match.group(1) if match else "crashed"
        verdict = empty(status)
        verdict.update(atol=request.atol, rtol=request.rtol, compile_s=0.1, cache_hit=False,
                       reuse_key=request.reuse_key())   # as the pool's verdicts carry it
        if status == "compile_error":
            verdict["error"] = "kernel.cu(3): error: identifier \"flaot\" is undefined"
        elif status == "incorrect":
            verdict["error"] = "max abs error 0.5 > tolerance"
        elif status == "flagged":
            verdict["flags"] = [{"kind": "too_fast", "reason": "faster than the roofline floor"}]
        elif status == "crashed" and not match:
            verdict["error"] = "no VERDICT marker in the candidate"
        if request.settings.no_gpu and status == "correct":
            verdict["status"] = "unverified"
        elif status in ("correct", "flagged"):
            speedup = float(match.group(2) or 1.0)
            verdict.update(verified=True, time_ms=self.ref_ms / speedup, ref_eager_ms=self.ref_ms,
                           speedup_eager=speedup, floor_ms=self.ref_ms / 10,
                           roofline_fraction=0.1 * speedup)
        return verdict
