"""The house's rooms and the arrows between them: each import goes one way.

- `book/` is what a learner runs: it imports neither the authors' package `tools/` nor `tests/`;
- `tools/` (build, goldens, prose check, exercises, grading) imports `book` and never `tests/`;
- `tests/` imports `tools` and `book`; only tests import tests (conftest's helpers);
- chapters and exercise masters import only `book` and its public names, never `tools` or `tests`;
- no file edits `sys.path`: modules are found one way, the repository root on the path (`python -m tools.X`,
  pytest's `pythonpath`), `book` installed into the environment.
"""

import ast

import jupytext
import pytest

from tools.notebooks import ROOT, code_cells

ROOMS = ("book", "tools", "tests", "_ext")
TEST_MODULES = {p.stem for p in (ROOT / "tests").glob("*.py")}
TOOLS_MODULES = {p.stem for p in (ROOT / "tools").rglob("*.py")} - {"__init__"}  # its modules, in its packages too
TOOLS_MODULES |= {p.parent.name for p in (ROOT / "tools").glob("*/__init__.py")}  # and its packages
MAY_IMPORT = {  # room: the rooms it may import
    "book": {"book"},
    "tools": {"book", "tools"},
    "tests": {"book", "tools", "tests"},
    "_ext": {"book", "_ext"},
}


def python_files(room):
    return sorted((ROOT / room).rglob("*.py"))


def imported_modules(tree):
    """Every module an AST imports: `import a.b` gives a.b; `from a import b` gives a and a.b."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # a relative import stays in its own package
                continue
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def room_of(module):
    top = module.split(".")[0]
    if top in ("book", "tools", "tests"):
        return top
    if top in TEST_MODULES or top == "conftest":
        return "tests"
    if top in {p.stem for p in (ROOT / "_ext").glob("*.py")}:
        return "_ext"
    return None  # the standard library or an installed package


def test_every_import_goes_the_allowed_way():
    wrong = []
    for room in ROOMS:
        for path in python_files(room):
            for line, module in imported_modules(ast.parse(path.read_text(), str(path))):
                if module.split(".")[0] in TOOLS_MODULES:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module} by its bare name")
                    continue
                target = room_of(module)
                if target and target not in MAY_IMPORT[room]:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} ({room}) imports {module} ({target})")
    assert not wrong, "imports against the arrows:\n" + "\n".join(sorted(set(wrong)))


def _sys_path_edits(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys":
            parent = getattr(node, "_parent", None)
            if isinstance(parent, ast.Attribute) and parent.attr in ("insert", "append", "extend", "remove"):
                yield node.lineno
        for child in ast.iter_child_nodes(node):
            child._parent = node


def test_no_file_edits_sys_path():
    edits = [
        f"{path.relative_to(ROOT)}:{line}"
        for room in ROOMS
        for path in python_files(room)
        for line in _sys_path_edits(ast.parse(path.read_text(), str(path)))
    ]
    assert not edits, "sys.path edited (import through the package instead): " + ", ".join(edits)


def _public_book_names():
    import book

    names = set(book.__all__) | {"EXAMPLE_MODEL", "ModelCard"}
    names |= {p.stem for p in (ROOT / "book").glob("*.py") if not p.stem.startswith("_")}
    return names


@pytest.mark.parametrize("folder", ["chapters", "solutions"])
def test_pages_import_only_the_public_book(folder):
    public, wrong = _public_book_names(), []
    for page in sorted((ROOT / folder).glob("[0-9][0-9]_*.md")):
        for index, cell in enumerate(code_cells(jupytext.read(page))):
            lines = [ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
            try:
                tree = ast.parse("\n".join(lines))
            except SyntaxError:
                continue  # a cell that shows a deliberate error
            for _, module in imported_modules(tree):
                top, *rest = module.split(".")
                if room_of(module) in ("tools", "tests", "_ext"):
                    wrong.append(f"{page.name} cell {index}: imports {module}")
                elif top == "book" and rest and (rest[0] not in public or any(p.startswith("_") for p in rest)):
                    wrong.append(f"{page.name} cell {index}: imports {module}, not a public name of book")
    assert not wrong, "\n".join(wrong)
