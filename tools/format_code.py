"""Format the code cells of Jupytext MyST notebooks (chapters/*.md, solutions/*.md) with ruff, at the width of
the website's code column, so that no code scrolls sideways.

    .venv/bin/python -m tools.format_code chapters/*.md solutions/*.md          # rewrite the files in place
    .venv/bin/python -m tools.format_code --check chapters/*.md solutions/*.md  # change nothing; exit 1 if any
                                                                                  # line is too long or any cell
                                                                                  # would change

LINE_LENGTH is measured, not chosen: at a 1280-pixel window, a code cell of the built site shows 652 px of
text (its <pre> is 684 px wide with 16 px padding each side) in a 14 px monospace font of 8.43 px per
character, which is 77.35 characters; so 77.

Only the code of `{code-cell}` blocks is touched: the Markdown, the cells' options and metadata, and raw
cells (otter's `# BEGIN QUESTION` ...) stay byte for byte. A cell that ruff cannot parse (IPython magics,
a deliberate syntax error) is left as it is and reported. otter's `# BEGIN/END SOLUTION` markers are
comments, which ruff keeps where they are. `--check` prints `file:line: ...` for each code line longer than
LINE_LENGTH and for each cell that formatting would change, with the line where the cell's code starts.
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

LINE_LENGTH = 77
RUFF = Path(sys.executable).parent / "ruff"
# a code cell of a Jupytext MyST file: the fence, optional `:key: value` options or a --- yaml block, the code
FENCE = re.compile(r"^(?P<fence>`{3,})\{code-cell\}[^\n]*\n", re.M)


def code_cells(text):
    """(start, end) character offsets of the code (without the options) of every code cell."""
    for m in FENCE.finditer(text):
        close = re.compile(rf"^{m.group('fence')}\s*$", re.M).search(text, m.end())
        if close is None:
            continue
        start = m.end()
        if text.startswith("---\n", start):  # a yaml block of options
            start = text.index("\n---\n", start + 3) + 5
        while re.match(r":[\w-]+:.*\n", text[start : close.start()]):  # short options
            start = text.index("\n", start) + 1
        yield start, close.start()


def ruff_format(code):
    """The code as ruff formats it, or None if ruff cannot parse it."""
    run = subprocess.run(
        [str(RUFF), "format", f"--line-length={LINE_LENGTH}", "--stdin-filename=cell.py", "-"],
        input=code,
        capture_output=True,
        text=True,
    )
    return run.stdout if run.returncode == 0 else None


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def process(path, check):
    """Format one file (or only report, with check); return the report lines."""
    text = path.read_text()
    report, pieces, last = [], [], 0
    for start, end in code_cells(text):
        code = text[start:end]
        formatted = ruff_format(code) if code.strip() else code
        if formatted is None:
            report.append(f"{path}:{line_of(text, start)}: ruff cannot parse this cell; left as it is")
            formatted = code
        if check:
            if formatted != code:
                report.append(f"{path}:{line_of(text, start)}: the cell would be reformatted")
            # a # WRONG cell holds planted wrong answers for the tests, never shown to a reader
            shown = not code.startswith("# WRONG")
            for n, line in enumerate(code.splitlines(), start=line_of(text, start)):
                if shown and len(line) > LINE_LENGTH:
                    report.append(f"{path}:{n}: line of {len(line)} characters (at most {LINE_LENGTH})")
        pieces += [text[last:start], formatted]
        last = end
    pieces.append(text[last:])
    if not check and "".join(pieces) != text:
        path.write_text("".join(pieces))
        report.append(f"{path}: formatted")
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="Jupytext MyST notebooks (.md)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if anything would change")
    args = parser.parse_args(argv)
    if not RUFF.exists():
        sys.exit(f"{RUFF} is missing: pip install -r requirements-dev.txt (it pins ruff)")
    report = [line for path in args.files for line in process(path, args.check)]
    print("\n".join(report) or f"{len(args.files)} files: every code cell formatted, no line over {LINE_LENGTH}")
    return 1 if args.check and any("cannot parse" not in line for line in report) else 0


if __name__ == "__main__":
    sys.exit(main())
