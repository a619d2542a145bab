r"""The website works in a real browser (Debian's chromium, headless, driven by Playwright).

On every page of _toc.yml: it loads with no console error; every image has loaded and has alt text, and
a chapter shows one loaded figure per figure cell, each with a caption and an alt text that states a number; axe-core
finds no critical or serious accessibility violation, in light and in dark mode. Across pages: the
next/previous links walk the book in the order of _toc.yml; the search page finds "cache" in the
key-value-cache chapter; each notebook page's Binder button opens that page's file in JupyterLab; the
recap quiz hides its answers until clicked. A screenshot of the first screen of each page goes to
_build/screenshots/.

Each page is opened once, in light mode, and read once (the `loaded` fixture): its images, links, formulas and
first screen, then axe in light mode and, switched dark by the theme's own switch, in dark mode, then what it
logged from its load to the end of both checks; every test that only reads a page reads that record. The pages
are opened one after another in one tab per CPU (a navigation costs about half the CPU of a new tab, whose
renderer starts cold), checked side by side (each tab has its own renderer process), all before the first
test reports. The tests that click or type (the colour switch, search, the quiz, the faint-look check) open
their own page in one spare tab.

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
    """A browser tab that pages are opened in, one after another (a navigation costs about half the CPU of a new
    tab, whose renderer starts cold), with what the open page logged and every request it tried outside
    localhost. Every page opens in light mode."""

    def __init__(self, context, base):
        self.page = context.new_page()
        self.errors, self.external = [], []
        self.page.add_init_script("localStorage.setItem('mode', 'light'); localStorage.setItem('theme', 'light');")
        self.axe_done = False  # set when the page logs AXE_DONE: the axe runs `start_axe` began have ended
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append((f"uncaught: {e}", "")))
        # recorded, not intercepted: routing every request of the page through Python made each page load take
        # seconds; the context's route already aborts whatever is not on localhost
        self.page.on("request", self._record)
        self.base = base

    def open(self, page_name, query=""):
        self.errors.clear()
        self.external.clear()
        self.page.goto(urljoin(self.base, f"{page_name}.html{query}"), wait_until="load")
        return self

    def _console(self, message):
        if message.type == "error":
            self.errors.append((message.text, message.location.get("url", "")))
        elif message.text == AXE_DONE:
            self.axe_done = True

    def _record(self, request):
        url = request.url
        if url.startswith(("http:", "https:", "ws:", "wss:", "ftp:")) and not url.startswith(self.base):
            self.external.append(url)

    def console_errors(self):
        # the browser's own request for /favicon.ico after a load (the site declares no icon) is not the page's
        return [text for text, url in self.errors if url != urljoin(self.base, "favicon.ico")]

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


@pytest.fixture(scope="module")
def spare_tab(browser_context, site_url):
    """One tab for the tests that click or navigate, each opening its own page in it."""
    v = Visit(browser_context, site_url)
    yield v
    v.close()


@pytest.fixture
def visit(spare_tab):
    """Open a page in the spare tab, for a test that clicks or navigates."""
    return spare_tab.open


def figure_cells(page_name):
    nb = jupytext.read(built_site.source_of(page_name))
    return [c for c in nb.cells if c.cell_type == "code" and "figure" in c.metadata.get("mystnb", {})]


RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{")
READ_PAGE = """() => {
    const article = document.querySelector('article').cloneNode(true);
    article.querySelectorAll('pre, code, script, mjx-assistive-mml').forEach(e => e.remove());
    const href = selector => document.querySelector(selector)?.getAttribute('href') ?? null;
    return {
        uncaptioned: Array.from(document.querySelectorAll('article figure'))
            .filter(f => !(f.querySelector('figcaption')?.innerText || '').trim()).length,
        next: href('a.right-next'),
        previous: href('a.left-prev'),
        // the launch button in the page header; {binder} links in the text (to exercises) are checked in test_links.py
        launch: Array.from(document.querySelectorAll("a[href*='/v2/gh/']:not(.binder-link)")).map(a => a.getAttribute('href')),
        untypeset: Array.from(document.querySelectorAll('article .math'))
            .filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.trim().slice(0, 80)),
        mathjax_errors: Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]'))
            .map(e => e.getAttribute('data-mjx-error') || e.textContent),
        text: article.textContent,
        mathjax: window.MathJax?.version || null,
    };
}"""


def read_page(v, page_name):
    """What the tests that only read a page need of it, read once it has loaded and its formulas are typeset; its
    first screen goes to _build/screenshots/."""
    formulas = v.page.locator("article .math").count()  # Sphinx puts each formula in a .math element
    started = True
    if formulas:
        try:
            v.page.wait_for_function("window.MathJax?.startup?.promise", timeout=20_000)
            v.page.evaluate("MathJax.startup.promise")
        except Exception:
            started = False
    shots = built_site.HTML.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    v.page.screenshot(path=shots / f"{page_name.replace('/', '__')}.png")  # the first screen; the whole page took 2-4 s
    return {"formulas": formulas, "mathjax_started": started, "images": v.images(), **v.page.evaluate(READ_PAGE)}


@pytest.fixture(scope="module")
def tabs(browser_context, site_url):
    """One tab per CPU (at most one a page), for `loaded`."""
    opened = [Visit(browser_context, site_url) for _ in range(min(os.cpu_count() or 1, len(PAGES)))]
    yield opened
    for v in opened:
        v.close()


@pytest.fixture(scope="module")
def loaded(tabs):
    """{page: what it showed} for every page of the book, each opened once, in light mode: its images, links and
    formulas (`read_page`), then axe's violations in light mode and, switched dark by the theme's own switch, in
    dark mode ({mode: (the theme the page showed, violations, (pieces of text, new looks checked))}), then its
    console errors and requests outside the site, from its load to the end of both checks. One tab per CPU, each
    taking the next page in the book's order once its page is checked, so that pages are checked side by side
    (each tab has its own renderer process) and a look of text is first met on the first page that has it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # here: the browser fixture found it

    pages, running, seen = {}, [], {"light": set(), "dark": set()}
    context = tabs[0].page.context
    deadline = time.monotonic() + 600
    todo = list(PAGES)

    def start(v, page_name, mode):
        if mode == "light":
            v.open(page_name)
            pages[page_name] = {**read_page(v, page_name), "axe": {}}
        else:
            switch_mode(v.page, "dark")
        theme = v.page.evaluate("document.documentElement.dataset.theme")
        v.axe_done = False
        texts, fresh = start_axe(v.page, mode, seen[mode])
        running.append(((page_name, mode), v, theme, (texts, fresh)))

    def finish_one():
        """Wait for whichever running check ends first, keep its result, start what follows it. Waited for by the
        message each tab logs when its check ends, not by asking each tab again and again (the asking cost the
        renderers about a tenth of a core each)."""
        while time.monotonic() < deadline:
            for i, ((page_name, mode), v, theme, fresh) in enumerate(running):
                if v.axe_done:
                    v.axe_done = False
                    result = v.page.evaluate("window.__axe")
                    del running[i]
                    pages[page_name]["axe"][mode] = theme, _found(result), fresh
                    if mode == "light":
                        start(v, page_name, "dark")
                    else:
                        pages[page_name].update(errors=v.console_errors(), external=v.unexpected_requests())
                        if todo:
                            start(v, todo.pop(0), "light")
                    return
            try:  # a message logged before this wait began has set its tab's flag already
                context.wait_for_event("console", predicate=lambda m: m.text == AXE_DONE, timeout=1000)
            except PlaywrightTimeout:
                pass
        raise AssertionError(f"axe did not finish within 600 s on {[key for key, *_ in running]}")

    for v in tabs:
        start(v, todo.pop(0), "light")
    while running:
        finish_one()
    return pages


