"""The `{errata-table}` directive: every source figure the course corrects, read from tests/source_figures/*.csv.

A row with a non-empty `course_text` is a figure of the source pages that does not follow from its own
inputs; the chapter prints the right value and explains it in an Erratum note. The table is built at
every build from the CSV files (each file is a dependency of the page), so it cannot fall behind.
"""
import csv
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

COLUMNS = ("chapter", "the source says", "the course prints", "why")


def corrected_rows(folder):
    """(csv path, row) for each corrected figure, in chapter order."""
    for path in sorted(Path(folder).glob("*.csv")):
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                if row["course_text"].strip():
                    yield path, row


def cell(*children):
    entry = nodes.entry()
    entry += nodes.paragraph("", "", *children)
    return entry


class ErrataTable(SphinxDirective):
    has_content = False

    def run(self):
        folder = Path(self.env.srcdir) / "tests" / "source_figures"
        for path in sorted(folder.glob("*.csv")):
            self.env.note_dependency(str(path))
        rows = list(corrected_rows(folder))
        if not rows:
            return [nodes.paragraph(text="The course has corrected no figure of its source pages so far.")]
        table = nodes.table(classes=["errata-table"])
        group = nodes.tgroup(cols=len(COLUMNS))
        table += group
        for width in (30, 15, 15, 40):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        head += nodes.row("", *(cell(nodes.Text(title)) for title in COLUMNS))
        group += head
        body = nodes.tbody()
        for _, row in rows:
            docname = f"chapters/{row['chapter']}"
            link = nodes.Text(row["chapter"])  # a chapter still being written, not yet in the table of contents
            if docname in self.env.found_docs:
                link = addnodes.pending_xref("", nodes.inline("", row["chapter"]), refdomain="std", reftype="doc",
                                             reftarget=f"/{docname}", refexplicit=False,
                                             refdoc=self.env.docname, refwarn=True)
            body += nodes.row("", cell(link), cell(nodes.Text(row["source_text"])),
                              cell(nodes.Text(row["course_text"])), cell(nodes.Text(row["note"])))
        group += body
        return [table]


def setup(app):
    app.add_directive("errata-table", ErrataTable)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
