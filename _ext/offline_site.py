"""The site works with no network: MathJax is served from the site itself, and thebe is left out.

- MathJax 3 comes from the pinned `django-static-mathjax` package (requirements-dev.txt), which ships
  MathJax's own `es5/` build. After an HTML build, the combined file `tex-mml-chtml.js` and the folders it
  loads from at run time (TeX extensions, the CHTML fonts, the menu, the accessibility explorer with its
  speech rules) are copied to `_static/mathjax/`; `_config.yml` sets `mathjax_path: mathjax/tex-mml-chtml.js`,
  which Sphinx resolves inside `_static/`. MathJax finds its other files next to the script it was loaded from.
- sphinx-thebe is always loaded by Jupyter Book, and puts on every page a script naming thebe's CDN URL, its
  loader, its stylesheet and its kernel settings, though no page has a thebe button (`launch_buttons.thebe` is
  off). They are removed from every page and from `_static/`.
"""

import posixpath
import shutil
from importlib import resources
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError

MATHJAX_SCRIPT = "tex-mml-chtml.js"
MATHJAX_PARTS = [MATHJAX_SCRIPT, "input", "output/chtml", "ui", "a11y", "sre"]
THEBE_FILES = ["sphinx-thebe.js", "sphinx-thebe.css"]


def mathjax_es5():
    """The es5/ folder of the MathJax 3 that the django-static-mathjax package ships."""
    try:
        folder = Path(str(resources.files("mathjax"))) / "static" / "mathjax" / "es5"
    except ModuleNotFoundError:
        folder = None
    if folder is None or not (folder / MATHJAX_SCRIPT).exists():
        raise ExtensionError(
            "MathJax is served from the site: pip install -r requirements-dev.txt "
            "(it pins django-static-mathjax, which ships MathJax 3)"
        )
    return folder


def check_mathjax_path(app, config):
    mathjax_es5()  # fail at the start of the build, not at its end
    if config.mathjax_path != f"mathjax/{MATHJAX_SCRIPT}":
        raise ExtensionError(
            f"offline_site copies MathJax to _static/mathjax/: set "
            f"sphinx.config.mathjax_path to mathjax/{MATHJAX_SCRIPT} in _config.yml"
        )


def _is_thebe(asset):
    return posixpath.basename(asset.filename or "") in THEBE_FILES or "THEBE_JS_URL" in (
        asset.attributes.get("body") or ""
    )


def drop_thebe_assets(app, pagename, templatename, context, doctree):
    context["script_files"] = [s for s in context.get("script_files", []) if not _is_thebe(s)]
    context["css_files"] = [c for c in context.get("css_files", []) if not _is_thebe(c)]


def drop_thebe_config(app, doctree, docname):
    """sphinx-thebe appends its kernel settings to every page as raw HTML; with no thebe they are dead text."""
    for node in list(doctree.findall(nodes.raw)):
        if "x-thebe-config" in node.astext() or "kernelName =" in node.astext():
            node.parent.remove(node)


def copy_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    source, static = mathjax_es5(), Path(app.outdir) / "_static"
    target = static / "mathjax"
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, target / part)
    for name in THEBE_FILES:
        (static / name).unlink(missing_ok=True)


def setup(app):
    app.connect("config-inited", check_mathjax_path)
    app.connect("html-page-context", drop_thebe_assets, priority=950)
    app.connect("doctree-resolved", drop_thebe_config, priority=900)  # after sphinx-thebe's own (500)
    app.connect("build-finished", copy_mathjax)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
