"""Every number a chapter's prose states is printed, or used as an input, by the code cells near it.

The rule (locality, sign, defining constants) is in `tools/prose/prose_numbers.py` and is printed by
`test_the_rule_and_the_defining_constants`; the defining constants are listed in `tools/prose/prose_constants.py`.
A failure names the file and line, the stated number, and what the nearby cells print, nearest first.

How much of a changed number the check catches is measured by its mutation self-test,
`test_prose_mutations.py`.

The scanner tests read small hand-written MyST texts and pin which numbers are prose (a paragraph, a
heading, a list item, a footnote, math, a directive's title and body, a code cell's caption and alt text)
and which are not (code, a directive's options, front matter, targets, comments, roles, link targets).
"""

import jupytext
import nbformat
import pytest

from tools.notebooks import NUMBER, chapter_names, code_cells, code_literals, magnitudes, normalise, numbers_in
from tools.prose import prose_numbers as P
from tools.prose.prose_constants import DEFINING


@pytest.fixture(scope="module")
def chapters():
    return {name: P.read(name) for name in chapter_names()}


def test_the_rule_and_the_defining_constants(chapters, record_property, request):
    rule = P.describe_rule()
    print(rule)
    request.node.add_report_section("call", "the prose rule", rule)  # shown by `pytest -rA`, captured or not
    record_property("rule", rule)
    for name, entries in DEFINING.items():
        assert name in chapters, f"prose_constants.py names no chapter {name}"
        prose = [line.text for line in chapters[name].lines]
        for phrase, reason in entries:
            assert NUMBER.search(phrase), f"{name}: {phrase!r} holds no number"
            assert reason, f"{name}: {phrase!r} needs its reason"
            assert any(phrase in text for text in prose), f"chapters/{name}.md no longer says {phrase!r}"


def test_captions_and_alt_texts_are_read(chapters):
    for chapter in chapters.values():
        kinds = {line.kind for line in chapter.lines}
        assert "text" in kinds, f"{chapter.name}: no prose read"
    assert {"caption", "alt"} <= {line.kind for line in chapters[chapter_names()[0]].lines}


@pytest.mark.parametrize("name", chapter_names())
def test_every_number_in_the_prose_is_printed_nearby(name, chapters):
    problems = P.problems(chapters[name], strict=True)
    assert not problems, "\n" + "\n".join(map(str, problems)) + "\n\nThe rule:\n" + P.describe_rule()


def test_a_changed_headline_figure_fails_naming_its_line():
    """'1.31' -> '1.32' on any line of chapter 1, re-read from the text through Jupytext, fails there."""
    name = chapter_names()[0]
    text = (P.CHAPTERS / f"{name}.md").read_text()
    lines = text.splitlines(keepends=True)
    spots = [i for i, ln in enumerate(lines, start=1) if "1.31" in ln]
    assert spots, "chapter 1 no longer states its average loss 1.31"
    for number in spots:
        mutant = "".join(ln.replace("1.31", "1.32") if i == number else ln for i, ln in enumerate(lines, start=1))
        found = P.problems(P.read(name, text=mutant))
        assert any(p.line == number and p.stated == "1.32" for p in found), f"{name}.md:{number}: 1.32 not caught"


def test_a_stale_golden_is_named():
    name = chapter_names()[0]
    text = (
        (P.CHAPTERS / f"{name}.md")
        .read_text()
        .replace("```{code-cell} ipython3\n", "```{code-cell} ipython3\nx = 0\n", 1)
    )
    with pytest.raises(P.StaleGolden, match="make golden"):
        P.read(name, text=text)


# ----------------------------------------------------------------------------------------------------
# the scanner on small MyST texts: which numbers it reads as prose (and as what), and which it skips.
# Each text states 417 once; `where` is the text around it, so its line is found in the text itself.

