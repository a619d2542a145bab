"""Tie every number a chapter's prose states to the code cells near it (issue 13).

The document comes from the chapter's `.md`, read by Jupytext: its sections, its prose lines (Markdown
cells, figure captions and alt texts in cell metadata) and where each code cell stands. What each code
cell printed comes from the golden: the i-th code cell of the chapter is the i-th code cell of the golden
(markdown cells of the golden, if any, are ignored), and their sources must agree, or the golden is stale.

THE RULE (printed by `describe_rule()` and in every failure message):

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
   "(Name et al., 2017)" or "(2022)"; inside an Erratum admonition, the source's wrong figure it quotes;
   0, 1 and 2 inside a formula (math holding a variable, as $n(n+1)/2$); literal blocks (```sh); and the
   chapter's *defining constants*, each a short phrase listed in `prose_constants.py` with its reason
   (e.g. "adds up to 1"): the number is exempt only inside that exact phrase, so "adds up to 2" is checked.
5. An ambiguous figure needs its label. When the cells in scope also print a value one slip away from a
   stated figure (a decimal, or an integer of three digits or more) -- its last digit one up or down, or its
   decimal point moved one place: 0.197 and 0.198, 100 and 1,000 -- the value alone does not tie it (what a
   cell tagged nbval-ignore-output prints, a timing that changes from run to run, is no such neighbour). It must
   then be printed in an output *segment* (a line cut at ";", "|" and ", ") that labels it: the segment
   shares a label word (two letters or more, stemmed, not a stop word or a unit) with the prose sentence
   that states the figure, and when the prose writes a unit right after the figure (nats, tokens, GiB, us,
   times, requests, ...) the segment writes the same unit after it, or none. A printed list or array
   ([0.198 0.126 ...]) and a row of bare numbers label nothing. A literal ties it when its line of code
   shares a label word with the sentence. Print such a figure with its label, as the house style does:
   print(f"held-out loss: {loss:.2f} nats").
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace

import jupytext

from book.source_figures import ROWS as SOURCE_FIGURES
from tools.notebooks import CHAPTERS, ERRATUM, code_cells, output_text, read_golden
from tools.prose_constants import DEFINING

# A number as it is written, with its sign: 1,000 or -0.933 or −2.61; not part of a word or a version.
NUMBER = re.compile(r"(?<![\w.])([-+\u2212]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w]|\.\d)")
CROSS_REFERENCE = re.compile(r"\b(?:chapters?|sections?)\s+$", re.IGNORECASE)
CITATION_YEAR = re.compile(r"\([A-Z][^()]*?,\s*$")
ROLE_OR_LINK = re.compile(r"\{\w+\}`[^`]*`|\]\([^)]*\)|^\([\w-]+\)=$", re.MULTILINE)
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
FIGURE_REPR = re.compile(r"^<(Figure|matplotlib\.|Axes)[^>]*>$")
FENCE = re.compile(r"^(`{3,}|~{3,}|:{3,})")


class StaleGolden(AssertionError):
    pass


def signed(match):
    """Canonical signed form of a NUMBER match: '-2.61', '2048', '0.9'."""
    sign = "-" if match.group(1) in ("-", "\u2212") else ""
    return sign + match.group(2).replace(",", "") + (match.group(3) or "")


def numbers_in(text):
    """(canonical signed number, offset of its digits, span) for every number written in `text`."""
    return [(signed(m), m.start(2), m.span()) for m in NUMBER.finditer(text)]


def is_figure(value):
    """A figure: a decimal, or an integer of three or more digits. Otherwise a small integer."""
    digits = value.lstrip("-")
    return "." in digits or len(digits) >= 3


def code_literals(source, where=None):
    """Canonical signed forms of the numeric literals of a code cell (its inputs); 2.0 also counts as 2.
    `where`, a dict, receives for each literal the source lines that hold it."""
    lines = [ln if not ln.lstrip().startswith(("%", "!")) else "" for ln in source.splitlines()]
    found = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        sign = ""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            node, sign = node.operand, "-"
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            forms = {sign + (repr(node.value) if isinstance(node.value, float) else str(node.value))}
            if isinstance(node.value, float) and node.value.is_integer() and abs(node.value) < 1e15:
                forms.add(sign + str(int(node.value)))
            found |= forms
            if where is not None:
                for form in forms:
                    where.setdefault(form, []).append(lines[node.lineno - 1])
    return found


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
    literal_labels: dict = field(default_factory=dict)  # canonical literal -> label words of its source lines
    machine_dependent: bool = False  # tagged nbval-ignore-output: what it prints differs from run to run

    def vouches(self, value, context=None):
        """The cell prints `value` or has it as a literal; a figure, given the words of the prose sentence
        that states it (`context`), must be printed by a labelled segment sharing a word with that sentence."""
        if context is None or not is_figure(value):
            return value in self.literals or value in self.printed
        words, unit = context
        if any(w & words for w in self.literal_labels.get(value, ())):
            return True
        return any(w & words and (not unit or u in (unit, ""))
                   for u, w in zip(self.unitlist.get(value, ()), self.labels.get(value, ())))


@dataclass(frozen=True)
class Line:
    number: int  # line number in the .md file
    text: str
    section: int
    paragraph: int  # lines of one paragraph (or bullet, caption, alt text) share this id
    kind: str  # "text", "caption" or "alt"
    display_math: bool = False  # the line lies inside a $$ ... $$ block


@dataclass
class Chapter:
    name: str
    lines: list
    cells: list
    sections: list
    erratum_lines: set = field(default_factory=set)
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
            shown.append(f"      code cell {cell.index} (line {cell.line}) prints {prints}"
                         + (f"; literals {', '.join(sorted(cell.literals, key=float)[:8])}" if cell.literals else ""))
        more = f"\n      ... and {len(self.nearby) - 4} more cells" if len(self.nearby) > 4 else ""
        return (f"chapters/{self.chapter}.md:{self.line}: states {self.stated}, but {self.scope} prints it"
                f" or has it as an input:\n    | {self.text.strip()[:100]}\n"
                + ("\n".join(shown) + more if shown else "      (no code cell there)"))


# ----------------------------------------------------------------------------------------------------
# reading a chapter


def golden_code_cells(name):
    return code_cells(read_golden(name))


def read(name, text=None, golden=None):
    """The chapter `name` as sections, prose lines and code cells with what the golden printed."""
    path = CHAPTERS / f"{name}.md"
    text = path.read_text() if text is None else text
    nb = jupytext.reads(text, fmt="md:myst")
    golden = golden_code_cells(name) if golden is None else golden
    mine = [c for c in nb.cells if c.cell_type == "code"]
    if len(mine) != len(golden):
        raise StaleGolden(f"{name}: the chapter has {len(mine)} code cells and its golden {len(golden)}: "
                          f"the golden is stale, run `make golden CH={name}`")
    raw = text.splitlines()
    sections = [Section(0, 0, "(before the first heading)", 1)]
    lines, cells, cursor, paragraph = [], [], 0, 0

    def find(start, predicate):
        for i in range(start, len(raw)):
            if predicate(raw[i]):
                return i
        raise AssertionError(f"{name}: could not locate a cell of the Jupytext notebook in the .md text")

    code_index = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            src = cell.source.splitlines()
            if not src:
                continue
            start = find(cursor, lambda s, first=src[0]: s == first)
            fence, in_math = None, False
            for offset, line in enumerate(src):
                number = start + offset + 1
                assert raw[number - 1] == line, f"{name}: line {number} is not where Jupytext put it"
                m = FENCE.match(line.strip())
                if fence is None and m and "{admonition}" not in line and "{note}" not in line \
                        and not line.strip().startswith(":::"):
                    fence = m.group(1)
                elif fence is not None and line.strip().startswith(fence):
                    fence = None
                if fence is not None or FENCE.match(line.strip()) and fence is None and "{" not in line:
                    continue  # a literal block (```sh ...) shows code, not figures
                h = HEADING.match(line) if fence is None else None
                if h:
                    sections.append(Section(len(sections), len(h.group(1)), h.group(2).strip(), number))
                    paragraph += 1
                    lines.append(Line(number, line, len(sections) - 1, paragraph, "heading"))
                    paragraph += 1
                    continue
                if not line.strip() or line.lstrip().startswith(("- ", "* ", "1. ")) or line.startswith(":::"):
                    paragraph += 1
                opens = line.count("$$") % 2 == 1
                if line.strip():
                    lines.append(Line(number, line, len(sections) - 1, paragraph, "text", in_math or "$$" in line))
                in_math = in_math != opens
            cursor = start + len(src)
            paragraph += 1
        elif cell.cell_type == "code":
            gold = golden[code_index]
            code_index += 1
            if gold.source != cell.source:
                raise StaleGolden(f"{name}: code cell {code_index} of the chapter differs from the golden's: "
                                  f"the golden is stale, run `make golden CH={name}`")
            start = find(cursor, lambda s: s.startswith("```{code-cell}"))
            # the YAML header (between --- lines right after the fence) holds captions and alt texts
            header_end = start
            if start + 1 < len(raw) and raw[start + 1] == "---":
                header_end = find(start + 2, lambda s: s == "---")
            body_end = find(header_end + 1, lambda s: s.startswith("```"))
            key = None
            for i in range(start + 1, header_end):
                m = re.match(r"(\s*)(caption|alt):(.*)", raw[i])
                if m:
                    key, indent = m.group(2), len(m.group(1))
                    paragraph += 1
                    lines.append(Line(i + 1, " " * (len(raw[i]) - len(m.group(3))) + m.group(3),
                                      len(sections) - 1, paragraph, key))
                elif key and len(raw[i]) - len(raw[i].lstrip()) > indent:
                    lines.append(Line(i + 1, raw[i], len(sections) - 1, paragraph, key))
                else:
                    key = None
            paragraph += 1
            _check_metadata(name, code_index, cell, [ln for ln in lines if start < ln.number <= header_end])
            printed, labels, unitlist = {}, {}, {}
            for out_line in output_text(gold).splitlines():
                if FIGURE_REPR.match(out_line.strip()):  # "<Figure size 700x300 with 1 Axes>" is no figure
                    continue
                for value, _, _ in numbers_in(out_line):
                    printed.setdefault(value, out_line.strip())
                for segment in segments(out_line):
                    words = label_words(NUMBER.sub(" ", LIST.sub(" ", segment)))
                    if LIST.search(segment):  # a printed list of numbers labels none of them
                        words = frozenset()
                    for value, _, span in numbers_in(segment):
                        labels.setdefault(value, []).append(words)
                        unitlist.setdefault(value, []).append(unit_after(segment, span[1]))
            where = {}  # literals of folded plot cells count too: alt texts describe their axes
            literals = code_literals(cell.source, where)
            literal_labels = {v: [label_words(re.sub(r"[_\W\d]+", " ", src)) for src in srcs] for v, srcs in where.items()}
            cells.append(Cell(code_index, start + 1, len(sections) - 1, printed, literals, labels, unitlist,
                              literal_labels, "nbval-ignore-output" in cell.metadata.get("tags", [])))
            cursor = body_end + 1
    for s in sections:
        below = [t.index for t in sections[s.index + 1:]]
        stop = next((i for i, t in zip(below, sections[s.index + 1:]) if t.level <= s.level), len(sections))
        s.within = tuple(range(s.index, stop)) if s.level else (0,)
    for s in sections:
        s.parents = tuple(t.index for t in sections if t.level > 1 and t.index != s.index and s.index in t.within)
    erratum = {n for m in ERRATUM.finditer(text)
               for n in range(text.count("\n", 0, m.start()) + 1, text.count("\n", 0, m.end()) + 2)}
    quoted = {r["source_text"].replace(",", "") for r in SOURCE_FIGURES if r["chapter"] == name and r["course_text"]}
    return Chapter(name, lines, cells, sections, erratum, quoted)


def _check_metadata(name, index, cell, header_lines):
    """The captions and alt texts read from the raw lines are the ones Jupytext parsed into the metadata."""
    meta = cell.metadata.get("mystnb", {})
    parsed = " ".join([meta.get("figure", {}).get("caption", ""), meta.get("image", {}).get("alt", "")])
    mine = [v for ln in header_lines for v, _, _ in numbers_in(ln.text)]
    theirs = [v for v, _, _ in numbers_in(parsed)]
    assert sorted(mine) == sorted(theirs), f"{name}: code cell {index}: caption/alt numbers misread {mine} {theirs}"


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
    """(value, offset) of the numbers of a prose line that the check holds to the cells, and the exempt ones."""
    clean = ROLE_OR_LINK.sub(lambda m: " " * len(m.group(0)), line.text)
    checked, exempt = [], []
    spans = constant_spans(chapter, line.text)
    formulas = formula_spans(line)
    for value, offset, span in numbers_in(clean):
        before = clean[:span[0]]
        why = None
        if CROSS_REFERENCE.search(before):
            why = "cross-reference"
        elif re.fullmatch(r"(19|20)\d\d", value) and clean[span[1]:span[1] + 1] == ")" and (
                CITATION_YEAR.search(before) or before.endswith("(")):
            why = "year of a publication"
        elif line.number in chapter.erratum_lines and value.lstrip("-") in chapter.quoted:
            why = "erratum quote"
        elif any(a <= span[0] and span[1] <= b for a, b in spans):
            why = "defining constant"
        elif value in ("0", "1", "2") and any(a <= span[0] and span[1] <= b for a, b in formulas):
            why = "part of a formula"
        (exempt if why else checked).append((value, offset, why))
    return checked, exempt


def nearest(chapter, section_ids, line_number):
    """The code cells of these sections, nearest the line first, with their distance in lines."""
    cells = [c for c in chapter.cells if c.section in section_ids]
    return sorted(((c, abs(c.line - line_number)) for c in cells), key=lambda cd: (cd[1], cd[0].line))


def printing(cell):
    return bool(cell.printed or cell.literals)


def local_cells(chapter, section_id, paragraph_lines):
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
STOP = set("""the and for with from that this these those are its was were per one each all not but into than
then has have had who which what when where while there their them they our you your can could would will
about over under after before only also more most less least same other just out off now how why very much
many any some such both either nor yet own here been being does did done get gets got let lets may might
shall should must use used uses using of to in on at is it as an by or be we if no so up do he she me my us""".split())
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


UNITS_LIST = set("""nat token time gib mib kib tib gb tb mb kb byte us ms % operation request conversation parameter
position step trial word million billion flop vector pair head layer episode passe pass""".split())


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
    out = {write(n - 1, places), write(n + 1, places), write(n * 10, places)}
    if places:
        out.add(write(n, places + 1))
    elif n % 10 == 0:
        out.add(write(n // 10, 0))
    return {v for v in out if not v.lstrip("-").startswith("-")} - {value}


def segments(out_line):
    """The parts of an output line that label their own numbers: split at ';' and '|'."""
    return [part for part in SEGMENT.split(out_line) if part.strip()]


def stem(word):
    """A crude stem, enough to match 'fits' with 'fit', 'scaled' with 'scale', 'tokens' with 'token'."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def label_words(text):
    """The label words of a text: words of two letters or more, lower case, stemmed, no stop words or units."""
    words = set()
    for w in WORD.findall(text.lower()):
        w = w.strip("'-")
        if len(w) < 2 or w in STOP:
            continue
        w = stem(w)
        if w not in UNITS and w not in STOP:
            words.add(w)
    return frozenset(words)


