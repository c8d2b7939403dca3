"""Static guards for code that reaches outside the evaluator: processes and shells, the network,
and code hidden from the other guards behind exec/eval of a decoded string. Standard library only.

Names are resolved through the candidate's imports (`from os import system as s` still reads
as os.system), and only code is matched, never comments or strings. The sandbox
(workbench.gpu.sandbox) is what stops such code; these flags say it was tried.
"""
from __future__ import annotations

import ast

PROCESS_CALLS = {"os.system", "os.popen", "os.fork", "os.forkpty", "os.setsid", "os.setpgrp",
                 "os.posix_spawn", "os.posix_spawnp", "os.kill", "os.killpg", "pty.spawn",
                 "pty.fork"}
PROCESS_PREFIXES = ("os.exec", "os.spawn", "subprocess.", "multiprocessing.")
NETWORK_MODULES = {"socket", "http", "urllib", "requests", "httpx", "ftplib", "smtplib",
                   "telnetlib", "asyncio.open_connection"}
DECODERS = {"base64.b64decode", "base64.b32decode", "base64.b85decode", "base64.a85decode",
            "base64.decodebytes", "base64.urlsafe_b64decode", "codecs.decode", "zlib.decompress",
            "lzma.decompress", "bz2.decompress", "gzip.decompress", "marshal.loads",
            "pickle.loads", "bytes.fromhex", "binascii.unhexlify", "binascii.a2b_base64"}
DYNAMIC = {"exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"}


def _aliases(tree: ast.Module) -> dict[str, str]:
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:  # `import a.b` binds a; `import a.b as c` binds c to a.b
                top = a.name.split(".")[0]
                names[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _resolve(node: ast.AST, aliases: dict[str, str]) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def check(tree: ast.Module) -> list[dict]:
    """Flags (kind, reason) for a parsed candidate; at most one per kind, naming the first line."""
    aliases = _aliases(tree)
    found: dict[str, str] = {}

    def hit(kind: str, line: int, what: str, why: str) -> None:
        found.setdefault(kind, f"line {line}: {why} (`{what}`)")

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            for mod in mods:
                if mod.split(".")[0] in NETWORK_MODULES:
                    hit("network", node.lineno, f"import {mod}",
                        "uses the network: a kernel needs none")
        if not isinstance(node, ast.Call):
            continue
        name = _resolve(node.func, aliases)
        if name in PROCESS_CALLS or name.startswith(PROCESS_PREFIXES):
            hit("process", node.lineno, name,
                "starts a process or a shell, which can outlive the evaluation")
        elif name in DYNAMIC and node.args and not isinstance(node.args[0], ast.Constant):
            hit("dynamic_code", node.lineno, f"{name}(...)",
                "runs code built at run time, out of the static guards' sight")
        elif name in DECODERS:
            hit("dynamic_code", node.lineno, name, "decodes hidden data or code")
        elif name in ("getattr", "builtins.getattr") and len(node.args) > 1 and \
                not isinstance(node.args[1], ast.Constant) and \
                _resolve(node.args[0], aliases) in ("os", "subprocess", "builtins", "sys"):
            hit("dynamic_code", node.lineno, "getattr(...)",
                "looks up an os/builtins function by a computed name")
    return [{"kind": kind, "reason": reason} for kind, reason in found.items()]