CODE_CELL = (
    "```{{code-cell}} ipython3\n---\nmystnb:\n  figure:\n    caption: {caption}\n  image:\n    alt: {alt}\n"
    "      {alt_more}\n---\nx = 1\n```\n"
)
READ = {  # label: (MyST text, the kind of line it is read from)
    "paragraph": ("Intro.\n\nWe count 417 rows.\n", "text"),
    "heading": ("# Title\n\n## 417 ways to say it\n\nText.\n", "heading"),
    "bullet": ("Intro.\n\n- one\n- all 417 of them\n", "text"),
    "numbered list item": ("Intro:\n\n1. one\n2. all 417 of them\n", "text"),
    "table cell": ("| rows |\n|---|\n| 417 |\n", "text"),
    "footnote": ("Text[^a].\n\n[^a]: It had 417 rows.\n", "text"),
    "second paragraph of a footnote": ("Text[^a].\n\n[^a]: It had rows.\n\n    All 417 of them.\n", "text"),
    "inline math without a variable": ("It is $417 \\times 3$ rows.\n", "text"),
    "display math": ("Thus\n\n$$\nx = 417 y\n$$\n", "text"),
    "math directive": ("```{math}\nx = 417 y\n```\n", "text"),
    "colon-fence directive body": (":::{note}\nIt holds 417 rows.\n:::\n", "text"),
    "colon-fence directive title": (":::{dropdown} Why 417 rows?\nBecause.\n:::\n", "text"),
    "a number opening a wrapped line": ("Intro.\n\nThe count is\n417. It holds.\n", "text"),
    "backtick directive body": ("```{admonition} Why\nIt holds 417 rows.\n```\n", "text"),
    "caption option of a code cell": (
        CODE_CELL.format(caption="All 417 rows.", alt="Bars.", alt_more="More."),
        "caption",
    ),
    "alt text of a code cell": (CODE_CELL.format(caption="Bars.", alt="Bars of", alt_more="417 rows."), "alt"),
}
SKIPPED = {  # label: MyST text
    "code fence": "Run it:\n\n```sh\necho 417\n```\n",
    "indented code": "Run it:\n\n    echo 417\n",
    "code-block directive": "```{code-block} python\nx = 417\n```\n",
    "directive option": ":::{figure} plot.png\n:width: 417\nA plot.\n:::\n",
    "code cell source": "```{code-cell} ipython3\nx = 417\n```\n",
    "front matter": "---\nwidth: 417\n---\n\nText.\n",
    "MyST target": "(sec-417)=\n# Title\n",
    "MyST comment": "% width 417\nText.\n",
    "role": "See {term}`rule 417` for it.\n",
    "link target": "See [the page](page_417.md).\n",
}
EXEMPT = {  # label: (MyST text, the number, the reason the rule gives)
    "cross-reference": ("As chapter 417 shows.\n", "417", "cross-reference"),
    "year of a citation": ("As shown (Vaswani et al., 2017).\n", "2017", "year of a publication"),
    "1 in a formula": ("A context of $n + 1$ tokens.\n", "1", "part of a formula"),
    "the number of an ordered list's item": ("Intro:\n\n417. one\n418. two\n", "417", "list marker"),
    "2 in display math": ("$$\n\\frac{n(n+1)}{2}\n$$\n", "2", "part of a formula"),
}


def scan(text):
    """The snippet read as a chapter (its golden: its own code cells, printing nothing), and every number
    the scanner reads: {(line, value, kind of line, why exempt or None)}."""
    golden = code_cells(jupytext.reads(text, fmt="md:myst"))
    chapter = P.read("snippet", text=text, golden=golden)
    return chapter, {
        (line.number, value, line.kind, why)
        for line in chapter.lines
        for value, _, why in sum(P.stated_numbers(chapter, line), [])
    }


