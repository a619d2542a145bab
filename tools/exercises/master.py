"""The one reader of an exercise master, `solutions/NN_slug.md` (the format: docs/exercise-format.md).

`read_master(path)` reads a master once and returns a `Master`: its cells in order, each knowing the
question it belongs to, whether it is hidden, its role (a marker, the prompt, the solution, a public
test, probes, checks, planted wrong answers), and which of its rows lie between `# BEGIN SOLUTION` and
`# END SOLUTION` comments; and its questions, each with its prompt, its solution code, the function it
asks for, its public tests and its hidden cells. Everything that reads a master (tools/exercises/make_exercises.py,
tools/grading/release.py, the tests) reads it through here; a master that breaks the format raises MasterError.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import yaml

QUESTION_MARKER = "# BEGIN QUESTION"
HIDDEN_KINDS = ("# PROBES", "# CHECKS", "# WRONG")  # the first line of each kind of hidden code cell
SOLUTION_LINE = re.compile(r"\s*# (BEGIN|END) SOLUTION")


class MasterError(RuntimeError):
    """A master that does not follow docs/exercise-format.md; the message names the file and the fault."""


@dataclass
class Cell:
    """One cell of a master. `node` is jupytext's own cell (tools/exercises/make_exercises.py edits and writes it)."""

    node: object
    kind: str  # "code", "markdown" or "raw"
    source: str
    question: str | None  # the question whose part of the master holds it (None before the first)
    role: str  # "marker", "prompt", "solution", "test", "probes", "checks", "wrong" or "text"
    hidden: bool = False  # between raw cells `# BEGIN HIDDEN` and `# END HIDDEN` (the two markers are not)
    solution_rows: frozenset = frozenset()  # rows (from 1) between `# BEGIN SOLUTION` and `# END SOLUTION`

    @property
    def marker(self) -> str:
        """The raw cell's text, stripped ('# BEGIN HIDDEN'), or '' for any other cell."""
        return self.source.strip() if self.kind == "raw" else ""


@dataclass
class Question:
    name: str  # "q1"
    config: dict  # the YAML of its `# BEGIN QUESTION` cell (name, all_or_nothing, ...)
    prompt: str = ""  # its first Markdown cell
    solution: str = ""  # its solution cell's code without the `# BEGIN/END SOLUTION` lines
    function: str = ""  # the first function or class the solution defines
    parameters: list = field(default_factory=list)  # that function's (or class's __init__'s) parameters
    cells: list = field(default_factory=list)  # every Cell of its part of the master, hidden ones included

    def of_role(self, role: str) -> list:
        return [c for c in self.cells if c.role == role]


@dataclass
class Master:
    name: str  # the file's stem, "02_causal_mask"
    path: Path
    notebook: object  # jupytext's notebook, every cell in it
    cells: list  # [Cell] in order
    questions: dict  # {"q1": Question, ...} in order

    def hidden_sources(self, role: str) -> list:
        """The sources of every hidden cell of a role ("probes", "checks", "wrong"), in order."""
        return [c.source for c in self.cells if c.hidden and c.role == role]

    def question(self, name: str) -> Question:
        if name not in self.questions:
            raise MasterError(f"{self.where}: no question {name}")
        return self.questions[name]

    @property
    def where(self) -> str:
        return f"solutions/{self.name}.md"


def _solution_rows(source: str) -> frozenset:
    rows, inside = set(), False
    for n, line in enumerate(source.splitlines(), start=1):
        if line.strip() == "# END SOLUTION":
            inside = False
        if inside:
            rows.add(n)
        if line.strip() == "# BEGIN SOLUTION":
            inside = True
    return frozenset(rows)


def _definition(code: str) -> tuple[str, list]:
    """(name, parameters) of the first function or class a solution defines; a class's are its __init__'s."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "", []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node.name, [a.arg for a in node.args.args]
        if isinstance(node, ast.ClassDef):
            init = next((b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
            return node.name, [a.arg for a in init.args.args[1:]] if init else []
    return "", []


def _hidden_role(cell, where: str) -> str:
    if cell.cell_type == "code":
        for kind in HIDDEN_KINDS:
            if cell.source.startswith(kind):
                return kind[2:].lower()
    raise MasterError(f"{where}: a cell of a hidden block is neither # PROBES, # CHECKS nor # WRONG")


class _Reader:
    """The state of a read through a master's cells: the question, and which blocks are open."""

    def __init__(self, where: str):
        self.where, self.questions = where, {}
        self.question, self.hidden, self.in_tests, self.in_solution = None, False, False, False

    def role(self, node) -> str:
        """The role of the next cell; a marker opens or closes its block."""
        marker = node.source.strip() if node.cell_type == "raw" else ""
        if marker in ("# BEGIN HIDDEN", "# END HIDDEN"):
            if self.hidden == (marker == "# BEGIN HIDDEN"):
                raise MasterError(f"{self.where}: {marker} {'inside' if self.hidden else 'outside'} a hidden block")
            self.hidden = marker == "# BEGIN HIDDEN"
            return "marker"
        if self.hidden:
            return _hidden_role(node, self.where)
        if marker.startswith(QUESTION_MARKER):
            self._begin_question(marker)
        elif marker:
            self.in_tests = (self.in_tests or marker == "# BEGIN TESTS") and marker != "# END TESTS"
            self.in_solution = (self.in_solution or marker == "# BEGIN SOLUTION") and marker != "# END SOLUTION"
        if marker:
            return "marker"
        q = self.questions.get(self.question)
        if node.cell_type == "code" and self.in_tests:
            return "test"
        if q and node.cell_type == "code" and self.in_solution and not q.solution:
            return "solution"
        if q and node.cell_type == "markdown" and not q.prompt:
            return "prompt"
        return "text"

    def _begin_question(self, marker: str) -> None:
        config = yaml.safe_load(marker[len(QUESTION_MARKER) :]) or {}
        if not isinstance(config, dict) or not re.fullmatch(r"\w+", str(config.get("name", ""))):
            raise MasterError(f"{self.where}: a `# BEGIN QUESTION` cell without `name: qN`")
        self.question = str(config["name"])
        if self.question in self.questions:
            raise MasterError(f"{self.where}: two questions named {self.question}")
        self.questions[self.question] = Question(self.question, config)


def read_master(path) -> Master:
    """A master read once: its cells with their questions and roles, and its questions."""
    path = Path(path)
    notebook = jupytext.read(path)
    reader, cells = _Reader(f"solutions/{path.stem}.md"), []
    for node in notebook.cells:
        role = reader.role(node)
        cell = Cell(node, node.cell_type, node.source, reader.question, role, reader.hidden and role != "marker")
        cell.solution_rows = _solution_rows(node.source)
        cells.append(cell)
        q = reader.questions.get(reader.question)
        if q:
            q.cells.append(cell)
            if role == "prompt":
                q.prompt = node.source
            elif role == "solution":
                q.solution = "\n".join(ln for ln in node.source.splitlines() if not SOLUTION_LINE.match(ln))
                q.function, q.parameters = _definition(q.solution)
    if reader.hidden:
        raise MasterError(f"{reader.where}: # BEGIN HIDDEN without # END HIDDEN")
    return Master(path.stem, path, notebook, cells, reader.questions)
