"""Keys never reach the database or the terminal: not echoed by a server, not in a base URL.

A provider knows its secrets (its API key, the key variables of the environment, credentials
and secret-looking query parameters of its base URL) and replaces each occurrence in anything
it returns or raises: answers, error messages, its own description.
"""
from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MARK = "[redacted]"
URL_MARK = "REDACTED"
KEY_VARS = ("OPENAI_API_KEY", "OPENAI_COMPATIBLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
# Query parameter names that carry credentials (Gemini's ?key=, Azure's api-key, sig=, token=).
_SECRET_PARAM = re.compile(r"key|token|secret|sig|signature|password|auth|credential",
                           re.IGNORECASE)
_MIN_SECRET = 6     # shorter values ("none", "test") would redact ordinary words


def url_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries: user, password, values of secret-looking parameters."""
    if not url:
        return []
    parts = urlsplit(url)
    found = [parts.username, parts.password]
    found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True)
              if _SECRET_PARAM.search(k)]
    found += [item.partition("=")[2] for item in parts.query.split("&")    # as written, encoded
              if _SECRET_PARAM.search(item.partition("=")[0])]
    return [s for s in found if s]


def redact_url(url: str | None) -> str | None:
    """A base URL fit to store and show: no user:password, secret query values replaced."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        parts = parts._replace(netloc=host)
    if parts.query:
        parts = parts._replace(query="&".join(_redact_param(p) for p in parts.query.split("&")))
    return urlunsplit(parts)


def _redact_param(item: str) -> str:
    name, eq, _ = item.partition("=")
    return f"{name}={URL_MARK}" if eq and _SECRET_PARAM.search(name) else item


class Redactor:
    """Replaces known secrets in text; longest first, so a key's prefix never survives."""

    def __init__(self, *secrets: str | None) -> None:
        self._secrets: list[str] = []
        self.add(*secrets, *(os.environ.get(v) for v in KEY_VARS))

    def add(self, *secrets: str | None) -> None:
        found = {s.strip() for s in secrets if s and len(s.strip()) >= _MIN_SECRET}
        self._secrets = sorted(set(self._secrets) | found, key=len, reverse=True)

    def __call__(self, text: str | None) -> str | None:
        if not text:
            return text
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MARK)
        return text
