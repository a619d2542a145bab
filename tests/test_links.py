"""The built website has no broken internal link: every relative href and src leads to a file, and every
#anchor to an element with that id on the target page. External links are not followed (no network)."""

import re
from html.parser import HTMLParser
from urllib.parse import unquote, urldefrag, urlsplit

import pytest

from tools import built_site


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) and tag in ("a", "img", "link", "script", "iframe", "source"):
                self.links.append((tag, attrs[key]))


_PARSED = {}  # each built page parsed once per run


def _parse(path):
    if path not in _PARSED:
        parser = _Links()
        parser.feed(path.read_text(errors="replace"))
        _PARSED[path] = parser
    return _PARSED[path]


def _broken_links(html):
    broken = []
    for page in sorted(html.rglob("*.html")):
        if "_static" in page.relative_to(html).parts:
            continue  # the theme's template fragments, not pages
        for tag, link in _parse(page).links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//") or link.startswith("javascript:"):
                continue  # external: mybinder.org, the repository, arXiv
            target_part, fragment = urldefrag(link)
            path = unquote(urlsplit(target_part).path)
            target = (page.parent / path).resolve() if path else page
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(html)}: <{tag}> {link}"
            if not target.exists():
                broken.append(f"{where}: no such file")
            elif fragment and target.suffix == ".html" and unquote(fragment) not in _parse(target).ids:
                broken.append(f"{where}: no element with id {fragment!r}")
    return broken


def test_every_internal_link_and_anchor_resolves(site):
    pages = list(site.rglob("*.html"))
    assert len(pages) >= len(built_site.toc_pages())
    broken = _broken_links(site)
    assert not broken, f"{len(broken)} broken links:\n" + "\n".join(broken[:50])


def test_the_checker_finds_a_broken_link(tmp_path):
    """The check itself can fail: a missing file and a missing anchor are both reported."""
    (tmp_path / "a.html").write_text(
        '<p id="here"></p><a href="b.html">b</a><a href="a.html#nowhere">x</a>'
        '<a href="#here">ok</a><a href="https://example.org/">out</a>'
    )
    assert [b.split(": ", 2)[2] for b in _broken_links(tmp_path)] == ["no such file", "no element with id 'nowhere'"]


@pytest.mark.parametrize("page", [p for p in built_site.toc_pages() if built_site.is_notebook(p)])
def test_notebook_page_offers_its_notebook_for_download(site, page):
    """The download button of a chapter offers the executed notebook, and the file is there."""
    html = (site / f"{page}.html").read_text()
    assert f"{page.split('/')[-1]}.ipynb" in html, f"{page}: no .ipynb download link"
    assert (site / "_sources" / f"{page}.ipynb").exists(), f"{page}: the downloadable notebook is missing"


def test_binder_links_open_files_of_the_repository(site):
    """Every Binder link of the site (chapter launch buttons and {binder} links, e.g. to the exercises)
    opens, in JupyterLab, a file that exists in the repository, on the repository and branch of _config.yml."""
    prefix = built_site.binder_url("")
    bad = []
    for page in sorted(site.rglob("*.html")):
        if "_static" in page.relative_to(site).parts:
            continue
        for _, link in _parse(page).links:
            if "/v2/gh/" in link and not (
                link.startswith(prefix) and (built_site.ROOT / unquote(link[len(prefix) :])).is_file()
            ):
                bad.append(f"{page.relative_to(site)}: {link}")
    assert not bad, "Binder links to a wrong repository or a missing file:\n" + "\n".join(bad)


ROLE_REF = re.compile(r"\{ref\}`(?:[^`<]*<)?([^`<>]+)>?`")
LABEL = re.compile(r"^\(([\w-]+)\)=\s*$", re.MULTILINE)


def references_to_other_pages(text):
    """The {ref} labels of a page that the page does not define itself."""
    return sorted({m.group(1).strip() for m in ROLE_REF.finditer(text)} - set(LABEL.findall(text)))


@pytest.mark.parametrize("page", built_site.toc_pages())
def test_pages_link_other_pages_as_files(page):
    """In JupyterLab a learner reads a page as a notebook, where jupyterlab-myst resolves a {ref} to a label of
    the same page only (tests/test_jupyterlab.py sees the others shown as bare labels with a warning sign): a
    page links another one as a file, [its title](04_kv_cache.md), which the website resolves too."""
    source = built_site.source_of(page)
    other = references_to_other_pages(source.read_text())
    assert not other, f"{source.relative_to(built_site.ROOT)}: {{ref}} to labels of other pages {other}; link the file"


def test_the_reference_check_finds_a_label_of_another_page():
    text = "(here)=\n# A page\n\nSee {ref}`here`, {ref}`the cache <ch-kv-cache>` and {ref}`exercises`.\n"
    assert references_to_other_pages(text) == ["ch-kv-cache", "exercises"]


def test_every_chapter_file_is_a_page_of_the_toc():
    """_toc.yml is the one registry of pages: a chapter file left out of it would be neither built nor tested."""
    files = {f"chapters/{p.stem}" for p in (built_site.ROOT / "chapters").glob("*.md")}
    missing = sorted(files - set(built_site.chapter_pages()))
    assert not missing, f"in chapters/ but not in _toc.yml: {missing}"


def test_every_citation_has_its_entry():
    """references.bib parses, and every {cite} key of a page is one of its entries (found before a build fails)."""
    import pybtex.database

    entries = pybtex.database.parse_file(built_site.ROOT / "references.bib").entries
    pages = sorted(built_site.ROOT.glob("chapters/*.md")) + sorted(built_site.ROOT.glob("*.md"))
    cited = {
        (page.name, key.strip())
        for page in pages
        for keys in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", page.read_text())
        for key in keys.split(",")
    }
    missing = sorted(f"{page}: {key}" for page, key in cited if key not in entries)
    assert cited and not missing, f"cited but not in references.bib: {missing}"
