"""Small fixes to the site that the browser tests would otherwise catch.

- Inline scripts added while Sphinx reads (sphinx-thebe's configuration, sphinx-togglebutton's selector)
  reach the page twice, once with the file name None and once with "", and the second
  `const THEBE_JS_URL` throws a SyntaxError on every page. Each distinct script is kept once.
- pydata-sphinx-theme logs "Got invalid theme mode" on a first visit unless the theme has a default
  mode; the book follows the reader's system setting ("auto") until the reader picks light or dark.
- An incremental build after _toc.yml changes (a chapter added or moved) re-reads only the pages whose
  own table of contents changed, so the other pages keep stale next/previous links. When the toc file
  differs from the one of the last build, every page is read and written again (executed notebooks
  still come from the cache).
- Docutils writes the bibliography as `<div role="list" class="citation-list">` around entries whose role
  is `doc-biblioentry`; a list without list items is a critical ARIA error (axe: aria-required-children).
  The entries keep their own role; the wrapper loses its `role="list"`.
- pydata-sphinx-theme folds a sidebar entry that has pages under it (a lesson and its lab) into a
  `<details>` whose `<summary>` holds only a decorative chevron: axe finds no name for it (summary-name,
  serious). Each written page's summary gets an aria-label when the build ends.
- MyST-NB's merge of a cell's stream outputs (nb_merge_streams) strips each piece's trailing white space and
  adds a newline, but the kernel cuts a stream wherever a flush falls, often between a printed line and its
  newline: the page then shows a blank line that was never printed (and the merged text was written back
  into the executed notebook, the piece kept beside it). The pieces are joined exactly as they came, into
  new outputs, before \r and \b are applied as MyST-NB does.
- MyST-NB, when it finds a notebook in its execution cache, renders the cached outputs but writes the
  notebook as read, without outputs, to _build/jupyter_execute/ and to the page's .ipynb download: it
  writes the object it gave the cache client, which swapped in a merged copy. The merged cells and
  metadata are put back into that object. `make book` executes every chapter into the cache before
  Sphinx runs, so every build takes this path.

The last two replace MyST-NB internals (`myst_nb.core.render.coalesce_streams`, and
`NotebookClientCache.start_client` in `myst_nb/core/execute/cache.py`), written against MyST-NB 1.4.0, the
pinned version. Upstream, the stripping came with the stream merge of executablebooks/MyST-NB#604 and was
discussed in #637 and #640 (rstrip instead of strip); the cache hit that writes the notebook without its
outputs has no upstream report that we know of. `setup` refuses another MyST-NB version, so that an upgrade
re-checks both against upstream instead of patching code that moved.
"""

import copy
import functools
import hashlib
from pathlib import Path

import myst_nb
import myst_nb.core.execute.cache
import myst_nb.core.render
import myst_nb.core.utils
from sphinx.errors import ExtensionError

WRITTEN_FOR_MYST_NB = "1.4.0"  # the version whose internals the two patches below replace


def keep_each_script_once(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for script in context.get("script_files", []):
        key = (script.filename or "", script.attributes.get("body"))  # the copies differ only in None vs ""
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def citation_list_without_list_role(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = context["body"].replace(
            '<div role="list" class="citation-list">', '<div class="citation-list">'
        )


TOGGLE = '<summary><span class="toctree-toggle" role="presentation">'
NAMED_TOGGLE = '<summary aria-label="Show or hide the pages under it"><span class="toctree-toggle" role="presentation">'


def name_the_sidebar_toggles(app, exception):
    """The theme writes the sidebar in its templates, outside the page body: the written pages are fixed."""
    if exception is None and app.builder.format == "html":
        for page in Path(app.outdir).rglob("*.html"):
            html = page.read_text()
            if TOGGLE in html:
                page.write_text(html.replace(TOGGLE, NAMED_TOGGLE))


def default_to_system_mode(app, config):
    config.html_context.setdefault("default_mode", "auto")


def reread_all_when_the_toc_changes(app, env, added, changed, removed):
    toc = Path(app.srcdir) / app.config.external_toc_path
    digest = hashlib.sha256(toc.read_bytes()).hexdigest() if toc.exists() else ""
    if getattr(env, "book_toc_digest", None) == digest:
        return []
    env.book_toc_digest = digest
    return sorted(env.found_docs - added - removed)


def coalesce_streams_exactly(outputs):
    """A cell's outputs with each stream's pieces joined exactly, at the place of its first piece."""
    merged, first = [], {}
    for output in outputs or []:
        if output["output_type"] == "stream" and output["name"] in first:
            first[output["name"]]["text"] += output["text"]
            continue
        output = copy.deepcopy(output)
        if output["output_type"] == "stream":
            first[output["name"]] = output
        merged.append(output)
    # MyST-NB's own pass, now over one piece per stream: \r and \b, stdout before stderr
    return myst_nb.core.utils.coalesce_streams(merged)


def merge_cached_outputs_in_place(start_client):
    @functools.wraps(start_client)
    def start(client):
        given = client._notebook
        start_client(client)
        if client._notebook is not given:  # a cache hit: the client holds a merged copy
            given.cells[:] = client._notebook.cells
            given.metadata = client._notebook.metadata
            client._notebook = given

    return start


def check_myst_nb_version(version=None):
    version = version or myst_nb.__version__
    if version != WRITTEN_FOR_MYST_NB:
        raise ExtensionError(
            f"_ext/site_fixes.py patches MyST-NB {WRITTEN_FOR_MYST_NB} internals (coalesce_streams, "
            f"NotebookClientCache.start_client) and MyST-NB {version} is installed: check both against upstream "
            "(is the fix still needed? did the patched function move?), then update WRITTEN_FOR_MYST_NB"
        )


def setup(app):
    check_myst_nb_version()
    myst_nb.core.render.coalesce_streams = coalesce_streams_exactly
    cache_client = myst_nb.core.execute.cache.NotebookClientCache
    if not hasattr(cache_client.start_client, "__wrapped__"):
        cache_client.start_client = merge_cached_outputs_in_place(cache_client.start_client)
    # Sphinx re-reads every page when an "env" config value changes: this one is the digest of the local
    # extensions, so changing one of them rewrites every page (an incremental build would keep stale ones)
    extensions = sorted(Path(__file__).parent.glob("*.py"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in extensions)).hexdigest()
    app.add_config_value("course_extensions_digest", digest, "env")
    app.connect("env-get-outdated", reread_all_when_the_toc_changes)
    app.connect("config-inited", default_to_system_mode)
    app.connect("html-page-context", keep_each_script_once, priority=900)
    app.connect("html-page-context", citation_list_without_list_role)
    app.connect("build-finished", name_the_sidebar_toggles)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
