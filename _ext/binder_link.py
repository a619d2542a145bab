"""The `{binder}` role: a link that opens a file of the repository in JupyterLab on Binder.

    {binder}`exercises/01_next_token_prediction.ipynb`            -> "launch on Binder"
    {binder}`Next-token prediction <exercises/01_next_token_prediction.ipynb>`

The address is built from the same settings as the launch buttons of the chapters (`repository` and
`launch_buttons` in _config.yml), so a fork that changes them there changes these links too. A path that
does not exist in the repository is a build warning (an error under -W).
"""

import re
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)
INTERFACES = {"classic": "tree", "jupyterlab": "lab/tree"}


def binder_url(theme_options, path):
    launch = theme_options.get("launch_buttons", {})
    owner_repo = re.sub(r"^https://github\.com/|/$|\.git$", "", theme_options["repository_url"])
    branch = theme_options.get("repository_branch", "main")
    interface = INTERFACES[launch.get("notebook_interface", "classic")]
    return f"{launch['binderhub_url'].rstrip('/')}/v2/gh/{owner_repo}/{branch}?urlpath={interface}/{path}"


def binder_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    m = re.fullmatch(r"\s*(.*?)\s*<([^<>]+)>\s*", text)
    title, path = (m.group(1), m.group(2).strip()) if m else ("launch on Binder", text.strip())
    if not (Path(env.srcdir) / path).exists():
        logger.warning(f"binder link to a file that does not exist: {path}", location=(env.docname, lineno))
    node = nodes.reference(
        rawtext, title, refuri=binder_url(env.config.html_theme_options, path), classes=["binder-link"]
    )
    return [node], []


def setup(app):
    app.add_role("binder", binder_role)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
