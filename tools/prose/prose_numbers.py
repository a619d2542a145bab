"""Tie every number a chapter's prose states to the code cells near it.

The document comes from the chapter's `.md`, parsed by markdown-it-py with MyST's block syntax (the parser
MyST itself uses): its sections, its prose lines (paragraphs, list items, footnotes, display math, the titles
and bodies of directives such as admonitions and dropdowns, and the figure captions and alt texts of code
cells) and where each code cell stands. Front matter, literal blocks (```sh, indented code, directives that
show code) and MyST targets and comments are not prose. What each code cell printed comes from the golden:
the i-th code cell of the chapter is the i-th code cell of the golden (markdown cells of the golden, if any,
are ignored), and their sources must agree, or the golden is stale.

The rule is `RULE` below: `describe_rule()` prints it, with the defining constants, in every failure message.
The mutation self-test that measures how much of a changed figure it catches is tests/test_prose_mutations.py.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
from dataclasses import dataclass, field, replace

import jupytext
from markdown_it import MarkdownIt
from mdit_py_plugins.colon_fence import colon_fence_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin
from mdit_py_plugins.myst_blocks import myst_block_plugin
from mdit_py_plugins.myst_role import myst_role_plugin

from book.source_figures import ROWS as SOURCE_FIGURES
from tools.notebooks import (
    CHAPTERS,
    NUMBER,
    code_cells,
    code_literals,
    numbers_in,
    output_text,
    read_golden,
    why_stale,
)
from tools.prose.prose_constants import DEFINING

CROSS_REFERENCE = re.compile(r"\b(?:chapters?|sections?)\s+$", re.IGNORECASE)
CITATION_YEAR = re.compile(r"\([A-Z][^()]*?,\s*$")
ROLE_OR_LINK = re.compile(r"\{\w+\}`[^`]*`|\]\([^)]*\)|^\([\w-]+\)=$", re.MULTILINE)
FIGURE_REPR = re.compile(r"^<(Figure|matplotlib\.|Axes)[^>]*>$")

# MyST's block syntax on CommonMark: front matter, (targets)= and +++ breaks and % comments, ::: directives,
# $$ math, footnotes, {role}`...`, tables
MYST = (
    MarkdownIt("commonmark")
    .use(front_matter_plugin)
    .use(myst_block_plugin)
    .use(colon_fence_plugin)
    .use(dollarmath_plugin)
    .use(footnote_plugin)
    .use(myst_role_plugin)
    .enable("table")
)
DIRECTIVE = re.compile(r"\{([\w:-]+)\}\s*(.*)")  # the info of a directive's fence: {name} argument
OPTION = re.compile(r"\s*:[\w-]+:")  # a directive's `:key: value` option line
LITERAL_DIRECTIVES = {
    "code-block",
    "code",
    "sourcecode",
    "literalinclude",
    "raw",
    "raw-cell",
    "eval-rst",
    "eval-md",
    "toctree",
    "tableofcontents",
    "bibliography",
    "nb-exec-table",
    "mermaid",
}
CAPTION_KEY = re.compile(r"(\s*)(caption|alt):(.*)")  # a caption or alt text in a code cell's YAML header


RULE = """\
1. A *section* is the text under one heading down to the next heading of any level; a subsection also
   sees the cells of the opening of the sections it belongs to.
2. A number stated in a paragraph (a bullet, a caption and an alt text are paragraphs) of a section with
   code cells that print must be printed by, or be a numeric literal (an input) of, a cell of that section
   that stands above the paragraph, or the one cell right after it (a caption or alt text: its own cell
   and those above). The sign counts: -0.38 is not 0.38. A failure lists the cells nearest first.
