"""What a ``%%distribute`` cell reads from the notebook and what it binds: a static analysis.

Free names are those read before the cell surely binds them (they are sent to the worker);
assigned names come back. Nested scopes are read through :mod:`symtable`.

>>> plan = analyze("y = x + 1\\nprint(y)")
>>> plan.free, plan.assigned
(('x', 'print'), ('y',))
"""

from __future__ import annotations

import ast
import symtable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CellPlan", "analyze"]


@dataclass(frozen=True)
class CellPlan:
    """What a cell reads from the notebook, what it binds, and whether it ends in an expression."""

    free: tuple[str, ...]
    assigned: tuple[str, ...]
    has_value: bool
    source: str = field(repr=False, default="")


class _TopLevelReads(ast.NodeVisitor):
    """Names a statement reads in the module scope (nested scopes are read through symtable)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Load, ast.Del)):
            self.names.add(node.id)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.names.add(node.target.id)  # x += 1 reads x first
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        # Decorators, defaults and annotations run now, in this scope; the body runs later.
        for deco in getattr(node, "decorator_list", []):
            self.visit(deco)
        args = node.args
        for default in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.visit(default)
        if not isinstance(node, ast.Lambda):
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    self.visit(arg.annotation)
            if node.returns is not None:
                self.visit(node.returns)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expr)

    def _comprehension(self, node: Any) -> None:
        self.visit(node.generators[0].iter)  # only the first iterable is evaluated out here

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension


def _bound_names(target: ast.AST) -> set[str]:
    return {
        n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _simple_binds(stmt: ast.stmt) -> set[str]:
    """Names a simple statement surely binds when it completes."""
    if isinstance(stmt, ast.Assign):
        return set().union(*(_bound_names(t) for t in stmt.targets))
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
        return {stmt.target.id} if not isinstance(stmt, ast.AnnAssign) or stmt.value else set()
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {
            (alias.asname or alias.name.split(".")[0]) for alias in stmt.names if alias.name != "*"
        }
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    return set()


class _Scanner:
    """Walks statements in order, noting each name read while it may not be bound yet."""

    def __init__(self, table: symtable.SymbolTable) -> None:
        self.children = [(c.get_lineno(), c) for c in table.get_children()]
        self.free: list[str] = []

    def _read(self, node: ast.AST | None, done: set[str]) -> None:
        if node is None:
            return
        visitor = _TopLevelReads()
        visitor.visit(node)
        reads = set(visitor.names)
        first, last = node.lineno, getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
        for lineno, child in self.children:
            if first <= lineno <= last:
                reads |= {
                    s.get_name() for s in child.get_symbols() if s.is_global() and s.is_referenced()
                }
                reads |= _nested_global_reads(child)
        self.free.extend(sorted(n for n in reads - done if n not in self.free))

    def scan(self, body: list[ast.stmt], done: set[str]) -> set[str]:
        """Record free reads in ``body``; return the names surely bound after it.

        ``done`` (the names bound so far) grows as the statements bind names.
        """
        for stmt in body:
            if isinstance(stmt, (ast.For, ast.AsyncFor)):
                self._read(stmt.iter, done)
                self.scan(stmt.body, done | _bound_names(stmt.target))
                self.scan(stmt.orelse, set(done))
            elif isinstance(stmt, ast.While):
                self._read(stmt.test, done)
                self.scan(stmt.body, set(done))
                self.scan(stmt.orelse, set(done))
            elif isinstance(stmt, ast.If):
                self._read(stmt.test, done)
                both = self.scan(stmt.body, set(done)) & self.scan(stmt.orelse, set(done))
                done |= both
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    self._read(item.context_expr, done)
                    if item.optional_vars is not None:
                        done |= _bound_names(item.optional_vars)
                self.scan(stmt.body, done)
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                self.scan(stmt.body, set(done))  # type: ignore[attr-defined]
                for handler in stmt.handlers:  # type: ignore[attr-defined]
                    self._read(handler.type, done)
                    self.scan(handler.body, done | ({handler.name} if handler.name else set()))
                self.scan(stmt.orelse, set(done))  # type: ignore[attr-defined]
                self.scan(stmt.finalbody, set(done))  # type: ignore[attr-defined]
            elif type(stmt).__name__ == "Match":
                self._read(stmt.subject, done)  # type: ignore[attr-defined]
                for case in stmt.cases:  # type: ignore[attr-defined]
                    self._read(case.guard, done)
                    self.scan(case.body, set(done))
            else:
                self._read(stmt, done)
                done |= _simple_binds(stmt)
                if isinstance(stmt, ast.Delete):
                    done -= set().union(*(_bound_names(t) for t in stmt.targets))
        return done


def _nested_global_reads(table: symtable.SymbolTable) -> set[str]:
    names = set()
    for child in table.get_children():
        names |= {s.get_name() for s in child.get_symbols() if s.is_global() and s.is_referenced()}
        names |= _nested_global_reads(child)
    return names


def _nested_global_writes(table: symtable.SymbolTable) -> set[str]:
    names = set()
    for child in table.get_children():
        names |= {
            s.get_name() for s in child.get_symbols() if s.is_declared_global() and s.is_assigned()
        }
        names |= _nested_global_writes(child)
    return names


def analyze(source: str, filename: str = "<cell>", first_line: int = 1) -> CellPlan:
    """Parse a cell: free names (read before the cell binds them), bound names, a last expression.

    Line numbers in a ``SyntaxError`` (and later in tracebacks) count from ``first_line``, so a
    body that starts on line 2 of a notebook cell reports the cell's own line numbers.

    >>> analyze("import math\\nr = math.sqrt(a)\\nr").free
    ('a',)
    """
    padded = "\n" * (first_line - 1) + source
    tree = ast.parse(padded, filename, "exec")  # raises SyntaxError with the cell's line numbers
    table = symtable.symtable(padded, filename, "exec")
    scanner = _Scanner(table)
    scanner.scan(tree.body, set())
    free = scanner.free

    assigned = {
        s.get_name()
        for s in table.get_symbols()
        if s.is_assigned() or s.is_imported() or s.is_namespace()
    }
    assigned |= _nested_global_writes(table)
    has_value = bool(tree.body) and isinstance(tree.body[-1], ast.Expr)
    return CellPlan(tuple(free), tuple(sorted(assigned)), has_value, padded)
