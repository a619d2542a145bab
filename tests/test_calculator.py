"""Chapter 10's calculator in the page answers as the command line does, offline, in Chromium.

The form on the page runs `book/card.py` itself, by Pyodide, in the browser (_ext/calculator.py, _static/calculator.js).
For a grid of inputs (every catalogue model, contexts from 1 token to the trained window, 4-, 8- and 16-bit
weights and caches, 1, 2 and 8 chips, your own numbers, and bad input) the test fills the form, presses
Answer, and compares what the page prints with what `python -m book.card` prints for the same arguments,
character for character. It also checks that the page says it is loading while it loads (Python is fetched
only when the form comes into view), and says in words
why it cannot start when its files are missing. The network is closed (tests/conftest.py's browser context).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urljoin

import pytest

from book.card import CATALOGUE

PAGE = "chapters/10_model_card.html"
READY = "#card-calculator[data-ready]"
LOAD_TIMEOUT_MS = 240_000  # Pyodide's core compiles in a few seconds on a quiet machine; far longer on a loaded one


def command_line(arguments):
    """What `python -m book.card` prints for each argument list: (status, stdout, stderr), one process for all."""
    script = (
        "import contextlib, io, json, runpy, sys\n"
        "out = []\n"
        "for argv in json.load(sys.stdin):\n"
        "    o, e = io.StringIO(), io.StringIO()\n"
        "    sys.argv = ['book.card'] + argv\n"
        "    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):\n"
        "        try:\n"
        "            runpy.run_module('book.card', run_name='__main__', alter_sys=True)\n"
        "            status = 0\n"
        "        except SystemExit as stop:\n"
        "            status = stop.code or 0\n"
        "    out.append([status, o.getvalue(), e.getvalue()])\n"
        "print(json.dumps(out))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(arguments),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def calculator(browser_context, site_url, record_property=None):
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    started = time.monotonic()
    page.bring_to_front()  # a page behind others gets no animation frames: no scroll observer, no raf polling
    # every text the status line shows, in order (a cached Pyodide may load between two polls)
    page.add_init_script("""window.__said = [];
        new MutationObserver(() => {
            const s = document.getElementById('calc-status');
            if (s && window.__said[window.__said.length - 1] !== s.textContent) window.__said.push(s.textContent);
        }).observe(document, {subtree: true, childList: true, characterData: true});""")
    page.goto(urljoin(site_url, PAGE), wait_until="load")
    waiting = page.text_content("#card-calculator")  # Python is fetched only when the form comes into view
    page.locator("#card-calculator").scroll_into_view_if_needed()
    page.wait_for_selector(READY, timeout=LOAD_TIMEOUT_MS)
    loading = " | ".join(page.evaluate("() => window.__said"))
    seconds = time.monotonic() - started
    root = page.locator("#card-calculator")
    page.calculator_times = {
        "loaded_ms": int(root.get_attribute("data-loaded-ms")),
        "answered_ms": int(root.get_attribute("data-answered-ms")),
        "wall_s": seconds,
    }
    page.calculator_waiting, page.calculator_loading, page.calculator_errors = waiting, loading, errors
    print(
        f"calculator: Python loaded in {page.calculator_times['loaded_ms']} ms, first answer at "
        f"{page.calculator_times['answered_ms']} ms, page to ready {seconds:.1f} s"
    )
    if os.environ.get("BOOK_BENCH_TIMINGS"):  # make bench reads the load and the first answer from here
        loaded = page.calculator_times["loaded_ms"] / 1000
        Path(os.environ["BOOK_BENCH_TIMINGS"]).write_text(
            json.dumps(
                {"load_s": seconds, "first_answer_s": max(0.0, page.calculator_times["answered_ms"] / 1000 - loaded)}
            )
        )
    yield page
    page.close()


FIELDS = ["context", "batch", "weight-bits", "cache-bits", "memory", "bandwidth", "flops", "chips", "link"]
DEFAULTS = {
    "context": "8192",
    "batch": "",
    "weight-bits": "16",
    "cache-bits": "16",
    "memory": "80GiB",
    "bandwidth": "3.35TB/s",
    "flops": "989T",
    "chips": "1",
    "link": "450GB/s",
}


def ask(page, model, **values):
    """Fill the form (fields not named keep the defaults above), press Answer; the page's argv and output."""
    page.select_option("#calc-model", model)
    for name in FIELDS:
        key = name.replace("-", "_")
        if key in values or name in DEFAULTS:
            page.fill(f"#calc-{name}", str(values.get(key, DEFAULTS.get(name, ""))))
    for key, value in values.get("card", {}).items():
        page.fill(f"#calc-{key}", str(value))
    page.evaluate("() => { document.getElementById('calc-output').dataset.argv = ''; }")
    page.click("#calc-answer")
    page.wait_for_function("() => document.getElementById('calc-output').dataset.argv !== ''", polling=50)
    output = page.locator("#calc-output")
    return (
        json.loads(output.get_attribute("data-argv")),
        int(output.get_attribute("data-status")),
        output.text_content(),
        page.text_content("#calc-status"),
    )


