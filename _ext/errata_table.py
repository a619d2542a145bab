"""The `{errata-table}` directive: every source figure the course corrects, read from book/data/source_figures/*.csv.

A row with a non-empty `course_text` is a figure of the source pages that does not follow from its own
inputs; the chapter prints the right value and explains it in an Erratum note. The table is built at
every build from the CSV files (each file is a dependency of the page), so it cannot fall behind.
"""

from docutils import nodes
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

from book.source_figures import FOLDER, ROWS

COLUMNS = ("chapter", "the source says", "the course prints", "why")


def cell(*children):
    entry = nodes.entry()
    entry += nodes.paragraph("", "", *children)
    return entry


class ErrataTable(SphinxDirective):
    has_content = False

    def run(self):
        for path in sorted(FOLDER.glob("*.csv")):
            self.env.note_dependency(str(path))
        rows = [row for row in ROWS if row["course_text"].strip()]
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
        for row in rows:
            docname = f"chapters/{row['chapter']}"
            link = nodes.Text(row["chapter"])  # a chapter still being written, not yet in the table of contents
            if docname in self.env.found_docs:
                link = addnodes.pending_xref(
                    "",
                    nodes.inline("", row["chapter"]),
                    refdomain="std",
                    reftype="doc",
                    reftarget=f"/{docname}",
                    refexplicit=False,
                    refdoc=self.env.docname,
                    refwarn=True,
                )
            body += nodes.row(
                "",
                cell(link),
                cell(nodes.Text(row["source_text"])),
                cell(nodes.Text(row["course_text"])),
                cell(nodes.Text(row["note"])),
            )
        group += body
        return [table]


def setup(app):
    app.add_directive("errata-table", ErrataTable)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
