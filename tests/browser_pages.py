"""A page of the built website opened in the browser, with what it logged and the requests it tried outside
localhost: what tests/test_browser.py and tests/test_accessibility.py read. The fixtures `visit` (a page per
test) and `opened` (each page loaded once per test file) are in conftest.py."""
from urllib.parse import urljoin


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
