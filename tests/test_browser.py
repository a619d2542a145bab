r"""The website works in a real browser (Debian's chromium, headless, driven by Playwright).

On every page of _toc.yml: it loads with no console error; every image has loaded and has alt text, and
a chapter shows one loaded figure per figure cell, each with a caption and an alt text that states a number; axe-core
finds no critical or serious accessibility violation, in light and in dark mode. Across pages: the
next/previous links walk the book in the order of _toc.yml; the search page finds "cache" in the
key-value-cache chapter; each notebook page's Binder button opens that page's file in JupyterLab; the
recap quiz hides its answers until clicked. A screenshot of the first screen of each page goes to
_build/screenshots/.

Each page is opened once in light mode (the `opened` fixture), and every test that only reads a page
reads that one load: loading a chapter takes a second or two. The dark-mode accessibility check and the
tests that click (the colour switch, search, the quiz) open their own page. axe checks every page in both
modes once, one page per CPU at a time (each page has its own renderer process), before the first
accessibility test reports.

The network is closed, for the whole browser context: a request that leaves localhost is aborted and
recorded, and a page that makes one fails. The site needs none: MathJax is served from _static/mathjax/
(_ext/offline_site.py), so every formula is typeset with no network, as from a folder or a USB stick in a
classroom: no raw `\(`, `\[` or `$$` is left in the text, and MathJax reports no error.
"""

import os
import re
import time
from urllib.parse import urljoin

import jupytext
import pytest

from tools import built_site

PAGES = built_site.toc_pages()
NOTEBOOKS = [p for p in PAGES if built_site.is_notebook(p)]
QUIZ = "chapters/09_recap_quiz"
KV_CACHE = "chapters/04_kv_cache"
GENERIC_ALT = re.compile(r"^(a |an |the )?(plot|figure|image|chart|graph|picture|png)\b", re.IGNORECASE)


class Visit:
    """One page opened in the browser, with what it logged and every request it tried outside localhost."""

    def __init__(self, context, base, page_name, mode="light"):
        self.page = context.new_page()
        self.errors, self.external = [], []
        self.page.add_init_script(f"localStorage.setItem('mode', '{mode}'); localStorage.setItem('theme', '{mode}');")
        self.page.on("console", lambda m: m.type == "error" and self.errors.append((m.text, m.location.get("url", ""))))
        self.page.on("pageerror", lambda e: self.errors.append((f"uncaught: {e}", "")))
        # recorded, not intercepted: routing every request of the page through Python made each page load take
        # seconds; the context's route already aborts whatever is not on localhost
        self.page.on("request", self._record)
        self.base = base
        self.page.goto(urljoin(base, f"{page_name}.html"), wait_until="load")

    def _record(self, request):
        url = request.url
        if url.startswith(("http:", "https:", "ws:", "wss:", "ftp:")) and not url.startswith(self.base):
            self.external.append(url)

    def console_errors(self):
        return [text for text, _ in self.errors]

    def unexpected_requests(self):
        return list(self.external)

    def images(self):
        """(src, natural width, alt, inside a <figure>) for every image, after each has loaded or failed."""
        return self.page.evaluate("""async () => {
            const images = Array.from(document.images);
            await Promise.all(images.map(i => i.decode().catch(() => null)));
            return images.map(i => [i.getAttribute('src'), i.naturalWidth, i.getAttribute('alt'), !!i.closest('figure')]);
        }""")

    def close(self):
        self.page.close()


@pytest.fixture
def visit(browser_context, site_url):
    """A new page, for a test that clicks or navigates; closed after the test."""
    fresh = []

    def open_page(page_name, mode="light"):
        fresh.append(Visit(browser_context, site_url, page_name, mode))
        return fresh[-1]

    yield open_page
    for v in fresh:
        v.close()


@pytest.fixture(scope="module")
def opened(browser_context, site_url):
    """Each page loaded once in light mode and kept open, for the tests that only read it."""
    pages = {}

    def open_page(page_name):
        if page_name not in pages:
            pages[page_name] = Visit(browser_context, site_url, page_name)
        return pages[page_name]

    yield open_page
    for v in pages.values():
        v.close()


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
            f"{page_name}: the alt text of {src} should say what the picture shows and its key number: {alt!r}"
        )