def line_of(text, needle):
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.mark.parametrize("label", READ)
def test_the_scanner_reads_a_number_of_the_prose(label):
    text, kind = READ[label]
    chapter, read = scan(text)
    assert (line_of(text, "417"), "417", kind, None) in read, f"{label}: 417 not read as {kind}: {sorted(read)}"
    assert P.problems(chapter), f"{label}: 417 is printed by no cell, yet the check passes"


@pytest.mark.parametrize("label", SKIPPED)
def test_the_scanner_skips_a_number_that_is_not_prose(label):
    chapter, read = scan(SKIPPED[label])
    assert not [r for r in read if r[1] == "417"], f"{label}: 417 read as prose: {sorted(read)}"
    assert not P.problems(chapter)


@pytest.mark.parametrize("label", EXEMPT)
def test_the_scanner_exempts_by_rule(label):
    text, value, why = EXEMPT[label]
    _, read = scan(text)
    assert (line_of(text, value), value, "text", why) in read, f"{label}: {sorted(read)}"


def test_sections_paragraphs_and_cells_stand_where_the_text_puts_them():
    text = (
        "# Title\n\nOpening 5.\n\n## First\n\n- item a\n- item b\n\n"
        ":::{dropdown} Answer\nBody c\nmore d\n:::\n\n### Inner\n\n"
        "```{code-cell} ipython3\nx = 1\n```\n\n## Second\n\nText e.\n"
    )
    at = lambda needle: line_of(text, needle)  # noqa: E731
    chapter, _ = scan(text)
    assert [(s.level, s.title, s.line) for s in chapter.sections] == [
        (0, "(before the first heading)", 1),
        (1, "Title", at("# Title")),
        (2, "First", at("## First")),
        (3, "Inner", at("### Inner")),
        (2, "Second", at("## Second")),
    ]
    assert [(c.index, c.line, c.section) for c in chapter.cells] == [(1, at("{code-cell}"), 3)]
    assert chapter.sections[2].within == (2, 3) and chapter.sections[3].parents == (2,)
    paragraph = {line.number: line.paragraph for line in chapter.lines}
    assert paragraph[at("Body c")] == paragraph[at("more d")], "a paragraph's lines are one paragraph"
    apart = {paragraph[at(needle)] for needle in ("item a", "item b", "Answer", "Body c")}
    assert len(apart) == 4, "each item, a dropdown's title and its body are paragraphs of their own"
    assert {line.number: line.section for line in chapter.lines}[at("Text e")] == 4


def test_a_footnote_belongs_to_the_section_it_is_written_in():
    text = "## First\n\nText[^a].\n\n[^a]: It had 417 rows.\n\n## Second\n\nMore.\n"
    chapter, _ = scan(text)
    assert {line.number: line.section for line in chapter.lines}[line_of(text, "417")] == 1


def test_an_erratum_admonition_is_located():
    text = "Text.\n\n:::{admonition} Erratum\nThe source says 417.\n:::\n\nAfter 9.\n"
    chapter, _ = scan(text)
    assert chapter.erratum_lines == {3, 4, 5}


@pytest.mark.parametrize(
    "text, message",
    [
        ("- item\n\n  ```{code-cell} ipython3\n  x = 1\n  ```\n", "finds 1 code-cell fences where Jupytext reads 0"),
        ("```{code-cell} ipython3\n---\ntags: [a\n---\nx = 1\n```\n", "Jupytext cannot read the chapter"),
    ],
)
def test_text_the_scanner_cannot_read_is_named(text, message):
    with pytest.raises(P.Unreadable, match=message):
        P.read("snippet", text=text, golden=[])


# the one number grammar (tools/notebooks.py) that reads prose, outputs and code alike


def test_numbers_are_read_as_written_with_their_sign():
    text = "From \u22122.61 to +2.59 and -0.5, then 1,000 and 10,000,000 tokens (32%)."
    assert [value for value, _, _ in numbers_in(text)] == ["-2.61", "2.59", "-0.5", "1000", "10000000", "32"]
    assert magnitudes(text) == {"2.61", "2.59", "0.5", "1000", "10000000", "32"}
    assert [text[offset] for _, offset, _ in numbers_in(text)] == ["2", "2", "0", "1", "1", "3"]