@pytest.mark.parametrize("page_name", PAGES)
def test_page_loads_with_its_figures(loaded, page_name):
    shown = loaded[page_name]
    images = shown["images"]
    assert not shown["errors"], f"{page_name}: console errors: {shown['errors']}"
    assert not shown["external"], f"{page_name}: requests outside the site: {shown['external']}"
    broken = [src for src, width, _, _ in images if not width]
    assert not broken, f"{page_name}: images that did not load: {broken}"
    no_alt = [src for src, _, alt, _ in images if not (alt or "").strip()]
    assert not no_alt, f"{page_name}: images without alt text: {no_alt}"
    figures = [(src, alt) for src, _, alt, in_figure in images if in_figure]
    if built_site.is_notebook(page_name):
        expected = len(figure_cells(page_name))
        assert len(figures) == expected, f"{page_name}: {expected} figure cells, {len(figures)} figures shown"
    assert not shown["uncaptioned"], f"{page_name}: {shown['uncaptioned']} figures without a caption"
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
# mode switch (the markup is the same), checked with the colour rules only; its tab then opens the next page.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]
AXE_DONE = "axe check done"  # what a page logs when the axe runs started on it end
SAMPLE = "data-axe-sample"
MARK_SAMPLES = f"""(seen) => {{
    const known = new Set(seen), fresh = [];
    document.querySelectorAll('[{SAMPLE}]').forEach(e => e.removeAttribute('{SAMPLE}'));
    const texts = Array.from(document.body.querySelectorAll('*')).filter(e =>
        Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim()) && e.getClientRects().length);
    // each element's style, opacity (its own times its ancestors') and backgrounds (its own and its ancestors' up
    // to the first opaque one) worked out once, not once for every piece of text inside it
    const styles = new Map(), opacities = new Map(), backgrounds = new Map();
    const style = e => styles.get(e) || styles.set(e, getComputedStyle(e)).get(e);
    const opacity = e => {{
        if (!e) return 1;
        if (!opacities.has(e)) opacities.set(e, Number(style(e).opacity) * opacity(e.parentElement));
        return opacities.get(e);
    }};
    const behind = e => {{
        if (!e) return '';
        if (!backgrounds.has(e)) {{
            const s = style(e), opaque = s.backgroundImage !== 'none' || !s.backgroundColor.startsWith('rgba')
                || s.backgroundColor.endsWith(', 1)');
            backgrounds.set(e, s.backgroundColor + '|' + s.backgroundImage + (opaque ? '' : '|' + behind(e.parentElement)));
        }}
        return backgrounds.get(e);
    }};
    for (const text of texts) {{
        const s = style(text);
        if (s.visibility !== 'visible') continue;
        const look = [s.color, s.fontSize, s.fontWeight, s.textShadow, opacity(text), behind(text)];
        const link = text.closest('a');
        if (link && link.parentElement) look.push(style(link.parentElement).color);
        const key = look.join('|');
        if (!known.has(key)) {{ known.add(key); fresh.push(key); text.setAttribute('{SAMPLE}', ''); }}
    }}
    return [texts.length, fresh];
}}"""