# axe's colour rules cost most of its time (5 to 8 s a chapter, idle, before sampling): a code block is hundreds
# of highlighted tokens, and most of a page's text looks like the text of the pages before it. The contrast of a
# piece of text depends only on its own style (colour, size, weight, shadow, the opacity of it and its ancestors)
# and on the background behind it, so the colour rules are run on one sample of each look of text, and only on
# the first page (in the book's order) where that look appears; every other rule runs on every element of every
# page. A look is the text's style and the backgrounds up to the first opaque one (and, for a link, the colour of
# the text around it, which link-in-text-block compares). Dark mode is the same page switched by the theme's own
# mode switch (the markup is the same), checked with the colour rules only, then switched back.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]
SAMPLE = "data-axe-sample"
MARK_SAMPLES = f"""(seen) => {{
    const known = new Set(seen), fresh = [];
    document.querySelectorAll('[{SAMPLE}]').forEach(e => e.removeAttribute('{SAMPLE}'));
    const texts = Array.from(document.body.querySelectorAll('*')).filter(e =>
        Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim()) && e.getClientRects().length);
    for (const text of texts) {{
        const style = getComputedStyle(text);
        if (style.visibility !== 'visible') continue;
        let opacity = 1;
        for (let e = text; e; e = e.parentElement) opacity *= Number(getComputedStyle(e).opacity);
        const look = [style.color, style.fontSize, style.fontWeight, style.textShadow, opacity];
        for (let e = text; e; e = e.parentElement) {{  // the backgrounds up to the first opaque one
            const s = getComputedStyle(e);
            look.push(s.backgroundColor, s.backgroundImage);
            if (s.backgroundImage !== 'none' || !s.backgroundColor.startsWith('rgba') || s.backgroundColor.endsWith(', 1)')) break;
        }}
        if (text.closest('a') && text.closest('a').parentElement) look.push(getComputedStyle(text.closest('a').parentElement).color);
        const key = look.join('|');
        if (!known.has(key)) {{ known.add(key); fresh.push(key); text.setAttribute('{SAMPLE}', ''); }}
    }}
    return [texts.length, fresh];
}}"""


def switch_mode(page, mode):
    """Turn the page to `mode` with the theme's own switch button (it cycles light, auto and dark)."""
    for _ in range(3):
        if page.evaluate("document.documentElement.dataset.theme") == mode:
            break
        page.evaluate("document.querySelector('.theme-switch-button').click()")
    assert page.evaluate("document.documentElement.dataset.theme") == mode, f"the switch never gave {mode}"
    # the theme fades its colours in: axe must see the end of the fade, not a colour halfway
    page.wait_for_function("() => document.getAnimations().every(a => a.playState !== 'running')", polling=50)


def start_axe(page, mode, seen):
    """Start axe-core on the page and return at once, so that pages are checked side by side (each has its own
    renderer process): the colour rules on the samples of looks not in `seen` (which gains them), and in light
    mode every other rule on the whole page. Returns (pieces of text, new looks)."""
    from axe_playwright_python.base import AXE_SCRIPT

    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(AXE_SCRIPT)
    texts, fresh = page.evaluate(MARK_SAMPLES, sorted(seen))
    seen.update(fresh)
    runs = []
    if fresh:
        runs.append(({"include": [[f"[{SAMPLE}]"]]}, {"runOnly": {"type": "rule", "values": COLOUR_RULES}}))
    if mode == "light":
        runs.append(({"include": [["body"]]}, {"rules": {rule: {"enabled": False} for rule in COLOUR_RULES}}))
    # axe.run does most of its work before it returns its promise: started from a timer, it leaves
    # `evaluate` free to return at once
    page.evaluate(
        """(runs) => {
        window.__axe = null;
        setTimeout(async () => {
            try {
                const found = [];
                for (const [context, options] of runs) found.push(...(await axe.run(context, options)).violations);
                window.__axe = {found};
            } catch (error) {
                window.__axe = {error: String(error)};
            }
        }, 0);
    }""",
        [[context, {**options, "resultTypes": ["violations"]}] for context, options in runs],
    )
    return texts, len(fresh)


def axe_result(page):
    """The violations found by the axe runs that `start_axe` began on the page, once they end."""
    page.wait_for_function("() => window.__axe", polling=100, timeout=180_000)  # polled: no animation frames needed
    return _found(page.evaluate("window.__axe"))


def _found(result):
    assert "error" not in result, f"axe failed: {result.get('error')}"
    return result["found"]


def axe_violations(page, mode, seen=None):
    texts, fresh = start_axe(page, mode, set() if seen is None else seen)
    return axe_result(page), texts, fresh


