r"""The website works in a real browser (Debian's chromium, headless, driven by Playwright).

On every page of _toc.yml: it loads with no console error; every image has loaded and has alt text, and
a chapter shows one loaded figure per figure cell, each with a caption and an alt text that states a number.
Across pages: the next/previous links walk the book in the order of _toc.yml; the search page finds "cache"
in the key-value-cache chapter; each notebook page's Binder button opens that page's file in JupyterLab; the
recap quiz hides its answers until clicked. A screenshot of the first screen of each page goes to
_build/screenshots/. The accessibility checks (axe-core) are in test_accessibility.py, so that `make test`
can run the two files side by side.

Each page is opened once in light mode (the `opened` fixture), and every test that only reads a page
reads that one load: loading a chapter takes a second or two. The tests that click (the colour switch,
search, the quiz) open their own page.

The network is closed, for the whole browser context: a request that leaves localhost is aborted and
recorded, and a page that makes one fails. The site needs none: MathJax is served from _static/mathjax/
(_ext/offline_site.py), so every formula is typeset with no network, as from a folder or a USB stick in a
classroom: no raw `\(`, `\[` or `$$` is left in the text, and MathJax reports no error.
"""
import re
from urllib.parse import urljoin

import jupytext
import pytest

import built_site

PAGES = built_site.toc_pages()
NOTEBOOKS = [p for p in PAGES if built_site.is_notebook(p)]
QUIZ = "chapters/09_recap_quiz"
KV_CACHE = "chapters/04_kv_cache"
GENERIC_ALT = re.compile(r"^(a |an |the )?(plot|figure|image|chart|graph|picture|png)\b", re.IGNORECASE)


def figure_cells(page_name):
    nb = jupytext.read(built_site.source_of(page_name))
    return [c for c in nb.cells if c.cell_type == "code" and "figure" in c.metadata.get("mystnb", {})]


@pytest.mark.parametrize("page_name", PAGES)
def test_page_loads_with_its_figures(opened, page_name):
    v = opened(page_name)
    images = v.images()
    shots = built_site.HTML.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    v.page.screenshot(path=shots / f"{page_name.replace('/', '__')}.png")  # the first screen; the whole page took 2-4 s

    assert not v.console_errors(), f"{page_name}: console errors: {v.console_errors()}"
    assert not v.unexpected_requests(), f"{page_name}: requests outside the site: {v.unexpected_requests()}"
    broken = [src for src, width, _, _ in images if not width]
    assert not broken, f"{page_name}: images that did not load: {broken}"
    no_alt = [src for src, _, alt, _ in images if not (alt or "").strip()]
    assert not no_alt, f"{page_name}: images without alt text: {no_alt}"
    figures = [(src, alt) for src, _, alt, in_figure in images if in_figure]
    if built_site.is_notebook(page_name):
        expected = len(figure_cells(page_name))
        assert len(figures) == expected, f"{page_name}: {expected} figure cells, {len(figures)} figures shown"
    uncaptioned = v.page.evaluate("""Array.from(document.querySelectorAll('article figure'))
        .filter(f => !(f.querySelector('figcaption')?.innerText || '').trim()).length""")
    assert not uncaptioned, f"{page_name}: {uncaptioned} figures without a caption"
    for src, alt in figures:
        assert not GENERIC_ALT.match(alt) and len(alt.split()) >= 8 and re.search(r"\d", alt), (
            f"{page_name}: the alt text of {src} should say what the picture shows and its key number: {alt!r}")


def _walk(opened, first, selector):
    """Follow one kind of link (next or previous) from page `first` to the end; return the pages seen."""
    seen = [first]
    while len(seen) <= len(PAGES):
        v = opened(seen[-1])
        link = v.page.query_selector(selector)
        if not link:
            break
        url = urljoin(v.page.url, link.get_attribute("href"))
        assert url.startswith(v.base), f"{seen[-1]}: the {selector} link leaves the site: {url}"
        seen.append(re.sub(r"\.html(#.*)?$", "", url[len(v.base):]))
    return seen


def test_next_and_previous_links_walk_the_book_in_order(opened):
    assert _walk(opened, PAGES[0], "a.right-next") == PAGES, "the next links do not follow _toc.yml"
    assert _walk(opened, PAGES[-1], "a.left-prev") == PAGES[::-1], (
        "the previous links do not follow _toc.yml backwards")


