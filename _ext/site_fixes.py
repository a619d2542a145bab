"""Two small fixes to the page template that the browser tests would otherwise catch as console errors.

- Inline scripts added while Sphinx reads (sphinx-thebe's configuration, sphinx-togglebutton's selector)
  reach the page twice, once with the file name None and once with "", and the second
  `const THEBE_JS_URL` throws a SyntaxError on every page. Each distinct script is kept once.
- pydata-sphinx-theme logs "Got invalid theme mode" on a first visit unless the theme has a default
  mode; the book follows the reader's system setting ("auto") until the reader picks light or dark.
"""


def keep_each_script_once(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for script in context.get("script_files", []):
        key = (script.filename or "", script.attributes.get("body"))  # the copies differ only in None vs ""
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def default_to_system_mode(app, config):
    config.html_context.setdefault("default_mode", "auto")


def setup(app):
    app.connect("config-inited", default_to_system_mode)
    app.connect("html-page-context", keep_each_script_once, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