@pytest.fixture(scope="module")
def axe_on_every_page(opened):
    """{(page, mode): (the theme the page showed, axe's violations, (pieces of text, new looks checked))} for every page in both
    modes, one page per CPU at a time, in the book's order: each page (the shared light load) is checked light,
    switched dark and checked, then switched back."""
    results, running, seen = {}, [], {"light": set(), "dark": set()}
    deadline = time.monotonic() + 600
    todo = list(PAGES)

    def start(page_name, mode):
        v = opened(page_name)
        if mode == "dark":
            switch_mode(v.page, "dark")
        theme = v.page.evaluate("document.documentElement.dataset.theme")
        texts, fresh = start_axe(v.page, mode, seen[mode])
        running.append(((page_name, mode), v, theme, (texts, fresh)))

    def finish_one():
        """Wait for whichever running check ends first, keep its result, start what follows it."""
        while time.monotonic() < deadline:
            for i, ((page_name, mode), v, theme, fresh) in enumerate(running):
                result = v.page.evaluate("window.__axe")
                if result:
                    del running[i]
                    results[page_name, mode] = theme, _found(result), fresh
                    if mode == "light":
                        start(page_name, "dark")
                    else:
                        switch_mode(v.page, "light")
                    return
            time.sleep(0.05)
        raise AssertionError(f"axe did not finish within 600 s on {[key for key, *_ in running]}")

    while todo or running:
        while todo and len(running) < (os.cpu_count() or 1):
            start(todo.pop(0), "light")
        finish_one()
    return results


@pytest.mark.parametrize("mode", ["light", "dark"])
@pytest.mark.parametrize("page_name", PAGES)
def test_no_serious_accessibility_violation(axe_on_every_page, page_name, mode):
    theme, found, _ = axe_on_every_page[page_name, mode]
    assert theme == mode
    violations = [x for x in found if x["impact"] in ("critical", "serious")]
    report = [
        f"{x['id']} ({x['impact']}): {x['help']}; e.g. {x['nodes'][0]['target']} ({len(x['nodes'])} elements)"
        for x in violations
    ]
    assert not report, f"{page_name} in {mode} mode:\n" + "\n".join(report)


def test_every_look_of_text_is_checked_once_in_each_mode(axe_on_every_page):
    """Each look of text has its colours checked on one page: many looks in all, far fewer than pieces of text."""
    for mode in ("light", "dark"):
        counts = [axe_on_every_page[page, mode][2] for page in PAGES]
        texts, fresh = sum(t for t, _ in counts), sum(f for _, f in counts)
        assert 20 <= fresh < texts / 4, f"{mode}: {fresh} looks checked of {texts} pieces of text: {counts}"


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_sampled_contrast_still_finds_a_faint_look(visit, mode):
    """The samples hide only text alike to text axe checks: a faint token written twice among ordinary ones in a
    code block, a faint block of plain output and a faint word in a paragraph, on a page whose other looks are all
    known, are each reported once, in both modes."""
    v = visit(PAGES[0], mode)
    seen = set()
    axe_violations(v.page, mode, seen)  # every look of the page, now known
    v.page.evaluate("""() => {
        const ordinary = '<span class="n">x</span> <span class="o">=</span> <span class="mi">1</span> ';
        const faint = '<span style="color: #777">faint</span> ';
        document.querySelector('article').insertAdjacentHTML('beforeend',
            '<div class="highlight"><pre>' + ordinary + faint + ordinary + faint + ordinary + '</pre></div>'
            + '<div class="output"><pre style="color: #777">faint output</pre></div>'
            + '<p>plain text and a <span style="color: #777">faint word</span></p>');
    }""")
    found, texts, fresh = axe_violations(v.page, mode, seen)
    faint = [n["html"] for x in found if x["id"] == "color-contrast" for n in x["nodes"]]
    assert fresh < texts and len(faint) == 3, f"{mode}: {fresh} new looks of {texts} texts; reported: {faint}"


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
        seen.append(re.sub(r"\.html(#.*)?$", "", url[len(v.base) :]))
    return seen


def test_next_and_previous_links_walk_the_book_in_order(opened):
    assert _walk(opened, PAGES[0], "a.right-next") == PAGES, "the next links do not follow _toc.yml"
    assert _walk(opened, PAGES[-1], "a.left-prev") == PAGES[::-1], "the previous links do not follow _toc.yml backwards"


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
