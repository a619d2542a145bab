"""Colab: a button in each chapter page's launch menu, and the `{colab}` role for the exercises.

Colab opens `.ipynb` files of a GitHub repository, so both point at the copies that `python -m tools.colab`
writes into `notebooks/` (a chapter page `chapters/NN_slug` opens `notebooks/NN_slug.ipynb`; an exercise
`exercises/NN_slug.ipynb` opens `notebooks/exercises/NN_slug.ipynb`), built from the same `repository`
settings of _config.yml as the Binder buttons. A chapter page or exercise without its copy is a build
warning (an error under -W): run `python -m tools.colab`.

    {colab}`exercises/05_sampling.ipynb`            -> "open in Colab"
"""

import re
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)
COLAB = "https://colab.research.google.com/github"


def colab_url(theme_options, notebook):
    owner_repo = re.sub(r"^https://github\.com/|/$|\.git$", "", theme_options["repository_url"])
    branch = theme_options.get("repository_branch", "main")
    return f"{COLAB}/{owner_repo}/blob/{branch}/{notebook}"


def notebook_of(path):
    """notebooks/... for a chapter page (docname) or an exercise path."""
    if path.startswith("exercises/"):
        return f"notebooks/{path}"
    return f"notebooks/{path.removeprefix('chapters/')}.ipynb"


def add_button(app, pagename, templatename, context, doctree):
    if not pagename.startswith("chapters/"):
        return
    notebook = notebook_of(pagename)
    if not (Path(app.srcdir) / notebook).exists():
        logger.warning(f"no Colab notebook {notebook} for {pagename}: run python -m tools.colab", location=pagename)
        return
    for group in context.get("header_buttons", []):
        if group.get("label") == "launch-buttons":
            group["buttons"].append(
                {
                    "type": "link",
                    "text": "Colab",
                    "tooltip": "Open in Colab",
                    "icon": "_static/images/logo_colab.png",
                    "url": colab_url(app.config.html_theme_options, notebook),
                }
            )


def colab_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    m = re.fullmatch(r"\s*(.*?)\s*<([^<>]+)>\s*", text)
    title, path = (m.group(1), m.group(2).strip()) if m else ("open in Colab", text.strip())
    notebook = notebook_of(path)
    if not (Path(env.srcdir) / notebook).exists():
        logger.warning(
            f"colab link to a notebook that does not exist: {notebook} (python -m tools.colab)",
            location=(env.docname, lineno),
        )
    node = nodes.reference(
        rawtext, title, refuri=colab_url(env.config.html_theme_options, notebook), classes=["colab-link"]
    )
    return [node], []


def setup(app):
    app.add_role("colab", colab_role)
    app.connect("html-page-context", add_button, priority=600)  # after the theme's launch buttons (500)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
