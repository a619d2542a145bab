"""The Colab buttons: notebooks/ holds a notebook for every chapter page and exercise, in sync with its
source; the first cell installs the course without touching PyTorch; an exercise's first cells load its
checks in an empty folder; the built site links each page to its own notebook on Colab."""

import json
import re

import nbformat
from nbclient import NotebookClient

from tools import colab
from tools.built_site import chapter_pages
from tools.notebooks import ROOT


def test_the_notebooks_are_in_sync_with_their_sources():
    want = colab.expected()
    have = {str(p.relative_to(colab.OUT)): p.read_text() for p in colab.OUT.rglob("*.ipynb")}
    assert sorted(have) == sorted(want), "notebooks/ has other files than its sources: python -m tools.colab"
    stale = [path for path in want if have[path] != want[path]]
    assert not stale, f"stale Colab notebooks (run python -m tools.colab): {stale}"
    pages = {p.removeprefix("chapters/") + ".ipynb" for p in chapter_pages()}
    exercises = {f"exercises/{p.stem}.ipynb" for p in (ROOT / "exercises").glob("*.ipynb")}
    assert set(want) == pages | exercises


def test_the_first_cell_installs_the_course_and_leaves_pytorch_alone():
    for path, text in colab.expected().items():
        first = json.loads(text)["cells"][0]
        source = "".join(first["source"])
        assert "colab-setup" in first["metadata"]["tags"], path
        assert 'find_spec("book") is None' in source and '"--no-deps"' in source, path
        installs = re.findall(r"subprocess\.run\(\[\*pip, (.*?)\]", source)
        assert installs and not any("torch" in args or "numpy" in args for args in installs), (path, installs)


def test_no_myst_role_is_left_for_colab_to_show_raw():
    for path, text in colab.expected().items():
        for cell in json.loads(text)["cells"]:
            if cell["cell_type"] == "markdown":
                assert not re.search(r"\{(term|cite|ref|doc|numref)[^}]*\}`", "".join(cell["source"])), path


def test_an_exercise_loads_its_checks_in_an_empty_folder(tmp_path, monkeypatch):
    """As in Colab, where the notebook's own file is not on disk: the first cell fetches the exercise's file
    (here from COURSE_SOURCE, a folder) and the grader finds its checks; a check then runs."""
    nb = nbformat.reads(colab.expected()["exercises/05_sampling.ipynb"], as_version=4)
    nb.cells = nb.cells[:2] + [
        nbformat.v4.new_code_cell(
            "import numpy as np\nfrom book import softmax\n"
            "def rows_with_temperature(logits, temperatures):\n"
            "    t = np.asarray(temperatures, dtype=float)[:, None]\n"
            "    return softmax(np.asarray(logits, dtype=float) / t)\n"
            "print(grader.notebook)\nprint(grader.check('q1'))"
        )
    ]
    monkeypatch.setenv("COURSE_SOURCE", str(ROOT))  # the kernel inherits it
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert (tmp_path / "05_sampling.ipynb").exists()
    printed = "".join(out.get("text", "") for out in nb.cells[-1].outputs)
    assert "05_sampling.ipynb" in printed and "q1 passed!" in printed, printed


def test_each_chapter_page_has_its_colab_button(site):
    owner_repo, branch = colab.repository()
    for page in chapter_pages():
        html = (site / f"{page}.html").read_text()
        want = (
            f"https://colab.research.google.com/github/{owner_repo}/blob/{branch}/notebooks/"
            f"{page.removeprefix('chapters/')}.ipynb"
        )
        assert want in html, f"{page}: no Colab button to {want}"
    exercises = (site / "exercises.html").read_text()
    for p in (ROOT / "exercises").glob("*.ipynb"):
        assert f"blob/{branch}/notebooks/exercises/{p.name}" in exercises, p.name


def test_the_newer_stack_summary_counts_what_ran_and_what_differs():
    """The lines tools/newer_stack.py prints for a maintainer to paste: page and exercise notebooks counted
    apart, a failed exercise named, pytest's failures counted as differing cells and the cells named."""
    from tools import newer_stack

    assert newer_stack.counted("2 failed, 281 passed, 1 warning in 75.81s (0:01:15)") == {"failed": 2, "passed": 281}
    notebooks = [
        ("01_next_token_prediction.ipynb", True, ""),
        ("01_next_token_prediction_lab.ipynb", True, ""),
        ("exercises/05_sampling.ipynb", False, "colab notebooks/exercises/05_sampling.ipynb: FAILED: TypeError"),
        ("exercises/01_next_token_prediction.ipynb", True, ""),
    ]
    goldens = (["golden ../tests/golden/05_sampling.ipynb::Cell 7: -0.5310"], "1 failed, 282 passed in 75.81s")
    lines = newer_stack.summary("3.13.0 2.15.0+cu132 2.5.5 3.11.2", notebooks, goldens).splitlines()
    assert lines == [
        "newer stack: Python 3.13.0, torch 2.15.0+cu132, numpy 2.5.5, matplotlib 3.11.2",
        "page notebooks: 2 of 2 ran from their install cell",
        "exercise notebooks: 1 of 2 ran from their install cell; failed: 05_sampling.ipynb",
        "goldens under nbval: 282 passed, 1 differ (../tests/golden/05_sampling.ipynb::Cell 7)",
    ]
    broken = newer_stack.summary("3.13.0 2.15.0 2.5.5 3.11.2", None, ([], "ERROR: file not found"))
    assert broken.splitlines()[1] == "goldens under nbval: 0 passed, 0 differ (pytest said: ERROR: file not found)"
