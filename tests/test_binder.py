"""binder/ sets up the same environment as requirements.txt, with CPU-only PyTorch, and makes JupyterLab
open the chapters (Jupytext Markdown) as notebooks."""
import json
import os
import re
import subprocess

from built_site import ROOT

BINDER = ROOT / "binder"


def pins(path):
    """{package: version} of the exact pins in a requirements file."""
    found = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s#;]+)", line)
        if m:
            found[m.group(1).lower().replace("_", "-")] = m.group(2)
    return found


def test_binder_pins_the_root_requirements_with_the_cpu_torch_wheel():
    root, binder = pins(ROOT / "requirements.txt"), pins(BINDER / "requirements.txt")
    assert binder.pop("torch") == root.pop("torch") + "+cpu"
    assert binder == root, "binder/requirements.txt and requirements.txt pin different packages or versions"
    text = (BINDER / "requirements.txt").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text.splitlines()


def test_binder_python_is_the_course_python():
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    assert '">=3.11"' in (ROOT / "pyproject.toml").read_text()


def test_post_build_installs_the_jupytext_viewer_and_the_book_package(tmp_path):
    overrides = json.loads((BINDER / "overrides.json").read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["markdown"] == "Jupytext Notebook"

    # run postBuild as repo2docker does (from the repository root), with a stand-in `python` that logs its arguments
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/python.log\n')
    (fake_bin / "python").chmod(0o755)
    prefix = tmp_path / "prefix"
    env = dict(os.environ, NB_PYTHON_PREFIX=str(prefix), PATH=f"{fake_bin}:{os.environ['PATH']}")
    run = subprocess.run(["bash", str(BINDER / "postBuild")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    installed = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert json.loads(installed.read_text()) == overrides
    assert "-m pip install --no-deps --editable ." in (tmp_path / "python.log").read_text()
    assert os.access(BINDER / "postBuild", os.X_OK), "repo2docker runs postBuild only if it is executable"