def sentence_words(para, line, offset):
    """The label words of the sentence of paragraph `para` that holds the number at `offset` of `line`."""
    text, start = "", 0
    for ln in para:
        if ln is line or ln.number == line.number:
            start = len(text) + offset
        text += ln.text + " "
    clean = ROLE_OR_LINK.sub(lambda m: " " * len(m.group(0)), text)
    begin = max((m.end() for m in SENTENCE_END.finditer(clean, 0, start)), default=0)
    end = next((m.end() for m in SENTENCE_END.finditer(clean, start)), len(clean))
    return label_words(NUMBER.sub(" ", clean[begin:end]))


def problems(chapter, only=None):
    """Every stated number that the rule does not tie to a code cell, as Problems."""
    found = []
    by_paragraph = {}
    for line in chapter.lines:
        if only is None or line.paragraph in only:
            by_paragraph.setdefault(line.paragraph, []).append(line)
    has_cells = {c.section for c in chapter.cells if printing(c)}
    for para in by_paragraph.values():
        stated = [(line, value, (sentence_words(para, line, offset),
                                 unit_after(line.text, NUMBER.match(line.text, offset).end())))
                  for line in para for value, offset, _ in stated_numbers(chapter, line)[0]]
        if not stated:
            continue
        section = chapter.sections[para[0].section]
        if has_cells & ({section.index} | set(section.parents)):  # rule 2: the cells of the same section
            pool, scope = local_cells(chapter, section.index, para), f'no code cell of its section "{section.title}"'
        else:  # rule 3: sections that print at least two of the paragraph's numbers (or its only one)
            need = min(2, len({v for _, v, _ in stated}))
            eligible = []
            for candidate in chapter.sections:
                if candidate.level != 2:
                    continue
                cells = [c for c in chapter.cells if c.section in set(candidate.within)]
                if len({v for _, v, w in stated if any(c.vouches(v, w) for c in cells)}) >= need:
                    eligible.append(candidate)
            pool = [c for c in chapter.cells if any(c.section in t.within for t in eligible)]
            names = ", ".join(f'"{t.title}"' for t in eligible) or "none"
            scope = (f"no section that prints at least {need} of the paragraph's numbers ({names})")
        # rule 5's neighbours: a timing that happens to print a value one slip away on this run is no neighbour
        printed_here = set().union(*[c.printed for c in pool if not c.machine_dependent])
        for line, value, words in stated:
            if not slips(value) & printed_here:
                words = None  # no neighbouring value printed nearby: the value alone ties it
            if not any(c.vouches(value, words) for c in pool):
                near = sorted(((c, abs(c.line - line.number)) for c in pool), key=lambda cd: (cd[1], cd[0].line))
                why = scope
                if words is not None and any(value in c.printed for c in pool):  # rule 5, not a missing print
                    label = ", ".join(sorted(words[0])[:8]) or "none"
                    why = (f"(rule 5) a value one slip away ({', '.join(sorted(slips(value) & printed_here))}) is "
                           f"printed nearby too, so the value alone does not tie it, and no output segment labels it "
                           f"with a word of its sentence ({label}){' and its unit ' + words[1] if words[1] else ''}:"
                           f" print it with its label, e.g. print(f\"<label>: {{x}}\"), and no code cell of"
                           f" the section")
                found.append(Problem(chapter.name, line.number, value, line.text, why, near))
    return found