def grid():
    bits = [(4, 16), (8, 8), (16, 16)]
    chips = [1, 2, 8]
    cases = []
    for i, (name, card) in enumerate(CATALOGUE.items()):
        window = card.positions or card.trained_context
        for j, context in enumerate((1, window // 2, window)):
            w, c = bits[(i + j) % 3]
            cases.append((name, dict(context=context, weight_bits=w, cache_bits=c, chips=chips[(i + 2 * j) % 3])))
    cases.append(("mistral-7b", dict(context=128)))  # arithmetic binds: 69,217 tokens/s
    cases.append(("llama-2-70b", dict(context=4096, weight_bits=4, chips=2, batch=8)))
    own = dict(
        n_layers=32,
        d_model=4096,
        n_heads=32,
        n_kv_heads=8,
        d_head=128,
        d_ff=14336,
        vocab=32000,
        n_experts=8,
        experts_per_token=2,
        window=0,
    )
    cases.append(("your own numbers", dict(context=32768, card=own)))  # Mixtral's shape, typed in
    return cases


BAD = [
    ("mistral-7b", dict(context=8192, memory="80")),
    ("mistral-7b", dict(context=8192, bandwidth="0TB/s")),
    ("mistral-7b", dict(context=8192, flops="0")),
    ("mistral-7b", dict(context=8192, memory="1e30GB")),
    ("mistral-7b", dict(context=8192, memory="-80GiB")),
    ("mistral-7b", dict(context="eight")),
    ("mistral-7b", dict(context=8192, chips=0)),
    ("mistral-7b", dict(context=8192, weight_bits=0)),
    ("mistral-7b", dict(context=8192, batch=-3)),
    ("gpt2-small", dict(context=2048)),
    ("your own numbers", dict(context=8192, card=dict(n_heads=32, n_kv_heads=3))),
]


def test_the_page_says_it_is_loading_then_answers(calculator):
    assert "loads Python in your browser when you scroll to it" in calculator.calculator_waiting
    said = calculator.calculator_loading.split(" | ")
    assert [s.split(" ")[0] for s in said[-3:]] == ["The", "Loading", "The"], said  # waiting, loading, answered
    assert calculator.calculator_errors == []
    assert calculator.text_content("#calc-status").startswith("The answer, printed by book/card.py")
    assert "at most 41" in calculator.text_content("#calc-output")  # the lesson's opening answer


def test_the_page_answers_as_the_command_line_does(calculator):
    asked = [(model, values, ask(calculator, model, **values)) for model, values in grid() + BAD]
    expected = command_line([argv for _, _, (argv, *_) in asked])
    for (model, values, (argv, status, text, said)), (cli_status, out, err) in zip(asked, expected):
        assert (model if model in CATALOGUE else "--card") in argv and str(values["context"]) in argv
        assert status == cli_status, (argv, status, cli_status, err)
        assert text == (out if status == 0 else err), argv  # character for character
        if status == 0:
            assert "does not fit" in text or "at most" in text
        else:
            assert said.startswith("That input cannot be used") and text.count("\n") == 1, argv
    assert sum(status == 2 for _, _, (_, status, _, _) in asked) == len(BAD)


def test_a_chip_preset_fills_its_figures(calculator):
    ask(calculator, "llama-2-7b", context=4096)  # every field at its default
    calculator.select_option("#calc-chip", "A100 80GB SXM")
    assert calculator.input_value("#calc-bandwidth") == "2.039TB/s" and calculator.input_value("#calc-flops") == "312T"
    calculator.evaluate("() => { document.getElementById('calc-output').dataset.argv = ''; }")
    calculator.click("#calc-answer")
    calculator.wait_for_function("() => document.getElementById('calc-output').dataset.argv !== ''", polling=50)
    argv = json.loads(calculator.locator("#calc-output").get_attribute("data-argv"))
    ((status, out, _),) = command_line([argv])
    assert status == 0 and "2.04 TB/s, 312 T" in out and calculator.text_content("#calc-output") == out
    calculator.select_option("#calc-chip", "H100 SXM")


def test_the_command_line_itself_agrees(calculator):
    """The in-process runs above are `python -m book.card`'s own; one real process, to be sure."""
    argv, status, text, _ = ask(calculator, "mistral-7b", context=128)
    run = subprocess.run(
        [sys.executable, "-m", "book.card", *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == status == 0 and run.stdout == text and "at most 69,217" in text


def test_missing_files_are_said_in_words(browser_context, site_url):
    page = browser_context.new_page()
    try:
        page.route("**/_static/pyodide/pyodide.js", lambda route: route.abort())
        page.bring_to_front()
        page.goto(urljoin(site_url, PAGE), wait_until="load")
        page.locator("#card-calculator").scroll_into_view_if_needed()
        page.wait_for_selector('#card-calculator[data-ready="failed"]', timeout=60_000)
        said = page.text_content("#calc-status")
        assert said.startswith("The calculator could not start: this site has no copy of Pyodide"), said
        assert "make book" in said and "npm" in said
    finally:
        page.close()