# the colour rules look only at the samples and what is inside them (as a context of the samples would), so that
# one axe run a mode checks a page: axe builds its tree of the whole page once a run
COLOURS_ON_SAMPLES = f"""() => {{
    const only = {{
        'color-contrast': '[{SAMPLE}], [{SAMPLE}] *',
        'link-in-text-block': 'a[href][{SAMPLE}], [{SAMPLE}] a[href], [role=link][{SAMPLE}], [{SAMPLE}] [role=link]',
    }};
    for (const rule of axe._audit.rules) if (rule.id in only) rule.selector = only[rule.id];
}}"""
LOW_IMPACT_RULES = """() => {
    const low = ['minor', 'moderate'], checks = axe._audit.data.checks;
    return axe._audit.rules.filter(rule => low.includes(rule.impact)
        && [...rule.any, ...rule.all, ...rule.none].every(check => low.includes(checks[check.id || check]?.impact)))
        .map(rule => rule.id);
}"""


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
    renderer process), in one run: the colour rules on the samples of looks not in `seen` (which gains them), and
    in light mode every other rule on the whole page (mode "colours": the colour rules alone). Returns (pieces of
    text, new looks)."""
    from axe_playwright_python.base import AXE_SCRIPT

    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(AXE_SCRIPT)
        page.evaluate(COLOURS_ON_SAMPLES)
    texts, fresh = page.evaluate(MARK_SAMPLES, sorted(seen))
    seen.update(fresh)
    colours = {rule: {"enabled": bool(fresh)} for rule in COLOUR_RULES}
    runs = []
    if mode == "light":
        # the test fails on critical and serious violations only: a rule whose checks all report a minor or moderate
        # impact (region, the landmark rules, heading-order...) cannot fail it, and is left out
        low = page.evaluate(LOW_IMPACT_RULES)
        runs.append(({"include": [["body"]]}, {"rules": {**colours, **{rule: {"enabled": False} for rule in low}}}))
    elif fresh:
        runs.append(({"include": [["body"]]}, {"runOnly": {"type": "rule", "values": COLOUR_RULES}}))
    # axe.run does most of its work before it returns its promise: started from a timer, it leaves
    # `evaluate` free to return at once
    page.evaluate(
        """([runs, done]) => {
        window.__axe = null;
        setTimeout(async () => {
            try {
                const found = [];
                for (const [context, options] of runs) found.push(...(await axe.run(context, options)).violations);
                window.__axe = {found};
            } catch (error) {
                window.__axe = {error: String(error)};
            }
            console.debug(done);
        }, 0);
    }""",
        [[[context, {**options, "resultTypes": ["violations"]}] for context, options in runs], AXE_DONE],
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


@pytest.mark.parametrize("mode", ["light", "dark"])
@pytest.mark.parametrize("page_name", PAGES)
def test_no_serious_accessibility_violation(loaded, page_name, mode):
    theme, found, _ = loaded[page_name]["axe"][mode]
    assert theme == mode
    violations = [x for x in found if x["impact"] in ("critical", "serious")]
    report = [
        f"{x['id']} ({x['impact']}): {x['help']}; e.g. {x['nodes'][0]['target']} ({len(x['nodes'])} elements)"
        for x in violations
    ]
    assert not report, f"{page_name} in {mode} mode:\n" + "\n".join(report)


def test_every_look_of_text_is_checked_once_in_each_mode(loaded):
    """Each look of text has its colours checked on one page: many looks in all, far fewer than pieces of text."""
    for mode in ("light", "dark"):
        counts = [loaded[page]["axe"][mode][2] for page in PAGES]
        texts, fresh = sum(t for t, _ in counts), sum(f for _, f in counts)
        assert 20 <= fresh < texts / 4, f"{mode}: {fresh} looks checked of {texts} pieces of text: {counts}"


FAINT = """(on) => {
    document.querySelectorAll('.faint-test').forEach(e => e.remove());
    if (!on) return;
    const ordinary = '<span class="n">x</span> <span class="o">=</span> <span class="mi">1</span> ';
    const faint = '<span style="color: #777">faint</span> ';
    document.querySelector('article').insertAdjacentHTML('beforeend',
        '<div class="highlight faint-test"><pre>' + ordinary + faint + ordinary + faint + ordinary + '</pre></div>'
        + '<div class="output faint-test"><pre style="color: #777">faint output</pre></div>'
        + '<p class="faint-test">plain text and a <span style="color: #777">faint word</span></p>');
}"""


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_sampled_contrast_still_finds_a_faint_look(spare_tab, mode):
    """The samples hide only text alike to text axe checks: a faint token written twice among ordinary ones in a
    code block, a faint block of plain output and a faint word in a paragraph, on a page whose other looks are all
    known, are each reported once, in both modes (one load, switched by the theme's switch)."""
    if not spare_tab.page.url.endswith(f"/{PAGES[0]}.html"):  # the light case opened it already
        spare_tab.open(PAGES[0])
    page = spare_tab.page
    page.evaluate(FAINT, False)
    switch_mode(page, mode)
    seen = set()
    axe_violations(page, "colours", seen)  # every look of the page, now known
    page.evaluate(FAINT, True)
    found, texts, fresh = axe_violations(page, "colours", seen)
    faint = [n["html"] for x in found if x["id"] == "color-contrast" for n in x["nodes"]]
    assert fresh < texts and len(faint) == 3, f"{mode}: {fresh} new looks of {texts} texts; reported: {faint}"


def _walk(loaded, first, link):
    """Follow one kind of link (next or previous) from page `first` to the end; return the pages seen."""
    seen = [first]
    while len(seen) <= len(PAGES) and seen[-1] in loaded:
        href = loaded[seen[-1]][link]
        if href is None:
            break
        base = "http://site/"
        url = urljoin(urljoin(base, f"{seen[-1]}.html"), href)
        assert url.startswith(base), f"{seen[-1]}: the {link} link leaves the site: {url}"
        seen.append(re.sub(r"\.html(#.*)?$", "", url[len(base) :]))
    return seen


def test_next_and_previous_links_walk_the_book_in_order(loaded):
    assert _walk(loaded, PAGES[0], "next") == PAGES, "the next links do not follow _toc.yml"
    assert _walk(loaded, PAGES[-1], "previous") == PAGES[::-1], "the previous links do not follow _toc.yml backwards"


def test_colour_mode_switch_turns_the_page_dark(visit):
    v = visit(PAGES[0])
    button = v.page.locator(".theme-switch-button").first
    themes = []
    for _ in range(3):  # light -> dark -> auto (follows the system, light here)
        button.click()
        themes.append(v.page.evaluate("document.documentElement.dataset.theme"))
    assert "dark" in themes, f"the colour-mode button never made the page dark: {themes}"


def test_search_finds_cache_in_the_kv_cache_chapter(visit):
    expected = KV_CACHE if KV_CACHE in PAGES else "glossary"  # before chapter 4 exists, the glossary defines it
    v = visit("search", "?q=cache")
    v.page.wait_for_selector("ul.search li a", timeout=15_000)
    hits = [re.sub(r"\.html.*$", "", a.get_attribute("href")) for a in v.page.query_selector_all("ul.search li a")]
    assert expected in hits, f"searching 'cache' did not find {expected}: {hits}"
    assert not v.console_errors(), v.console_errors()


@pytest.mark.parametrize("page_name", NOTEBOOKS)
def test_launch_button_opens_this_file_on_binder(loaded, page_name):
    cfg = built_site.config()
    source = built_site.source_of(page_name).relative_to(built_site.ROOT)
    expected = built_site.binder_url(source.as_posix())  # the theme's launch button must agree with our {binder} role
    links = loaded[page_name]["launch"]
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


@pytest.mark.parametrize("page_name", PAGES)
def test_formulas_render_with_no_network(loaded, page_name):
    """Every formula of the page is typeset by the site's own MathJax, with the network closed."""
    state = loaded[page_name]
    if not state["mathjax_started"]:
        pytest.fail(f"{page_name}: MathJax never started; requests outside the site: {state['external']}")
    assert not state["external"], f"{page_name}: requests outside the site: {state['external']}"
    assert not state["untypeset"], f"{page_name}: formulas left as TeX: {state['untypeset'][:5]}"
    assert not state["mathjax_errors"], f"{page_name}: MathJax errors: {state['mathjax_errors'][:5]}"
    raw = sorted({m.group() for m in RAW_TEX.finditer(state["text"])})
    assert not raw, f"{page_name}: raw TeX delimiters in the text: {raw}"
    if state["formulas"]:
        assert state["mathjax"].startswith("3."), f"{page_name}: MathJax {state['mathjax']}, expected 3.x"