def test_colour_mode_switch_turns_the_page_dark(visit):
    v = visit(PAGES[0], "light")
    button = v.page.locator(".theme-switch-button").first
    themes = []
    for _ in range(3):  # light -> dark -> auto (follows the system, light here)
        button.click()
        themes.append(v.page.evaluate("document.documentElement.dataset.theme"))
    assert "dark" in themes, f"the colour-mode button never made the page dark: {themes}"


def test_search_finds_cache_in_the_kv_cache_chapter(visit):
    expected = KV_CACHE if KV_CACHE in PAGES else "glossary"  # before chapter 4 exists, the glossary defines it
    v = visit("search")
    v.page.goto(urljoin(v.base, "search.html?q=cache"), wait_until="load")
    v.page.wait_for_selector("ul.search li a", timeout=15_000)
    hits = [re.sub(r"\.html.*$", "", a.get_attribute("href")) for a in v.page.query_selector_all("ul.search li a")]
    assert expected in hits, f"searching 'cache' did not find {expected}: {hits}"
    assert not v.console_errors(), v.console_errors()


@pytest.mark.parametrize("page_name", NOTEBOOKS)
def test_launch_button_opens_this_file_on_binder(opened, page_name):
    cfg = built_site.config()
    source = built_site.source_of(page_name).relative_to(built_site.ROOT)
    expected = built_site.binder_url(source.as_posix())  # the theme's launch button must agree with our {binder} role
    v = opened(page_name)
    # the launch button in the page header; {binder} links in the text (to exercises) are checked in test_links.py
    links = [a.get_attribute("href") for a in v.page.query_selector_all("a[href*='/v2/gh/']:not(.binder-link)")]
    assert links == [expected], f"{page_name}: launch buttons {links}, expected {expected}"
    assert cfg["launch_buttons"]["notebook_interface"] == "jupyterlab"


def test_recap_quiz_hides_answers_until_clicked(visit):
    if QUIZ not in PAGES:
        pytest.skip(f"{QUIZ} is not in _toc.yml yet")
    v = visit(QUIZ)
    answers = v.page.locator("article details")
    assert answers.count() > 0, "the quiz page has no folded answers"
    for i in range(answers.count()):
        answer = answers.nth(i)
        body = answer.locator(":scope > :not(summary)").first
        assert not body.is_visible(), f"answer {i + 1} is visible before it is clicked"
        answer.locator(":scope > summary").click()
        body.wait_for(state="visible", timeout=5_000)


RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{")


@pytest.mark.parametrize("page_name", PAGES)
def test_formulas_render_with_no_network(opened, page_name):
    """Every formula of the page is typeset by the site's own MathJax, with the network closed."""
    v = opened(page_name)
    formulas = v.page.locator("article .math").count()  # Sphinx puts each formula in a .math element
    if formulas:
        try:
            v.page.wait_for_function("window.MathJax?.startup?.promise", timeout=20_000)
        except Exception:
            pytest.fail(f"{page_name}: MathJax never started; requests outside the site: {v.unexpected_requests()}")
        v.page.evaluate("MathJax.startup.promise")
    state = v.page.evaluate("""() => {
        const article = document.querySelector('article').cloneNode(true);
        article.querySelectorAll('pre, code, script, mjx-assistive-mml').forEach(e => e.remove());
        return {
            untypeset: Array.from(document.querySelectorAll('article .math'))
                .filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.trim().slice(0, 80)),
            errors: Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]'))
                .map(e => e.getAttribute('data-mjx-error') || e.textContent),
            text: article.textContent,
            mathjax: window.MathJax?.version || null,
        };
    }""")
    assert not v.unexpected_requests(), f"{page_name}: requests outside the site: {v.unexpected_requests()}"
    assert not state["untypeset"], f"{page_name}: formulas left as TeX: {state['untypeset'][:5]}"
    assert not state["errors"], f"{page_name}: MathJax errors: {state['errors'][:5]}"
    raw = sorted({m.group() for m in RAW_TEX.finditer(state["text"])})
    assert not raw, f"{page_name}: raw TeX delimiters in the text: {raw}"
    if formulas:
        assert state["mathjax"].startswith("3."), f"{page_name}: MathJax {state['mathjax']}, expected 3.x"
