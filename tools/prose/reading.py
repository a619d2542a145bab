"""Reading measures of a page: python -m tools.prose.reading chapters/NN_slug.md [...] [-v]

Prose words (markdown cells, with maths, code, directive fences, front matter, roles' targets and
labels removed), mean sentence length, sentences over 45 words, visible code lines, figures, minutes
(200 wpm prose + visible code lines / 20 + 1 a figure), and output lines over 77 characters in the
page's golden (tests/golden/<stem>.ipynb) when it exists.
"""

import json
import re
import sys
from pathlib import Path

import jupytext


def prose_of(md):
    md = re.sub(r"\$\$.*?\$\$", " ", md, flags=re.S)
    md = re.sub(r"\\begin\{.*?\\end\{[^}]*\}", " ", md, flags=re.S)
    md = re.sub(r"\$[^$\n]+\$", "X", md)
    md = re.sub(r"^(```|:::).*?$", " ", md, flags=re.M)  # fence lines (keep admonition bodies)
    md = re.sub(r"^:\w[\w-]*:.*$", " ", md, flags=re.M)  # directive options
    md = re.sub(r"^\(.*?\)=\s*$", " ", md, flags=re.M)  # labels
    md = re.sub(r"^#+ ", "", md, flags=re.M)
    md = re.sub(r"\{[\w:-]+\}`([^`<]*)(<[^>]*>)?`", r"\1", md)  # roles
    md = re.sub(r"`[^`]*`", "X", md)
    md = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", md)
    md = re.sub(r"\[\^[^\]]*\]:?", " ", md)
    md = re.sub(r"<[^>]+>", " ", md)
    return md


def sentences(text):
    text = re.sub(r"\s+", " ", text)
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z\"'(])|\n\s*[-*] ", text)
    return [p for p in parts if len(p.split()) >= 3]


def _wide_output_lines(path):
    """Output lines over 77 characters in the page's golden, or None without one."""
    golden = Path(path).parent.parent / "tests" / "golden" / (Path(path).stem + ".ipynb")
    if not golden.exists():
        return None
    wide = 0
    for cell in json.loads(golden.read_text())["cells"]:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            wide += sum(1 for line in text.splitlines() if len(line) > 77)
    return wide


def measure(path):
    nb = jupytext.read(path)
    prose = ""
    code_lines = 0
    figures = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            # list items and paragraphs become separate sentences
            text = prose_of(cell.source)
            for block in re.split(r"\n\s*\n|\n\s*[-*] |\n\d+\. ", text):
                prose += block.strip() + "\n\n"
        elif cell.cell_type == "code":
            tags = cell.metadata.get("tags", [])
            if not any(t in tags for t in ("hide-input", "remove-input", "remove-cell", "hide-cell")):
                code_lines += len([l for l in cell.source.splitlines() if l.strip()])
            if "mystnb" in cell.metadata and "figure" in cell.metadata["mystnb"]:
                figures += 1
    words = len(re.findall(r"[A-Za-z0-9][\w'’-]*", prose))
    sents = []
    for block in prose.split("\n\n"):
        sents += sentences(block)
    lengths = [len(s.split()) for s in sents]
    mean = sum(lengths) / len(lengths) if lengths else 0
    over = [s for s in sents if len(s.split()) > 45]
    minutes = words / 200 + code_lines / 20 + figures
    wide = _wide_output_lines(path)
    print(
        f"{path}: {words} prose words, {len(sents)} sentences, mean {mean:.1f} words, "
        f"{len(over)} over 45, {code_lines} visible code lines, {figures} figures, "
        f"~{minutes:.0f} min, output lines > 77: {wide}"
    )
    if "-v" in sys.argv:
        for s in over:
            print("   >45:", s[:200])


for arg in sys.argv[1:]:
    if arg != "-v":
        measure(arg)