def test_a_number_inside_a_word_or_a_version_is_no_number():
    assert numbers_in("fp16 x86 3rd 16GB v1.2.3 is_2") == []


def test_one_written_number_normalises_and_anything_else_is_refused():
    assert (normalise("\u22122.61"), normalise(" 1,024 "), normalise("0.90")) == ("2.61", "1024", "0.90")
    with pytest.raises(ValueError, match="not a number: 'about 3'"):
        normalise("about 3")


def test_the_literals_of_a_code_cell_are_its_inputs():
    where = {}
    source = "%time warm_up(3)\nSTEPS = 400\nrate = -0.5 * 2.0\n!echo 9\n"
    literals = code_literals(source, where)
    assert {"400", "-0.5", "2.0", "2"} <= literals, literals
    assert not {"3", "9"} & literals, "a line of IPython magic (%, !) holds no input"
    assert where["400"] == ["STEPS = 400"] and where["2"] == ["rate = -0.5 * 2.0"]


# the rules that tell a printed value from its neighbour, on a section whose one cell prints `output`


def checked(prose, source, output):
    """The problems of a one-section page: a cell with `source` that printed `output`, then the `prose`."""
    text = f"# Title\n\n```{{code-cell}} ipython3\n{source}\n```\n\n{prose}\n"
    golden = code_cells(jupytext.reads(text, fmt="md:myst"))
    golden[0]["outputs"] = [nbformat.v4.new_output("stream", name="stdout", text=output)]
    return [
        (p.stated, p.scope.split(")")[0] + ")" if p.scope.startswith("(rule") else "")
        for p in P.problems(P.read("snippet", text=text, golden=golden))
    ]


ROWS = "A100: ridge 153; 7B weights compute-bound from a batch of 154\n"


def test_a_figure_is_the_value_its_label_names_not_its_neighbour():
    assert checked("The ridge is 153, and the weights turn compute-bound from a batch of 154.", "x = 1", ROWS) == []
    assert checked("The ridge is 154, and the weights turn compute-bound from a batch of 154.", "x = 1", ROWS) == [
        ("154", "(rule 7)")
    ]


def test_a_tie_goes_to_the_row_with_the_sentences_other_figures():
    rows = "temperature 0.1: favourite 0.9978\ntemperature 0.01: favourite 1.0000\n"
    assert checked("The favourite holds 0.9978 at a temperature of 0.1.", "x = 1", rows) == []
    assert checked("The favourite holds 0.9978 at a temperature of 0.01.", "x = 1", rows) == [("0.01", "(rule 7)")]


def test_the_end_of_a_printed_range_goes_with_its_other_end():
    rows = "20 runs: unscaled 0.93 to 0.94\nthe direct run: unscaled 0.94\n"
    assert checked("The runs spread from 0.93 to 0.94 unscaled.", "x = 1", rows) == []
    assert checked("The direct run gives 0.94 unscaled.", "x = 1", rows) == []
    assert [v for v, _ in checked("The direct run gives 0.93 unscaled.", "x = 1", rows)] == ["0.93"]


def test_a_plots_layout_is_no_input():
    source = "fig = dict(figsize=(7, 3))\nprint('done')"
    assert [v for v, _ in checked("We drew 7 bars.", source, "done\n")] == ["7"]
    assert checked("We drew 7 bars.", source + "\nBARS = 7", "done\n") == []


def test_a_count_in_the_code_is_no_measure():
    source = "WINDOWS = 64\nprint('done')"
    assert checked("It reads 64 windows.", source, "done\n") == []
    assert [v for v, _ in checked("It costs 64 nats.", source, "done\n")] == ["64"]
