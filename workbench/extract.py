"""Find what a candidate passes to `load_inline`, without running it.

The verifier records the sources load_inline actually received (builds.extensions); this static
reading is the fallback for kernels that never compiled. It resolves string literals, names bound
at module level or in the enclosing function, `+` concatenation, lists/tuples and f-strings whose
parts resolve; anything else is reported in one line instead of guessed.
"""
from __future__ import annotations

import ast

from workbench import pyast

# load_inline's positional order (torch.utils.cpp_extension.load_inline).
POSITIONAL = ("name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags",
              "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags", "extra_include_paths")
LIST_ARGS = ("cpp_sources", "cuda_sources")
FLAG_ARGS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")


class ExtractError(Exception):
    """The sources cannot be determined statically; str() is one line saying where and why."""


class _Unresolved(Exception):
    pass


def _bindings(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """Simple `name = expr` bindings in a block (the last one wins, as at the call site)."""
    found: dict[str, ast.expr] = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            found[node.target.id] = node.value
    return found


def _resolve(node: ast.expr, scopes: list[dict[str, ast.expr]], depth: int = 0):
    if depth > 50:
        raise _Unresolved("names refer to each other too deeply")
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, type(None), bool)):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_resolve(e, scopes, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_resolve(k, scopes, depth + 1): _resolve(v, scopes, depth + 1)
                for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, ast.Name):
        for scope in scopes:
            if node.id in scope:
                return _resolve(scope[node.id], scopes, depth + 1)
        raise _Unresolved(f"`{node.id}` is not bound to a literal")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _resolve(node.left, scopes, depth + 1)
        right = _resolve(node.right, scopes, depth + 1)
        if type(left) is type(right) and isinstance(left, (str, list)):
            return left + right
        raise _Unresolved("`+` of values that are not both strings or both lists")
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(value.value)
            elif isinstance(value, ast.FormattedValue) and value.conversion == -1 \
                    and value.format_spec is None:
                part = _resolve(value.value, scopes, depth + 1)
                if not isinstance(part, str):
                    raise _Unresolved("an f-string part is not a string")
                parts.append(part)
            else:
                raise _Unresolved("an f-string with a conversion or format spec")
        return "".join(parts)
    raise _Unresolved(f"a {type(node).__name__} expression")


def _is_load_inline(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Name) and func.id == "load_inline") or \
        (isinstance(func, ast.Attribute) and func.attr == "load_inline")


def _calls_with_scopes(tree: ast.Module) -> list[tuple[ast.Call, list[dict[str, ast.expr]]]]:
    """Each load_inline call with the bindings visible to it, innermost first."""
    found: list[tuple[ast.Call, list[dict[str, ast.expr]]]] = []

    def visit(node: ast.AST, scopes: list[dict[str, ast.expr]]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, [_bindings(child.body)] + scopes)
                continue
            if isinstance(child, ast.Call) and _is_load_inline(child):
                found.append((child, scopes))
            visit(child, scopes)

    visit(tree, [_bindings(tree.body)])
    return found


def _as_list(value, what: str, line: int) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise ExtractError(f"line {line}: load_inline's {what} is not a string or list of strings")
    return items


def extract_extensions(source: str, filename: str = "<kernel>") -> list[dict]:
    """The load_inline calls in a candidate, in the verdict's `extensions` shape.

    Returns [] when there is none; raises ExtractError (one line) when one cannot be resolved.
    """
    try:
        tree = pyast.parse(source, filename)
    except SyntaxError as e:
        raise ExtractError(f"{filename}:{e.lineno}: syntax error: {e.msg}") from None
    extensions = []
    for call, scopes in _calls_with_scopes(tree):
        args: dict[str, ast.expr] = dict(zip(POSITIONAL, call.args))
        args.update({k.arg: k.value for k in call.keywords if k.arg})
        values = {}
        for key in ("name", *LIST_ARGS, "functions", *FLAG_ARGS):
            if key not in args:
                continue
            try:
                values[key] = _resolve(args[key], scopes)
            except _Unresolved as e:
                raise ExtractError(
                    f"{filename}:{call.lineno}: load_inline's {key} cannot be read statically "
                    f"({e}); evaluate the kernel once so the verifier records its sources, "
                    "then export again") from None
        if not isinstance(values.get("name"), str):
            raise ExtractError(f"{filename}:{call.lineno}: load_inline has no string `name`")
        functions = values.get("functions")
        if isinstance(functions, str):
            functions = [functions]
        extensions.append({
            "name": values["name"],
            "cpp_sources": _as_list(values.get("cpp_sources"), "cpp_sources", call.lineno),
            "cuda_sources": _as_list(values.get("cuda_sources"), "cuda_sources", call.lineno),
            "functions": functions,
            **{k: _as_list(values.get(k), k, call.lineno) for k in FLAG_ARGS}})
    return extensions
