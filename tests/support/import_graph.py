"""The import graph of a set of packages, read from their source with `ast` (nothing is imported).

Every `import` and `from ... import` is an edge, wherever it stands: at module level or inside a
function (a function-local import runs when the function is first called, so it can close a cycle just
as well). An import under `if TYPE_CHECKING:` never runs and is left out. Importing `pkg.sub.mod` also
runs the `__init__` of every package on the way that the importer is not itself inside.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ImportSite:
    importer: str  # dotted module name
    imported: str  # dotted module name, resolved
    path: Path
    line: int
    function_local: bool


def module_names(roots: dict[str, Path]) -> dict[str, Path]:
    """Dotted module name -> source file, for each top-level package name -> its folder."""
    modules: dict[str, Path] = {}
    for package, folder in roots.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_statements(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """(statement, inside a function) for every import that can run."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, in_function)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, in_function))
            return
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, False)
    return found


def function_local_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of a file that run inside a function (TYPE_CHECKING ones left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node for node, in_function in _import_statements(tree) if in_function]


def _resolve_from(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = importer if is_package else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _targets(importer: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    """The modules of `known` an import statement names (a `from pkg import sub` names pkg.sub)."""
    if isinstance(node, ast.Import):
        named = [alias.name for alias in node.names]
    else:
        base = _resolve_from(importer, is_package, node)
        submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
        # names other than submodules are read from base's __init__, which must have run far enough
        named = submodules if len(submodules) == len(node.names) else [base, *submodules]
    targets: list[str] = []
    for name in named:
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            prefix = ".".join(parts[:end])
            # a package the importer lives in is already imported before the importer runs
            inside = importer == prefix or importer.startswith(prefix + ".")
            if prefix in known and prefix not in targets and not (end < len(parts) and inside):
                targets.append(prefix)
    return [target for target in targets if target != importer]


def import_sites(roots: dict[str, Path]) -> list[ImportSite]:
    modules = module_names(roots)
    known = set(modules)
    sites: list[ImportSite] = []
    for importer, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node, in_function in _import_statements(tree):
            for target in _targets(importer, is_package, node, known):
                sites.append(ImportSite(importer, target, path, node.lineno, in_function))
    return sites


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, iteratively (no recursion limit on deep graphs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, staying inside the component."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for successor in sorted(graph.get(node, set()) & members):
                if successor == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if successor not in came_from:
                    came_from[successor] = node
                    following.append(successor)
        frontier = following
    return [start, start]


def import_cycles(sites: list[ImportSite]) -> list[str]:
    """Each cycle as 'a -> b -> a', one per strongly connected component of more than one module."""
    graph: dict[str, set[str]] = {}
    for site in sites:
        graph.setdefault(site.importer, set()).add(site.imported)
    components = [c for c in strongly_connected(graph) if len(c) > 1]
    return sorted(" -> ".join(shortest_cycle(graph, component)) for component in components)
