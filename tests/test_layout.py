"""The layout's import rules (docs/DESIGN.md, "Rooms"): the sub-packages of workers/ import one way
only, with no cycle. That loading the pack imports no engine, rank code or ltx-core is checked where
the pack is loaded as ComfyUI loads it (test_pack_loading.py)."""

from __future__ import annotations

import ast
from pathlib import Path

PACK_ROOT = Path(__file__).resolve().parent.parent
WORKERS = PACK_ROOT / "workers"
# Room -> the rooms it may import. wire is the floor; group is the UI side; rank drives the engines.
ALLOWED = {
    "wire": set(),
    "group": {"wire"},
    "strategies": {"wire"},
    "text": {"wire"},
    "embedded": {"wire", "engine", "text"},
    "engine": {"wire", "strategies", "text"},  # an engine attaches the strategies (SP, tiles) to its model
    "rank": {"wire", "engine", "strategies", "text", "embedded"},
}


def _room_imports(path: Path) -> set[str]:
    """Rooms of workers/ that `path` imports, anywhere in the file (inside functions and
    TYPE_CHECKING blocks too: a type-only import is still a dependency of the design)."""
    package = list(path.relative_to(PACK_ROOT).parts[:-1])  # e.g. ["workers", "engine", "ltxcore"]
    rooms = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package[: len(package) - (node.level - 1)]
            target = [*base, *(node.module or "").split(".")] if node.module else base
            names = [target] if node.module else [[*target, alias.name] for alias in node.names]
        elif (node.module or "").startswith("ltx2_mgpu.workers."):
            names = [node.module.split(".")[1:]]
        else:
            continue
        rooms.update(name[1] for name in names if len(name) > 1 and name[0] == "workers")
    rooms.discard(path.relative_to(WORKERS).parts[0])
    return rooms


def test_rooms_import_one_way_only():
    wrong = {}
    for path in sorted(WORKERS.rglob("*.py")):
        if len(path.relative_to(WORKERS).parts) < 2:
            continue  # workers/__init__.py
        room = path.relative_to(WORKERS).parts[0]
        extra = _room_imports(path) - ALLOWED[room]
        if extra:
            wrong[str(path.relative_to(PACK_ROOT))] = sorted(extra)
    assert wrong == {}, f"imports against the layout's direction: {wrong}"


def test_the_rooms_have_no_import_cycle():
    graph = {room: set() for room in ALLOWED}
    for path in WORKERS.rglob("*.py"):
        if len(path.relative_to(WORKERS).parts) >= 2:
            graph[path.relative_to(WORKERS).parts[0]] |= _room_imports(path)
    state: dict[str, int] = {}

    def visit(room: str, trail: list[str]) -> None:
        if state.get(room) == 1:
            raise AssertionError(f"import cycle: {' -> '.join([*trail, room])}")
        if state.get(room) == 2:
            return
        state[room] = 1
        for target in sorted(graph.get(room, ())):
            visit(target, [*trail, room])
        state[room] = 2

    assert any(graph.values()), "no imports between rooms found: the scan itself is broken"
    for room in graph:
        visit(room, [])


def _module_imports(path: Path) -> set[Path]:
    """The modules of workers/ that `path` imports anywhere in the file (inside functions and
    TYPE_CHECKING blocks too), as files."""
    package = path.parent
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = package
        for _ in range(node.level - 1):
            base = base.parent
        target = base.joinpath(*node.module.split(".")) if node.module else base
        candidates = [target.with_suffix(".py"), target / "__init__.py"]
        if node.module is None or (target / "__init__.py").is_file():  # `from . import x`: x may be a module
            candidates += [target / f"{alias.name}.py" for alias in node.names]
        found |= {c for c in candidates if c.is_file() and WORKERS in c.parents and c != path}
    return found


def test_no_module_of_workers_imports_itself_back():
    """No circle of modules under workers/, even through an import inside a function: a circle makes
    the import order matter and hides which module a definition belongs to (issue 34)."""
    graph = {path: _module_imports(path) for path in WORKERS.rglob("*.py")}
    state: dict[Path, int] = {}

    def visit(module: Path, trail: list[Path]) -> None:
        if state.get(module) == 1:
            cycle = [str(m.relative_to(PACK_ROOT)) for m in [*trail[trail.index(module) :], module]]
            raise AssertionError(f"import circle: {' -> '.join(cycle)}")
        if state.get(module) == 2:
            return
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            visit(target, [*trail, module])
        state[module] = 2

    assert sum(map(len, graph.values())) > 100, "too few imports found: the scan itself is broken"
    for module in sorted(graph):
        visit(module, [])


def test_every_room_is_a_package_pip_installs():
    """pyproject.toml lists packages by hand: a room missing there is missing from a pip install."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser from PyPI (the test extra installs it)
        import tomli as tomllib

    listed = set(tomllib.loads((PACK_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    # Folders .gitignore keeps out of the pack (build/, out/: a bench's downloads may hold packages).
    ignored = {
        line.strip().strip("/")
        for line in (PACK_ROOT / ".gitignore").read_text().splitlines()
        if line.strip().endswith("/") and "*" not in line
    }
    found = {
        ".".join(("ltx2_mgpu", *init.parent.relative_to(PACK_ROOT).parts))
        for init in PACK_ROOT.glob("**/__init__.py")
        if init.parent != PACK_ROOT
        and not init.relative_to(PACK_ROOT).parts[0].startswith((".", "tests"))
        and init.relative_to(PACK_ROOT).parts[0] not in ignored
    }
    assert found - listed == set(), f"packages pip would leave out: {sorted(found - listed)}"
