"""Every page of the website passes axe-core, in light and in dark mode: no critical or serious accessibility
violation (Debian's chromium, headless, driven by Playwright; the pages as test_browser.py opens them).

axe checks every page in both modes once, one page per CPU at a time (each page has its own renderer
process), before the first accessibility test reports: the light pages are loaded once for the file (the
`opened` fixture), the dark ones are opened for the check and closed after it.
"""
import os
import time

import pytest

import built_site
from browser_pages import Visit

PAGES = built_site.toc_pages()


# A code block is hundreds of highlighted tokens (two thirds of a chapter's elements, 4,000 in chapter 1), and
# axe's colour-contrast rule spent most of its time on them (5 to 8 s a chapter, idle). A token's contrast depends only on its
# colour, size and weight and on the background behind it, so the contrast of code is checked on one sample of
# each kind of token on the page (chapter 1: 7 kinds), the other rules on every code block, and everything
# outside code in full. The markup is the same in both colour modes, so dark mode runs the colour rules only.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]
SAMPLE = "data-axe-sample"
MARK_CODE_SAMPLES = f"""() => {{
    const seen = new Set();
    const tokens = Array.from(document.querySelectorAll('pre span, pre'))
        .filter(e => e.tagName === 'SPAN' || e.childElementCount === 0);  // a token, or a block of plain text
    for (const token of tokens) {{
        const style = getComputedStyle(token);
        const key = [style.color, style.fontSize, style.fontWeight, style.opacity];
        for (let e = token; e; e = e.parentElement) {{  // the backgrounds up to the first opaque one
            const background = getComputedStyle(e).backgroundColor;
            key.push(background);
            if (!background.startsWith('rgba') || background.endsWith(', 1)')) break;
        }}
        if (!seen.has(key.join('|'))) {{ seen.add(key.join('|')); token.setAttribute('{SAMPLE}', ''); }}
    }}
    return [tokens.length, seen.size];
}}"""


def start_axe(page, mode):
    """Start axe-core on the page and return at once, so that pages are checked side by side (each has its own
    renderer process): every rule outside code blocks and on the sample tokens, every rule but colour contrast
    on the code blocks; in dark mode the colour rules only. Each axe run costs about a second of setup on a
    chapter, whatever its context, hence two runs, not one per part. Returns (tokens, kinds of token)."""
    from axe_playwright_python.base import AXE_SCRIPT

    page.evaluate(AXE_SCRIPT)
    tokens, kinds = page.evaluate(MARK_CODE_SAMPLES)
    # the deeper of an include and an exclude wins: the samples are checked, the rest of each <pre> is not
    outside_code = {"include": [["body"], [f"[{SAMPLE}]"]], "exclude": [["pre"]]}
    runs = [(outside_code, {"runOnly": {"type": "rule", "values": COLOUR_RULES}} if mode == "dark" else {})]
    if mode == "light" and page.query_selector("pre"):
        runs.append(({"include": [["pre"]]}, {"rules": {"color-contrast": {"enabled": False}}}))
    # axe.run does most of its work before it returns its promise: started from a timer, it leaves
    # `evaluate` free to return at once
    page.evaluate("""(runs) => {
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
    }""", [[context, {**options, "resultTypes": ["violations"]}] for context, options in runs])
    return tokens, kinds


def axe_result(page):
    """The violations found by the axe runs that `start_axe` began on the page, once they end."""
    page.wait_for_function("() => window.__axe", polling=100, timeout=180_000)  # polled: no animation frames needed
    return _found(page.evaluate("window.__axe"))


def _found(result):
    assert "error" not in result, f"axe failed: {result.get('error')}"
    return result["found"]


def axe_violations(page, mode):
    tokens, kinds = start_axe(page, mode)
    return axe_result(page), tokens, kinds


@pytest.fixture(scope="module")
def axe_on_every_page(opened, browser_context, site_url):
    """{(page, mode): (the theme the page shows, axe's violations)} for every page in both modes, one page per
    CPU at a time: the light pages are the shared loads, the dark ones are opened here and closed once checked."""
    results, running = {}, []
    deadline = time.monotonic() + 600

    def finish_one():
        """Wait for whichever running check ends first, and keep its result."""
        while time.monotonic() < deadline:
            for i, ((page_name, mode), v, theme) in enumerate(running):
                result = v.page.evaluate("window.__axe")
                if result:
                    del running[i]
                    results[page_name, mode] = theme, _found(result)
                    if mode == "dark":
                        v.close()
                    return
            time.sleep(0.1)
        raise AssertionError(f"axe did not finish within 600 s on {[key for key, _, _ in running]}")

    for page_name in PAGES:
        for mode in ("light", "dark"):
            v = opened(page_name) if mode == "light" else Visit(browser_context, site_url, page_name, mode)
            theme = v.page.evaluate("document.documentElement.dataset.theme")
            start_axe(v.page, mode)
            running.append(((page_name, mode), v, theme))
            if len(running) >= (os.cpu_count() or 1):
                finish_one()
    while running:
        finish_one()
    return results


@pytest.mark.parametrize("mode", ["light", "dark"])
@pytest.mark.parametrize("page_name", PAGES)
def test_no_serious_accessibility_violation(axe_on_every_page, page_name, mode):
    theme, found = axe_on_every_page[page_name, mode]
    assert theme == mode
    violations = [x for x in found if x["impact"] in ("critical", "serious")]
    report = [f"{x['id']} ({x['impact']}): {x['help']}; e.g. {x['nodes'][0]['target']} "
              f"({len(x['nodes'])} elements)" for x in violations]
    assert not report, f"{page_name} in {mode} mode:\n" + "\n".join(report)


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_sampled_code_contrast_still_finds_a_faint_token(visit, mode):
    """The sample hides only tokens alike to one axe checks: a faint token, written twice among ordinary ones in a
    code block, and a faint block of plain text are each reported once, in both modes."""
    v = visit(PAGES[0], mode)
    v.page.evaluate("""() => {
        const ordinary = '<span class="n">x</span> <span class="o">=</span> <span class="mi">1</span> ';
        const faint = '<span style="color: #777">faint</span> ';
        document.querySelector('article').insertAdjacentHTML('beforeend',
            '<div class="highlight"><pre>' + ordinary + faint + ordinary + faint + ordinary + '</pre></div>'
            + '<div class="output"><pre style="color: #777">faint output</pre></div>');
    }""")
    found, tokens, kinds = axe_violations(v.page, mode)
    faint = [n["html"] for x in found if x["id"] == "color-contrast" for n in x["nodes"]]
    assert kinds < tokens and len(faint) == 2, f"{mode}: {kinds} kinds of {tokens} tokens; reported: {faint}"
