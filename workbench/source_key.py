"""A key for "the same kernel": a KernelBench solution with comments and layout taken out.

Two generated solutions that differ only in comments, docstrings, blank lines, indentation width,
spacing or quoting style get the same `source_key`, in the Python part and in the CUDA/C++ code
it carries in string literals (// and /* */ comments, whitespace between tokens). String
contents are otherwise kept. Only the standard library: the GPU worker may import this.
"""
from __future__ import annotations

import hashlib
import io
import re
import tokenize

from workbench import pyast

VERSION = "source_key v1"   # change when normalize() changes, so old keys never collide
_WORD = re.compile(r"\w")
_OPERATOR = set("+-*/%&|<>=!^.:~?")
_LOOKS_LIKE_C = re.compile(r"[{;]|#\s*include|__global__|__device__")
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)   # Python 3.12+
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def source_key(source: str) -> str:
    """sha256 (hex) of normalize(source), namespaced by the normalisation's version."""
    return hashlib.sha256(f"{VERSION}\0{normalize(source)}".encode()).hexdigest()


def normalize(source: str) -> str:
    """One line per Python logical line (indent depth, then tokens joined by single spaces);
    comments, docstrings and blank lines out; string literals re-quoted with their C/C++ code
    normalised. Source Python cannot tokenize falls back to collapsing whitespace."""
    try:
        return _normalize_python(source)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return " ".join(source.split())


def _normalize_python(source: str) -> str:
    lines = source.splitlines(keepends=True)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    out: list[str] = []
    line: list[str] = []
    only_strings = True     # a logical line of string literals alone is a docstring: dropped
    depth = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok.type in _SKIP:
            continue
        if _FSTRING_START is not None and tok.type == _FSTRING_START:
            end = _fstring_end(tokens, i - 1)
            line.append(_normalize_string(_slice(lines, tok.start, tokens[end].end)))
            i = end + 1
        elif tok.type == tokenize.STRING:
            line.append(_normalize_string(tok.string))
        elif tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        elif tok.type == tokenize.NEWLINE:
            if line and not only_strings:
                out.append("  " * depth + " ".join(line))
            line, only_strings = [], True
        else:
            line.append(tok.string)
            only_strings = False
    if line and not only_strings:
        out.append("  " * depth + " ".join(line))
    return "\n".join(out)


def _fstring_end(tokens: list[tokenize.TokenInfo], start: int) -> int:
    depth = 0
    for j in range(start, len(tokens)):
        if tokens[j].type == _FSTRING_START:
            depth += 1
        elif tokens[j].type == _FSTRING_END:
            depth -= 1
            if depth == 0:
                return j
    return len(tokens) - 1


def _slice(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    (r0, c0), (r1, c1) = start, end
    if r0 == r1:
        return lines[r0 - 1][c0:c1]
    return lines[r0 - 1][c0:] + "".join(lines[r0:r1 - 1]) + lines[r1 - 1][:c1]


def _normalize_string(literal: str) -> str:
    """A string literal's value, normalised and re-quoted; f-strings keep their braces."""
    prefix = re.match(r"[A-Za-z]*", literal).group(0)
    if "f" in prefix.lower():
        body = literal[len(prefix):]
        quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
        return prefix.lower() + repr(_normalize_text(body[len(quote):-len(quote)]))
    try:
        value = pyast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return literal
    if isinstance(value, bytes):
        return repr(value)
    return repr(_normalize_text(value))


def _normalize_text(text: str) -> str:
    if _LOOKS_LIKE_C.search(text):
        return _normalize_c(text)
    return " ".join(text.split())


def _normalize_c(code: str) -> str:
    """C/C++/CUDA with comments out and whitespace only where tokens would otherwise merge
    (and a newline ending each preprocessor line); string and char literals kept as written."""
    out: list[str] = []
    pending_space = False
    pending_newline = False
    in_directive = False
    line_start = True
    i, n = 0, len(code)
    while i < n:
        ch = code[i]
        if code.startswith("//", i):
            end = code.find("\n", i)
            i = n if end < 0 else end
            continue
        if code.startswith("/*", i):
            end = code.find("*/", i + 2)
            i = n if end < 0 else end + 2
            pending_space = True
            continue
        if ch.isspace():
            if ch == "\n":
                if in_directive and not (out and out[-1].endswith("\\")):
                    pending_newline = True
                    in_directive = False
                line_start = True
            pending_space = True
            i += 1
            continue
        if ch in "\"'":
            end = _literal_end(code, i)
            token = code[i:end]
            i = end
        else:
            token = ch
            i += 1
        if pending_newline:
            out.append("\n")
        elif pending_space and out and _needs_space(out[-1][-1], token[0]):
            out.append(" ")
        pending_space = pending_newline = False
        if line_start and token == "#":
            in_directive = True
        line_start = False
        out.append(token)
    return "".join(out)


def _literal_end(code: str, start: int) -> int:
    """Index after a C string or char literal starting at `start` (escapes honoured)."""
    quote = code[start]
    i = start + 1
    while i < len(code):
        if code[i] == "\\":
            i += 2
            continue
        if code[i] == quote or code[i] == "\n":
            return i + 1
        i += 1
    return len(code)


def _needs_space(left: str, right: str) -> bool:
    if _WORD.match(left) and _WORD.match(right):
        return True
    return left in _OPERATOR and right in _OPERATOR


_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def text_key(text: str) -> str:
    """An idea's text for spotting restatements: lower case, punctuation, articles and
    whitespace runs out ("Use float4 loads." == "use float4 loads")."""
    return " ".join(_ARTICLES.sub(" ", re.sub(r"\W+", " ", text.lower())).split())