3. A section whose cells print nothing (a chapter's opening, a Summary) restates results: each number of
   a paragraph there must be printed by a section (## heading, with its subsections) that prints at least
   two of the paragraph's numbers (its only one, if it states one).
4. Exempt, by rule: a number after "chapter"/"section" (a cross-reference); a year in a citation,
   "(Name et al., 2017)" or "(2022)"; a number a hyphen joins to a word before it (GPT-2, Llama-2); the
   number of an item of an ordered list ("1. " opening the item's first line; "400. " opening a wrapped
   line of a paragraph is checked); inside an Erratum admonition, the source's wrong figure
   it quotes; 0, 1 and 2 inside a formula (math holding a variable, as $n(n+1)/2$); literal blocks (```sh);
   and the chapter's *defining constants*, each a short phrase listed in `prose_constants.py` with its
   reason (e.g. "adds up to 1"): the number is exempt only inside that exact phrase, so "adds up to 2" is
   checked.
5. A printed value is stated with its label. A cell prints a number in output *segments* (a line cut at
   ";", "|" and ", "); the segment's label is its words (two letters or more, stemmed, not a stop word, a
   unit or a word of code such as torch, float32, ax, np). A cell ties a stated number it prints only by
   a segment that has no label (a printed list or array, [0.198 0.126 ...], a row of bare numbers), or one
   whose label shares a word with the sentence that states the number or the sentence before it (a
   sentence is cut at ".", "!", "?" and ";"; a word is shared when the stems are equal or one is a prefix
   of the other, three letters or more: "ref" and "reference") and that, when the prose writes a unit right
   after the number (nats, tokens, GiB, us, times, requests, ...), writes the same unit after it, or none.
   A number the cell does not print but holds as a literal ties when its line of code has no label word of
   three letters or more, or shares one with those sentences; a literal that stands only in a plot's layout
   (figsize=(7, 3), fontsize=9, ...) is no input and ties nothing, and a small integer the prose writes with
   a unit of measure (nats, ms, GiB, %, ...) ties only a literal whose line names that unit (a count in the
   code, WINDOWS = 64, is not 64 nats). This holds for every number, figure (a
   decimal, or an integer of three digits or more) and small integer alike. Print a result with its
   label, as the house style does: print(f"held-out loss: {loss:.2f} nats").
6. A small integer goes with its figures. When its sentence also states a figure that a cell in scope
   prints, the small integer must be printed on one output line together with another number of that
   sentence ("position 3 ... 2.94" against the row "3  lifts  2.94"). State a count that no row prints
   beside the figures in a sentence of its own.
7. A figure is the value its label names, not a neighbour's. When a cell in scope prints (or holds) a
   figure one slip away from the stated one (its last digit one up or down, ten times, a tenth, its point
   dropped: 153 and 154, 0.1 and 0.01), the stated value must be printed under a label whose nearest word
   of the prose stands at least as near the number as the nearest word of any such neighbour's label. Near
   is counted in clause breaks first (, ; : . ! ? and dashes; a parenthesis is an aside, skipped when it
   lies between), then in words. On a tie, the neighbour wins when its output line prints more of the
   other figures of the sentences than the stated value's line does ("temperature 0.1: favourite 0.9978"
   names the 0.1 of "0.9978 at a temperature of 0.1"). And a decimal printed as one end of a range
   ("unscaled 0.93 to 0.94") ties a stated number only when the sentence, or the one before, also states
   the range's other end.

`problems(..., strict=False)` holds a page to the rule as it stood before
rules 5 and 6 were tightened: rule 5 only for a figure when the cells in scope also print a value one slip
away from it (its last digit one up or down, or its decimal point moved one place, and not by a cell tagged
nbval-ignore-output), and no rule 6 or 7; the rest (the sentence before, prefixes, rule 4) holds for them too.
"""


class StaleGolden(AssertionError):
    pass


class Unreadable(AssertionError):
    """The chapter's text and Jupytext's reading of it disagree (e.g. on the number of code cells)."""


def is_figure(value):
    """A figure: a decimal, or an integer of three or more digits. Otherwise a small integer."""
    digits = value.lstrip("-")
    return "." in digits or len(digits) >= 3


@dataclass
class Section:
    index: int
    level: int
    title: str
    line: int
    within: tuple = ()  # indices of this section and all its subsections
    parents: tuple = ()  # indices of the sections it is a subsection of (below the chapter title)


@dataclass
class Cell:
    index: int  # 1-based among the chapter's code cells
    line: int  # the line of its ```{code-cell} fence in the .md
    section: int
    printed: dict  # canonical number -> the first output line that prints it
    literals: set
    labels: dict = field(default_factory=dict)  # canonical number -> label words of each segment printing it
    unitlist: dict = field(default_factory=dict)  # canonical number -> the word after it, per printing segment
    partners: dict = field(default_factory=dict)  # canonical number -> the other end of its range ("A to B"), or None
    lines_of: dict = field(default_factory=dict)  # canonical number -> the output line of each printing segment
    literal_labels: dict = field(default_factory=dict)  # canonical literal -> label words of its source lines
    literal_units: dict = field(default_factory=dict)  # canonical literal -> the units each of those lines names
    machine_dependent: bool = False  # tagged nbval-ignore-output: what it prints differs from run to run
    rows: list = field(default_factory=list)  # the set of numbers of each output line

    def vouches(self, value, context=None, strict=False):
        """The cell prints `value` or has it as a literal; given the label words and unit of the prose that
        states it (`context`), by a segment or a line of code that labels it as rule 5 says. Not `strict` (a
        page being rewritten), only a figure is held to its label, and only a labelled segment ties it."""
        if context is None or not (strict or is_figure(value)):
            return value in self.literals or value in self.printed
        words, unit = context[:2]
        fits = lambda w, u: shares(w, words) and (not unit or u in (unit, ""))  # noqa: E731
        printed = list(zip(self.labels.get(value, ()), self.unitlist.get(value, ())))
        if strict and "." in value and len(context) > 3:  # rule 7: a measured range's end goes with its other end
            ends = self.partners.get(value, [None] * len(printed))
            printed = [p for p, other in zip(printed, ends) if other is None or other in context[3]]
        if not strict:
            return any(fits(w, "") for w in self.literal_labels.get(value, ())) or any(fits(w, u) for w, u in printed)
        if not printed:  # an input only: its line of code is its label, if it has one, and names its measure
            lines = zip(self.literal_labels.get(value, ()), self.literal_units.get(value, ()))
            measured = unit in MEASURES and not is_figure(value)  # a count is no measure: 64 windows, not 64 nats
            printed = [(w, "") for w, units in lines if not measured or unit in units]
        return any(not (w - CODE_WORDS) or fits(w, u) for w, u in printed)

    def closeness(self, value, context):
        """How near the best label that prints `value` (or the line of code that holds it) stands to the stated
        number in the prose: (the distance of its nearest shared word, as `distances` gives it; minus how many
        other figures of the sentences its output line prints, or 1 for a line of code); FAR for a segment with
        no label; None when the cell does not tie `value` at all."""
        if not self.vouches(value, context, strict=True):
            return None
        words, unit, near, others = context[:4]
        figures = {v for v in others if is_figure(v)}
        fits = lambda u: not unit or u in (unit, "")  # noqa: E731
        printed = zip(self.labels.get(value, ()), self.unitlist.get(value, ()), self.lines_of.get(value, ()))
        found = [
            (match(w - CODE_WORDS, near), -len(self.rows[i] & figures - {value})) for w, u, i in printed if fits(u)
        ]
        if value in self.literals:  # an input is on no output line
            found += [(match(w - CODE_WORDS, near), 1) for w in self.literal_labels.get(value, ())]
        return min(found, default=FAR)


NONE = (99, 99)  # the distance of a word the prose does not have
FAR = (NONE, 1)  # a label that shares no word with the prose, or no label


def far(gap):
    """Rule 7's distance in words: '0 breaks and 2 words away, on one output line with 1 other figure ...'."""
    row = f", on one output line with {-gap[1]} other figures of its sentences" if gap[1] < 0 else ""
    return "no shared word" if gap[0] == NONE else f"{gap[0][0]} clause breaks and {gap[0][1]} words away{row}"


def match(label, near):
    """How near the nearest word of `label` stands to the stated number (`near`: word -> its distance), or NONE."""
    return min((d for a in label for b, d in near.items() if shares({a}, {b})), default=NONE)


@dataclass(frozen=True)
class Line:
    number: int  # line number in the .md file
    text: str
    section: int
    paragraph: int  # lines of one paragraph (or bullet, caption, alt text) share this id
    kind: str  # "heading", "text", "caption" or "alt"
    display_math: bool = False  # the line lies inside a $$ ... $$ block


@dataclass
class Chapter:
    name: str
    lines: list
    cells: list
    sections: list
    erratum_lines: set = field(default_factory=set)
    item_lines: set = field(default_factory=set)  # the first line of each item of an ordered list ("1. ")
    quoted: set = field(default_factory=set)  # source figures an erratum note of this chapter quotes

    @property
    def path(self):
        return f"chapters/{self.name}.md"

    def mutated(self, number, text):
        """A copy in which the prose line `number` reads `text` (nothing else is re-read)."""
        return replace(self, lines=[replace(ln, text=text) if ln.number == number else ln for ln in self.lines])


@dataclass
class Problem:
    chapter: str
    line: int
    stated: str
    text: str
    scope: str  # which cells were searched, in words
    nearby: list  # [(cell, distance)] nearest first

    def __str__(self):
        shown = []
        for cell, _ in self.nearby[:4]:
            nums = sorted(cell.printed, key=lambda v: float(v))
            close = sorted(nums, key=lambda v: abs(float(v) - float(self.stated)))[:8]
            prints = ", ".join(sorted(close, key=float)) if close else "nothing"
            shown.append(
                f"      code cell {cell.index} (line {cell.line}) prints {prints}"
                + (
                    f"; literals {', '.join(sorted(cell.literals, key=lambda v: (float(v), v))[:8])}"
                    if cell.literals
                    else ""
                )
            )
        more = f"\n      ... and {len(self.nearby) - 4} more cells" if len(self.nearby) > 4 else ""
        return (
            f"chapters/{self.chapter}.md:{self.line}: states {self.stated}, but {self.scope} prints it"
            f" or has it as an input:\n    | {self.text.strip()[:100]}\n"
            + ("\n".join(shown) + more if shown else "      (no code cell there)")
        )


# ----------------------------------------------------------------------------------------------------
# scanning the MyST text into blocks: which lines are prose, which are headings, where the code cells stand


@dataclass(frozen=True)
class Block:
    """Lines start..end-1 of the file (0-based) that the check reads as one unit."""

    start: int
    end: int
    kind: str  # "heading", "text", "math", "code-cell" or "erratum" (the lines of an Erratum admonition)
    level: int = 0  # a heading's
    title: str = ""  # a heading's


def blocks(text, first=0):
    """The blocks of the MyST `text`, whose first line is line `first` of the file, in the file's order."""
    tokens = MYST.parse(text)
    found = [block for i, token in enumerate(tokens) for block in token_blocks(tokens, i, first)]
    return sorted(found, key=lambda b: (b.start, b.kind != "erratum"))


def token_blocks(tokens, i, first):
    """The blocks that token `i` opens: a heading, a paragraph or table (prose), display math, a fence."""
    token = tokens[i]
    if token.map is None:
        return []
    start, end = token.map[0] + first, token.map[1] + first
    if token.type == "heading_open":
        return [Block(start, end, "heading", int(token.tag[1:]), tokens[i + 1].content.strip())]
    if token.type in ("paragraph_open", "table_open", "html_block"):
        return [Block(start, end, "text")]
    if token.type == "list_item_open" and token.markup in (".", ")"):
        return [Block(start, start + 1, "item")]  # an ordered list's item: its number is no figure
    if token.type in ("math_block", "math_block_label"):
        return [Block(start, end, "math")]
    if token.type in ("fence", "colon_fence"):
        return fence_blocks(token, start, end)
    return []  # front matter, targets, comments, +++ breaks, indented code, rules; lists and quotes hold paragraphs


def fence_blocks(token, start, end):
    """A code cell; a directive's title and body, read as prose (math as math); nothing for a literal block."""
    directive = DIRECTIVE.fullmatch(token.info.strip())
    if directive is None or directive.group(1) in LITERAL_DIRECTIVES:
        return []  # ```sh and the like show code, not figures
    name, argument = directive.groups()
    if name == "code-cell":
        return [Block(start, end, "code-cell")]
    body, body_start = directive_body(token.content, start + 1)
    if name == "math":
        return [Block(body_start, end - 1, "math")]
    title = [Block(start, start + 1, "text")] if argument else []
    erratum = [Block(start, end, "erratum")] if name == "admonition" and argument.startswith("Erratum") else []
    return erratum + title + blocks(body, body_start)


def directive_body(content, first):
    """A directive's body without its options (`:key: value` lines, or a --- block), and the line it starts on."""
    lines = content.splitlines(keepends=True)
    skip = 0
    if lines and lines[0].strip() == "---":
        skip = next((i + 1 for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
    while skip < len(lines) and OPTION.match(lines[skip]):
        skip += 1
    return "".join(lines[skip:]), first + skip


# ----------------------------------------------------------------------------------------------------
# reading a chapter: sections, prose lines and code cells from the blocks


def golden_code_cells(name):
    return code_cells(read_golden(name))


def read(name, text=None, golden=None):
    """The chapter `name` as sections, prose lines and code cells with what the golden printed."""
    text = (CHAPTERS / f"{name}.md").read_text() if text is None else text
    golden = golden_code_cells(name) if golden is None else golden
    mine = jupytext_code_cells(name, text)
    check_golden(name, mine, golden)
    found = blocks(text)
    check_fences(name, found, mine)
    chapter = Chapter(name, [], [], [Section(0, 0, "(before the first heading)", 1)])
    raw, paragraphs, cells = text.splitlines(), itertools.count(), iter(zip(mine, golden))
    for block in found:
        add_block(chapter, block, raw, paragraphs, cells)
    nest(chapter.sections)
    chapter.quoted = {
        r["source_text"].replace(",", "") for r in SOURCE_FIGURES if r["chapter"] == name and r["course_text"]
    }
    return chapter


def jupytext_code_cells(name, text):
    """The code cells of the chapter as Jupytext reads them (their source and metadata)."""
    try:
        return code_cells(jupytext.reads(text, fmt="md:myst"))
    except Exception as error:  # Jupytext's own message says which cell and why
        raise Unreadable(f"{name}: Jupytext cannot read the chapter: {error}") from error


def check_fences(name, found, mine):
    """markdown-it sees the code cells Jupytext sees."""
    fences = sum(block.kind == "code-cell" for block in found)
    if fences != len(mine):
        raise Unreadable(
            f"{name}: markdown-it finds {fences} code-cell fences where Jupytext reads "
            f"{len(mine)} code cells: is a fence unclosed or indented?"
        )


def add_block(chapter, block, raw, paragraphs, cells):
    """Add what a block holds to the chapter: a section, prose lines, a code cell or erratum lines."""
    if block.kind == "heading":
        add_heading(chapter, block, raw, next(paragraphs))
    elif block.kind in ("text", "math"):
        add_prose(chapter, block, raw, next(paragraphs))
    elif block.kind == "code-cell":
        add_code_cell(chapter, block.start, raw[block.start : block.end], *next(cells), paragraphs)
    elif block.kind == "item":
        chapter.item_lines.add(block.start + 1)
    else:
        chapter.erratum_lines |= set(range(block.start + 1, block.end + 1))


def check_golden(name, mine, golden):
    """The golden holds the chapter's code cells, in order, or it is stale (tools.notebooks.why_stale)."""
    stale = why_stale(name, mine, golden, tags=False)
    if stale:
        raise StaleGolden(stale)


def add_heading(chapter, block, raw, paragraph):
    """A heading opens a section; its own line is a paragraph of its own."""
    chapter.sections.append(Section(len(chapter.sections), block.level, block.title, block.start + 1))
    for i in range(block.start, block.end):
        chapter.lines.append(Line(i + 1, raw[i], len(chapter.sections) - 1, paragraph, "heading"))


def add_prose(chapter, block, raw, paragraph):
    """The non-blank lines of a paragraph (list item, footnote, table, directive title) or of display math."""
    for i in range(block.start, block.end):
        if raw[i].strip():
            chapter.lines.append(
                Line(i + 1, raw[i], len(chapter.sections) - 1, paragraph, "text", block.kind == "math")
            )


def add_code_cell(chapter, start, fence, cell, gold, paragraphs):
    """A code cell: its caption and alt text are prose; what it prints and its literals go to a Cell."""
    section = len(chapter.sections) - 1
    header = caption_lines(start, fence, section, paragraphs)
    check_captions(chapter.name, len(chapter.cells) + 1, cell, header)
    chapter.lines += header
    chapter.cells.append(cell_of(len(chapter.cells) + 1, start + 1, section, cell, gold))


def caption_lines(start, fence, section, paragraphs):
    """The caption and alt text lines of a code cell's YAML header (between --- lines right after the
    fence, which is line `start`), each with its key blanked so the offsets of its numbers stay."""
    if len(fence) < 2 or fence[1] != "---":
        return []
    end = next((i for i in range(2, len(fence)) if fence[i] == "---"), 1)
    lines, key, indent = [], None, 0
    for i in range(2, end):
        m = CAPTION_KEY.match(fence[i])
        if m:
            key, indent, paragraph = m.group(2), len(m.group(1)), next(paragraphs)
            text = " " * (len(fence[i]) - len(m.group(3))) + m.group(3)
        elif key and len(fence[i]) - len(fence[i].lstrip()) > indent:
            text = fence[i]  # a continuation line of the caption or alt text
        else:
            key = None
            continue
        lines.append(Line(start + i + 1, text, section, paragraph, key))
    return lines


def check_captions(name, index, cell, header_lines):
    """The captions and alt texts read from the raw lines are the ones Jupytext parsed into the metadata."""
    meta = cell.metadata.get("mystnb", {})
    parsed = " ".join([meta.get("figure", {}).get("caption", ""), meta.get("image", {}).get("alt", "")])
    mine = [v for ln in header_lines for v, _, _ in numbers_in(ln.text)]
    theirs = [v for v, _, _ in numbers_in(parsed)]
    if sorted(mine) != sorted(theirs):
        raise Unreadable(f"{name}: code cell {index}: the caption and alt text read {mine}, Jupytext {theirs}")


def cell_of(index, line, section, cell, gold, layout=True):
    """A code cell as the check sees it: what its golden printed, with labels, and its literals."""
    printed, labels, unitlist, partners, lines_of, rows = {}, {}, {}, {}, {}, []
    for out_line in output_text(gold).splitlines():
        if FIGURE_REPR.match(out_line.strip()):  # "<Figure size 700x300 with 1 Axes>" is no figure
            continue
        rows.append({value for value, _, _ in numbers_in(out_line)})
        for value, _, _ in numbers_in(out_line):
            printed.setdefault(value, out_line.strip())
        for segment in segments(out_line):
            for value, words, unit, other in labelled(segment):
                labels.setdefault(value, []).append(words)
                unitlist.setdefault(value, []).append(unit)
                partners.setdefault(value, []).append(other)
                lines_of.setdefault(value, []).append(len(rows) - 1)
    where = {}  # literals of folded plot cells count too: alt texts describe their axes
    literals = code_literals(cell.source, where) - (layout_only(cell.source) if layout else set())
    literal_labels = {
        v: [frozenset(w for w in label_words(re.sub(r"[_\W\d]+", " ", src)) if len(w) > 2) for src in srcs]
        for v, srcs in where.items()
        if v in literals
    }  # a name of two letters (ks, np) labels nothing
    literal_units = {v: [units_named(src) for src in srcs] for v, srcs in where.items() if v in literals}
    return Cell(
        index,
        line,
        section,
        printed,
        literals,
        labels,
        unitlist,
        partners,
        lines_of,
        literal_labels,
        literal_units,
        "nbval-ignore-output" in cell.metadata.get("tags", []),
        rows,
    )


# keyword arguments that lay a plot out: their numbers size and place the picture, they are no inputs of a result
LAYOUT = frozenset(
    "figsize width_ratios height_ratios dpi fontsize linewidth lw markersize ms alpha pad zorder".split()
)


def layout_only(source):
    """The numeric literals of a cell's source that stand only in a plot's layout arguments (figsize=(7, 3))."""
    lines = [ln if not ln.lstrip().startswith(("%", "!")) else "" for ln in source.splitlines()]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return set()
    layout = {
        id(n) for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg in LAYOUT for n in ast.walk(k.value)
    }
    inside, outside = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            forms = {repr(node.value) if isinstance(node.value, float) else str(node.value)}
            if isinstance(node.value, float) and node.value.is_integer() and abs(node.value) < 1e15:
                forms.add(str(int(node.value)))
            (inside if id(node) in layout else outside).update(forms)
    return inside - outside


# units of measurement: a small integer the prose writes with one is a measured or converted quantity, not a count,
# and a literal ties it only when its line of code names the unit (KiB = 1024, MS_PER_S = 1000)
MEASURES = frozenset("nat ms us gib mib kib tib gb tb mb kb byte %".split())


def units_named(src):
    """The units of measurement a line of code names ('KiB', 'nats', 'ms_per_token' -> kib, nat, ms)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z]+|%", src.replace("_", " "))}
    return frozenset(w[:-1] if w.endswith("s") and w[:-1] in MEASURES else w for w in words) & MEASURES


def labelled(segment):
    """(value, label words, unit, the other end of its range or None) of each number of an output segment; a
    printed list labels none; two numbers joined by "to" ("0.93 to 0.94") are the ends of a range."""
    words = frozenset() if LIST.search(segment) else label_words(NUMBER.sub(" ", LIST.sub(" ", segment)))
    found = numbers_in(segment)
    joined = [RANGE_TO.fullmatch(segment[a[2][1] : b[2][0]]) is not None for a, b in zip(found, found[1:])]
    other = [
        (found[i + 1][0] if i < len(joined) and joined[i] else None)
        or (found[i - 1][0] if i and joined[i - 1] else None)
        for i in range(len(found))
    ]
    return [(value, words, unit_after(segment, span[1]), o) for (value, _, span), o in zip(found, other)]


RANGE_TO = re.compile(r"\s*(?:[A-Za-z%]+\s+)?to\s+")


def nest(sections):
    """Each section's `within` (itself and its subsections) and `parents` (the sections it lies in)."""
    for s in sections:
        after = sections[s.index + 1 :]
        stop = next((t.index for t in after if t.level <= s.level), len(sections))
        s.within = tuple(range(s.index, stop)) if s.level else (0,)
    for s in sections:
        s.parents = tuple(t.index for t in sections if t.level > 1 and t.index != s.index and s.index in t.within)


# ----------------------------------------------------------------------------------------------------
# checking it


def constant_spans(chapter, text):
    """Spans of `text` covered by one of the chapter's listed defining-constant phrases."""
    spans = []
    for phrase, _reason in DEFINING.get(chapter.name, ()):
        spans += [(m.start(), m.end()) for m in re.finditer(re.escape(phrase), text)]
    return spans


INLINE_MATH = re.compile(r"(?<!\$)\$(?!\$)([^$]+)\$(?!\$)|\$\$(.+?)\$\$")
VARIABLE = re.compile(r"(?<![\\A-Za-z{])[A-Za-z](?![A-Za-z])")


def formula_spans(line):
    """Spans of the line that are a formula: math holding a variable (a lone letter such as n, T, p_t)."""
    spans = [(m.start(), m.end()) for m in INLINE_MATH.finditer(line.text)]
    if line.display_math and "$$" not in line.text.strip("$ "):
        spans = [(0, len(line.text))]
    bare = lambda t: re.sub(r"\\(text|mathrm|operatorname)\{[^}]*\}|\\[A-Za-z]+", " ", t)
    return [(a, b) for a, b in spans if VARIABLE.search(bare(line.text[a:b]))]


def stated_numbers(chapter, line):
    """(value, offset, None) of the numbers of a prose line that the check holds to the cells, and
    (value, offset, why) of the ones rule 4 exempts."""
    clean = ROLE_OR_LINK.sub(lambda m: " " * len(m.group(0)), line.text)
    constants, formulas = constant_spans(chapter, line.text), formula_spans(line)
    checked, exempt = [], []
    for value, offset, span in numbers_in(clean):
        why = (
            written_exemption(clean, value, span, line.number in chapter.item_lines)
            or erratum_quote(chapter, line, value)
            or (inside(span, constants) and "defining constant")
            or (value in ("0", "1", "2") and inside(span, formulas) and "part of a formula")
            or None
        )
        (exempt if why else checked).append((value, offset, why))
    return checked, exempt


def written_exemption(clean, value, span, item=False):
    """A cross-reference ("chapter 3") or the year of a citation ("(Vaswani et al., 2017)"), or None."""
    before = clean[: span[0]]
    if CROSS_REFERENCE.search(before):
        return "cross-reference"
    if item and not before.strip() and re.match(r"[.)] ", clean[span[1] : span[1] + 2]):
        return "list marker"  # "1. **The trained length.**": the number of an item of an ordered list
    if re.search(r"[A-Za-z]-$", before):
        return "part of a name"  # GPT-2, Llama-2: a hyphen joins it to a word
    if (
        re.fullmatch(r"(19|20)\d\d", value)
        and clean[span[1] : span[1] + 1] == ")"
        and (CITATION_YEAR.search(before) or before.endswith("("))
    ):
        return "year of a publication"
    return None


def erratum_quote(chapter, line, value):
    """Inside an Erratum admonition, the source's wrong figure it quotes is exempt."""
    return "erratum quote" if line.number in chapter.erratum_lines and value.lstrip("-") in chapter.quoted else None


def inside(span, spans):
    return any(a <= span[0] and span[1] <= b for a, b in spans)


def printing(cell):
    return bool(cell.printed or cell.literals)


def local_cells(chapter, section_id, paragraph_lines, strict=True):
    """The cells a paragraph of a section with code cells is held against (rule 2): every cell of its section
    and of the sections it belongs to that stands above the paragraph, and the one cell right after it; a
    caption or alt text, its own cell and those above."""
    sec = chapter.sections[section_id]
    cells = [c for c in chapter.cells if c.section in {section_id} | set(sec.parents)]
    first = paragraph_lines[0].number
    above = [c for c in cells if c.line <= first]
    if paragraph_lines[0].kind in ("caption", "alt"):
        return above
    return above + [c for c in cells if c.line > first][:1]


SEGMENT = re.compile(r";|\||,\s")
SENTENCE_END = re.compile(r"[.!?;](?=\s)")
WORD = re.compile(r"[a-z\u00b5][a-z\u00b5'\-]*")
STOP = set(
    """the and for with from that this these those are its was were per one each all not but into than
then has have had who which what when where while there their them they our you your can could would will
about over under after before only also more most less least same other just out off now how why very much
many any some such both either nor yet own here been being does did done get gets got let lets may might
shall should must use used uses using of to in on at is it as an by or be we if no so up do he she me my us""".split()
)
# words of plotting and array code, which label no number of a cell's source: ax.set_xticks(range(1, 25))
CODE_WORDS = frozenset(
    """ax axe fig figsize plt subplot np arange array range enumerate set str int float xtick ytick
xlabel ylabel xlim ylim xytext xy axvline axhline linewidth linestyle color colour marker label annotate text
zip len round print torch tensor append bar barh plot ha va fontsize alpha legend grid pad padd width height
ink dtype geomspace logspace linspace float16 float32 float64 bfloat16 int64 bool unique astype""".split()
)
UNITS = set("nat token time gib mib kib tib byte us ms".split())


UNIT = re.compile(r"\s*(%|[A-Za-z\u00b5][A-Za-z\u00b5/]*)")


def unit_after(text, end):
    """The word written right after a number ('nats' in '0.61 nats', '%' in '32%'), singular, lower case; or ''."""
    m = UNIT.match(text, end)
    if not m:
        return ""
    w = m.group(1).lower().split("/")[0]
    w = {"\u00b5s": "us"}.get(w, w)
    w = w[:-1] if w.endswith("s") and len(w) > 3 else w
    return w if w in UNITS_LIST else ""


UNITS_LIST = set(
    """nat token time gib mib kib tib gb tb mb kb byte us ms % operation request conversation parameter
position step trial word million billion flop vector pair head layer episode passe pass""".split()
)


LIST = re.compile(r"[\[(]\s*-?\d[\d.e+-]*(?:[\s,]+-?\d[\d.e+-]*)+\s*[\])]")  # a printed list or array of numbers


def slips(value):
    """The values one slip of a digit makes of `value`: its last digit one up or down, or the decimal point moved
    by one place (x10, /10): '0.197' -> {'0.196', '0.198', '1.970', '0.0197'}; '100' -> {'99', '101', '1000', '10'}."""
    sign, digits = ("-", value[1:]) if value.startswith("-") else ("", value)
    whole, _, frac = digits.partition(".")
    n, places = int(whole + frac), len(frac)

    def write(k, p):
        text = str(k).rjust(p + 1, "0")
        return sign + (text[:-p] + "." + text[-p:] if p else text)

    out = {write(n + 1, places), write(n * 10, places)}
    if n > 0:  # a last digit one down (0 has none that is written the same way)
        out.add(write(n - 1, places))
    if places:
        out.add(write(n, places + 1))
    elif n % 10 == 0:
        out.add(write(n // 10, 0))
    return out - {value}


def segments(out_line):
    """The parts of an output line that label their own numbers: split at ';', '|' and ', '."""
    return [part for part in SEGMENT.split(out_line) if part.strip()]


def stem(word):
    """A crude stem, enough to match 'fits' with 'fit', 'scaled' with 'scale', 'tokens' with 'token'."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def shares(label, words):
    """A label shares a word with the sentence: the same stem, or one a prefix of the other of three letters or
    more ('ref' and 'reference', 'cach' and 'cached')."""
    return any(
        a == b or (min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a))) for a in label for b in words
    )


@functools.lru_cache(maxsize=None)
def label_words(text):
    """The label words of a text: words of two letters or more, lower case, stemmed, no stop words or units."""
    words = set()
    for w in WORD.findall(text.lower()):
        w = w.strip("'-")
        if len(w) < 2 or w in STOP:
            continue
        w = w[:-1] if w[:-1] in UNITS else stem(w)  # "times" is the unit time, not a word "tim"
        if w not in UNITS and w not in STOP:
            words.add(w)
    return frozenset(words)


def sentence_words(para, line, offset):
    """The label words of the sentence of paragraph `para` that holds the number at `offset` of `line` (and of
    the sentence before it), and where that sentence starts in the paragraph (which sentence it is)."""
    text, start = "", 0
    for ln in para:
        if ln is line or ln.number == line.number:
            start = len(text) + offset
        text += ln.text + " "
    clean = ROLE_OR_LINK.sub(lambda m: " " * len(m.group(0)), text)
    ends = [0] + [m.end() for m in SENTENCE_END.finditer(clean, 0, start)]
    begin = ends[-2] if len(ends) > 1 else 0  # the sentence before counts too: it often names the subject
    end = next((m.end() for m in SENTENCE_END.finditer(clean, start)), len(clean))
    near = distances(clean, begin, end, start)
    values = lambda a: frozenset(v for v, _, _ in numbers_in(clean[a:end]))  # noqa: E731
    return label_words(NUMBER.sub(" ", clean[begin:end])), ends[-1], near, (values(begin), values(ends[-1]))


def distances(clean, begin, end, start):
    """{label word of `clean[begin:end]`: how far its nearest occurrence stands from the number at `start`}, as
    (clause breaks between them, words between them). A clause break is one of , ; : . ! ? and a dash; a
    parenthesis is an aside: a word inside one the number is not in is one break further, and an aside
    between the word and the number adds neither breaks nor words. A number counts as one word."""
    text = NUMBER.sub(lambda m: "0" + " " * (len(m.group(0)) - 1), clean[begin:end])
    depth, level = [], 0
    for ch in text:
        level += ch == "("
        depth.append(level)
        level -= ch == ")" and level > 0
    tokens = [(m.start(), m.group(0)) for m in TOKEN.finditer(text)]
    at = start - begin
    here = next((i for i, (pos, _) in enumerate(tokens) if pos >= at), len(tokens))
    mine = depth[at] if at < len(depth) else 0
    levels = range(max(depth, default=0) + 1)
    # counts[L][i]: (breaks, words) among tokens[:i] at a depth of at most L
    counts = {L: [(0, 0)] for L in levels}
    for pos, token in tokens:
        brk = token in BREAKS
        for L in levels:
            b, w = counts[L][-1]
            inside = depth[pos] <= L
            counts[L].append((b + (inside and brk), w + (inside and not brk)))
    near = {}
    for i, (pos, token) in enumerate(tokens):
        words = label_words(token) if i != here else ()
        if not words:
            continue
        lo, hi = sorted((i, here))
        floor = counts[min(mine, depth[pos])]
        breaks = floor[hi][0] - floor[lo + 1][0] + abs(depth[pos] - mine)
        gap = (breaks, floor[hi][1] - floor[lo + 1][1])
        for w in words:
            near[w] = min(near.get(w, NONE), gap)
    return near


TOKEN = re.compile(r"[\w'\u00b5-]+|[,;:.!?\u2014\u2013]")
BREAKS = frozenset(",;:.!?\u2014\u2013")


def problems(chapter, only=None, strict=True):
    """Every stated number that the rule does not tie to a code cell, as Problems (of the paragraphs `only`).
    `strict=False` holds the page to the rule as it stood before it was tightened (a page being rewritten)."""
    found = []
    for para in paragraphs(chapter, only):
        stated = stated_in(chapter, para)
        if stated:
            pool, scope = cells_in_scope(chapter, para, stated, strict)
            found += untied(chapter, stated, pool, scope, strict)
    return found


def paragraphs(chapter, only=None):
    """The prose lines of the chapter grouped by paragraph, in order (only the paragraphs `only`, if given)."""
    grouped = {}
    for line in chapter.lines:
        if only is None or line.paragraph in only:
            grouped.setdefault(line.paragraph, []).append(line)
    return list(grouped.values())


def stated_in(chapter, para):
    """(line, value, (label words of its sentence, its unit)) of each number of the paragraph the rule checks."""
    out = []
    for line in para:
        for value, offset, _ in stated_numbers(chapter, line)[0]:
            words, sentence, near, values = sentence_words(para, line, offset)
            unit = unit_after(line.text, NUMBER.match(line.text, offset).end())
            out.append((line, value, (words, unit, near, values[0] - {value}, values[1] - {value}), sentence))
    return out


def cells_in_scope(chapter, para, stated, strict=True):
    """The cells a paragraph is held against, and the scope in words: those of its section above it (rule 2),
    or, in a section whose cells print nothing, those of the sections that restate its numbers (rule 3)."""
    section = chapter.sections[para[0].section]
    has_cells = {c.section for c in chapter.cells if printing(c)}
    if has_cells & ({section.index} | set(section.parents)):
        return local_cells(chapter, section.index, para, strict), f'no code cell of its section "{section.title}"'
    need = min(2, len({v for _, v, *_ in stated}))
    eligible = [t for t in chapter.sections if t.level == 2 and len(vouched(chapter, t, stated, strict)) >= need]
    pool = [c for c in chapter.cells if any(c.section in t.within for t in eligible)]
    names = ", ".join(f'"{t.title}"' for t in eligible) or "none"
    return pool, f"no section that prints at least {need} of the paragraph's numbers ({names})"


def vouched(chapter, section, stated, strict=True):
    """The stated values that the cells of a section (with its subsections) print or have as literals."""
    cells = [c for c in chapter.cells if c.section in set(section.within)]
    return {v for _, v, w, *_ in stated if any(c.vouches(v, w, strict) for c in cells)}


def untied(chapter, stated, pool, scope, strict=True):
    """The stated numbers that no cell of the pool ties (rule 5: by its label, when a slip of it is printed too)."""
    # rule 5's neighbours: a timing that happens to print a value one slip away on this run is no neighbour
    printed_here = set().union(*[c.printed for c in pool if not c.machine_dependent])
    found = []
    for line, value, words, sentence in stated:
        if not strict and not slips(value) & printed_here:
            words = None  # no neighbouring value printed nearby: the value alone ties it
        tied = any(c.vouches(value, words, strict) for c in pool)
        figures = {v for _, v, _, k in stated if k == sentence and is_figure(v) and any(v in c.printed for c in pool)}
        if tied and strict and figures and not is_figure(value):  # rule 6: a small integer goes with its figures
            others = {v for _, v, _, k in stated if k == sentence and v != value}
            tied = any(value in row and row & others for c in pool for row in c.rows)
            if not tied:
                found.append(Problem(chapter.name, line.number, value, line.text, apart(value, figures), []))
                continue
        if tied and strict and is_figure(value):  # rule 7: the value its words point at, not its neighbour's
            rival = rivalled(value, words, pool)
            if rival:
                found.append(Problem(chapter.name, line.number, value, line.text, rival, []))
                continue
        if not tied:
            near = sorted(((c, abs(c.line - line.number)) for c in pool), key=lambda cd: (cd[1], cd[0].line))
            labelled_only = words is not None and any(value in c.printed for c in pool)  # rule 5, not a missing print
            why = unlabelled(value, words, printed_here, strict) if labelled_only else scope
            found.append(Problem(chapter.name, line.number, value, line.text, why, near))
    return found


DECIMAL = re.compile(r"-?\d+(\.\d+)?")


def neighbours(value, values):
    """The values among `values` one slip away from `value`, or `value` one slip away from them."""
    return {n for n in values if DECIMAL.fullmatch(n) and float(n) and is_figure(n) and value in mutants_of(n)}


def places(value):
    return len(value.partition(".")[2])


@functools.lru_cache(maxsize=None)
def mutants_of(value):
    """What one slip makes of `value`, written as the prose would write it: its last digit one up or down, ten
    times (at its precision), a tenth (one place more), its point dropped: '0.71' -> 0.72, 0.70, 7.10, 0.071, 71."""
    sign, digits = ("-", value[1:]) if value.startswith("-") else ("", value)
    whole, _, frac = digits.partition(".")
    n, p = int(whole + frac), len(frac)

    def write(k, q):
        text = str(k).rjust(q + 1, "0")
        return sign + (text[:-q] + "." + text[-q:] if q else text)

    out = {write(n + 1, p), write(n * 10, p), write(n, p + 1)} | ({write(n - 1, p)} if n else set())
    return out | ({sign + str(n)} if p else set())


def rivalled(value, context, pool):
    """Rule 7's reason, or None: a value one slip away from the stated one is printed (or held) by a cell in scope
    under a label closer to the stated number's words than any label of the stated value."""
    steady = [c for c in pool if not c.machine_dependent]
    around = neighbours(value, set().union(*[set(c.printed) | c.literals for c in steady]))
    if not around:
        return None
    mine = min((s for c in pool if (s := c.closeness(value, context)) is not None), default=FAR)
    for n in sorted(around, key=float):
        theirs = min((s for c in steady if (s := c.closeness(n, context)) is not None), default=FAR)
        nearer = theirs[0] < mine[0] or (theirs[0] == mine[0] != FAR[0] and theirs[1] < mine[1] < 1)
        if nearer:
            return (
                f"(rule 7) {n}, one slip away from it, is printed under a label nearer to it in the prose"
                f" ({far(theirs)}, against {far(mine)} for {value}'s): state the value its label names, and no code"
                f" cell of"
            )
    return None


def apart(value, figures):
    """Rule 6's reason: the small integer is printed, but on no output line with a figure of its sentence."""
    return (
        f"(rule 6) its sentence states {', '.join(sorted(figures, key=float))}, printed nearby, and no output line"
        f" prints {value} beside one of them: say which row it belongs to, as the output does, and no code cell of"
        f" the section"
    )


def unlabelled(value, words, printed_here, strict=True):
    """Rule 5's reason: the value is printed, but no segment printing it has its label."""
    label = ", ".join(sorted(words[0])[:8]) or "none"
    near = (
        ""
        if strict
        else (
            f" a value one slip away ({', '.join(sorted(slips(value) & printed_here))}) is "
            f"printed nearby too, so the value alone does not tie it, and"
        )
    )
    return (
        f"(rule 5){near} no output segment that prints it labels it "
        f"with a word of its sentence ({label}){' and its unit ' + words[1] if words[1] else ''}:"
        f' print it with its label, e.g. print(f"<label>: {{x}}"), and no code cell of'
        f" the section"
    )


def describe_rule():
    """The rule, as the test prints it, with the defining constants of every chapter."""
    listed = "\n".join(
        f"  {name}: " + "; ".join(f'"{p}" ({why})' for p, why in entries) for name, entries in sorted(DEFINING.items())
    )
    return f"{RULE.strip()}\n\nDefining constants (tools/prose/prose_constants.py):\n{listed or '  (none)'}"
