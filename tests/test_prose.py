"""Every number the prose of a chapter states is printed by that chapter, or is one of its inputs.

Prose is the Markdown cells plus the figure captions and alt texts in cell metadata.
A failure names the chapter, the line and the number.

Exemptions are by rule, not by list: a number is not a figure when it
- follows the word "chapter" or "section" (a cross-reference), or
- is a year in a citation: four digits in parentheses after a name, as in (Vaswani et al., 2017), or
- stands inside an Erratum admonition and is a figure the source table marks as corrected in this
  chapter (the note quotes the source's wrong figure beside the printed right one).
"""
import re

import pytest

from notebooks import (
    CHAPTERS, ERRATUM, SOURCE_FIGURES, chapter_names, code_cells, code_literals, normalise, numbers_in,
    printed_numbers, read_chapter, read_golden,
)

CROSS_REFERENCE = re.compile(r"\b(?:chapters?|sections?)\s+$", re.IGNORECASE)
CITATION_YEAR = re.compile(r"\([A-Z][^()]*?,\s*$")
ROLE_OR_LINK = re.compile(r"\{\w+\}`[^`]*`|\]\([^)]*\)|^\([\w-]+\)=$", re.MULTILINE)


def prose_lines(name):
    """(line number in the .md file, text) for Markdown prose, captions and alt texts."""
    lines, in_code, in_front = [], False, False
    for number, line in enumerate((CHAPTERS / f"{name}.md").read_text().splitlines(), start=1):
        if number == 1 and line == "---":
            in_front = True
        elif in_front:
            in_front = line != "---"
        elif line.startswith("```{code-cell}"):
            in_code, key = True, None
        elif in_code and line.startswith("```"):
            in_code = False
        elif in_code:
            # a caption or alt text in the cell's YAML header, with its indented continuation lines
            m = re.match(r"(\s*)(caption|alt):(.*)", line)
            if m:
                key, indent = m.group(2), len(m.group(1))
                lines.append((number, m.group(3)))
            elif key and len(line) - len(line.lstrip()) > indent:
                lines.append((number, line))
            else:
                key = None
        else:
            lines.append((number, line))
    return lines


def exempt(line, offset):
    before = line[:offset]
    return bool(CROSS_REFERENCE.search(before) or (CITATION_YEAR.search(before) and len(line) > offset + 4
                                                    and re.match(r"(19|20)\d\d\)", line[offset:offset + 5])))


def erratum_lines(name):
    """Line numbers of the chapter that lie inside an Erratum admonition."""
    text = (CHAPTERS / f"{name}.md").read_text()
    return {n for m in ERRATUM.finditer(text)
            for n in range(text.count("\n", 0, m.start()) + 1, text.count("\n", 0, m.end()) + 2)}


def unmatched_numbers(name):
    golden = read_golden(name)
    known = printed_numbers(golden)
    quoted = {normalise(r["source_text"]) for r in SOURCE_FIGURES if r["chapter"] == name and r["course_text"]}
    in_erratum = erratum_lines(name)
    for cell in code_cells(read_chapter(name)):
        known |= code_literals(cell.source)
    missing = []
    for number, line in prose_lines(name):
        clean = ROLE_OR_LINK.sub(lambda m: " " * len(m.group(0)), line)
        for value, offset in numbers_in(clean):
            if value in quoted and number in in_erratum:
                continue
            if value not in known and not exempt(clean, offset):
                missing.append(f"chapters/{name}.md:{number}: {value} is stated but no cell prints it: {line.strip()[:90]}")
    return missing


def test_captions_and_alt_texts_are_read():
    name = chapter_names()[0]
    cells = [c for c in code_cells(read_chapter(name)) if "mystnb" in c.metadata]
    text = " ".join(t for _, t in prose_lines(name))
    for cell in cells:
        words = cell.metadata["mystnb"]["image"]["alt"].split()
        assert " ".join(words[-4:]) in " ".join(text.split()), f"alt text not read: {words[-4:]}"


@pytest.mark.parametrize("name", chapter_names())
def test_every_number_in_the_prose_is_printed(name):
    missing = unmatched_numbers(name)
    assert not missing, "\n" + "\n".join(missing)