def describe_rule():
    """The rule, as the test prints it, with the defining constants of every chapter."""
    rule = __doc__.split("THE RULE", 1)[1].split("\n", 1)[1].strip()
    listed = "\n".join(f"  {name}: " + "; ".join(f'"{p}" ({why})' for p, why in entries)
                       for name, entries in sorted(DEFINING.items()))
    return f"{rule}\n\nDefining constants (tools/prose_constants.py):\n{listed or '  (none)'}"


# ----------------------------------------------------------------------------------------------------
# the mutation self-test: change each stated number in memory and see whether the check notices


def last_digit(written):
    """'1.31' -> '1.32', '0.9' -> '0.8' (a 9 goes down), '2,048' -> '2,049'."""
    d = written[-1]
    return written[:-1] + ("8" if d == "9" else str(int(d) + 1))


def times_ten(written):
    """Ten times the value, written to the same precision, as a cell's format string would print it:
    '1.31' -> '13.10', '0.9' -> '9.0', '0.07' -> '0.70', '952' -> '9520', '2,048' -> '20,480', '6' -> '60'."""
    digits = written.replace(",", "")
    decimals = len(digits.partition(".")[2])
    value = int(digits.replace(".", "")) * 10  # exact: the digits as an integer, then the point put back
    text = str(value).rjust(decimals + 1, "0")
    whole, frac = (text[:-decimals], text[-decimals:]) if decimals else (text, "")
    if "," in written:
        whole = f"{int(whole):,}"
    return whole + ("." + frac if decimals else "")


