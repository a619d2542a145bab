"""Every number a chapter's prose states is printed, or used as an input, by the code cells near it.

The rule (locality, sign, defining constants) is in `prose_numbers.py` and is printed by
`test_the_rule_and_the_defining_constants`; the defining constants are listed in `prose_constants.py`.
A failure names the file and line, the stated number, and what the nearby cells print, nearest first.

`test_mutations_are_caught` changes every stated number in memory (its last digit, and ten times its
value at the same precision), runs the check on the mutant and counts what it catches.
"""
import pytest

from tools import prose_numbers as P
from tools.notebooks import NUMBER, chapter_names
from tools.prose_constants import DEFINING

# the self-test's floors: a check that let more than 2% of changed figures (or 40% of changed small
# integers, which a nearby cell prints by chance more often) through would not be guarding the prose
FIGURES_MIN, SMALL_INTEGERS_MIN = 0.98, 0.60


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
    problems = P.problems(chapters[name])
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
    text = (P.CHAPTERS / f"{name}.md").read_text().replace("```{code-cell} ipython3\n", "```{code-cell} ipython3\nx = 0\n", 1)
    with pytest.raises(P.StaleGolden, match="make golden"):
        P.read(name, text=text)


def test_mutations_are_caught(chapters):
    mutants = [m for chapter in chapters.values() for m in P.mutants(chapter)]
    report = []
    for label, figure, floor in (("figures", True, FIGURES_MIN), ("small integers", False, SMALL_INTEGERS_MIN)):
        mine = [m for m in mutants if m.figure == figure]
        caught = sum(m.caught for m in mine)
        report.append((label, caught, len(mine), floor))
    rates = "\n".join(f"{label}: {caught} of {total} mutations caught ({caught / total:.3f}; floor {floor})"
                      for label, caught, total, floor in report)
    missed = "\n".join(str(m) for m in mutants if not m.caught)
    print(rates + "\n" + missed)
    for label, caught, total, floor in report:
        assert caught / total >= floor, f"{rates}\nonly {caught} of {total} {label} mutations caught:\n{missed}"