def last_digit_down(written):
    """'1.31' -> '1.30', '0.9' -> '0.8', '2,048' -> '2,047'; a 0 goes up: '0.60' -> '0.61'."""
    d = written[-1]
    return written[:-1] + ("1" if d == "0" else str(int(d) - 1))


MUTATIONS = {"last digit": last_digit, "x10": times_ten}


@dataclass
class Mutant:
    chapter: str
    line: int
    original: str
    mutant: str
    kind: str
    figure: bool
    caught: bool
    text: str

    def __str__(self):
        return (f"chapters/{self.chapter}.md:{self.line}: {self.original} -> {self.mutant} ({self.kind}) "
                f"not caught: {self.text.strip()[:90]}")


def mutants(chapter):
    """Every mutant of every stated number of the chapter (rule exemptions 4a-c left alone), checked."""
    before = {(p.line, p.stated) for p in problems(chapter)}
    results = []
    for line in chapter.lines:
        checked, exempt = stated_numbers(chapter, line)
        targets = checked + [e for e in exempt if e[2] == "defining constant"]
        for value, offset, _ in targets:
            m = NUMBER.match(line.text, offset)
            written = line.text[offset:m.end()]
            for kind, mutate in MUTATIONS.items():
                new = mutate(written)
                if float(new.replace(",", "")) == float(written.replace(",", "")):
                    continue  # ten times zero is zero: no mutant
                text = line.text[:offset] + new + line.text[offset + len(written):]
                after = problems(chapter.mutated(line.number, text), only={line.paragraph})
                caught = any((p.line, p.stated) not in before for p in after)
                results.append(Mutant(chapter.name, line.number, written, new, kind, is_figure(value), caught, line.text))
    return results
