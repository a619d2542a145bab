/* Chapter 10's calculator: the form becomes a command line, and book/card.py itself, run by Pyodide in this
   browser, prints the answer. No arithmetic here: this file only builds the argument list and shows what
   `book.card.main` prints (_ext/calculator.py copies card.py and Pyodide's core into _static/). */
(function () {
  "use strict";
  const script = document.currentScript;
  const base = new URL(".", script ? script.src : window.location.href);  // the site's _static/

  const CHIPS = {  // spec-sheet figures, as the command line takes them (book/specs.py)
    "H100 SXM": ["80GiB", "3.35TB/s", "989T", "450GB/s"],
    "A100 80GB SXM": ["80GiB", "2.039TB/s", "312T", "300GB/s"],
    "your own chip": null,
  };
  const OWN = "your own numbers";
  const SHAPE = [["n_layers", "layers", "32"], ["d_model", "width", "4096"], ["n_heads", "query heads", "32"],
    ["n_kv_heads", "key-value heads", "8"], ["d_head", "head size", "128"], ["d_ff", "feed-forward width", "14336"],
    ["vocab", "vocabulary", "32000"], ["n_experts", "experts", "1"], ["experts_per_token", "experts a token", "1"],
    ["window", "sliding window (0: none)", "0"]];

  function element(tag, attributes, children) {
    const node = document.createElement(tag);
    Object.entries(attributes || {}).forEach(([k, v]) => node.setAttribute(k, v));
    (children || []).forEach((c) => node.append(c));
    return node;
  }

  function field(id, label, value, hint) {
    const input = element("input", {id: id, name: id, type: "text", value: value, autocomplete: "off",
                                    spellcheck: "false", size: "10"});
    return element("div", {class: "calc-field"},
                   [element("label", {for: id}, [label + (hint ? " " : "")]), input]);
  }

  function select(id, label, options, chosen) {
    const node = element("select", {id: id, name: id});
    options.forEach((o) => {
      const option = element("option", {value: o}, [o]);
      if (o === chosen) option.selected = true;
      node.append(option);
    });
    return element("div", {class: "calc-field"}, [element("label", {for: id}, [label]), node]);
  }

  function build(root, models) {
    const form = element("form", {id: "calc-form", "aria-describedby": "calc-status"});
    const shape = element("fieldset", {id: "calc-shape", hidden: "hidden"},
                          [element("legend", {}, ["Your model's card"])]);
    SHAPE.forEach(([key, label, value]) => shape.append(field("calc-" + key, label, value)));
    const chip = element("fieldset", {}, [element("legend", {}, ["Chips"])]);
    chip.append(select("calc-chip", "chip", Object.keys(CHIPS), "H100 SXM"),
                field("calc-memory", "memory per chip", "80GiB"), field("calc-bandwidth", "bandwidth per chip", "3.35TB/s"),
                field("calc-flops", "operations/s per chip", "989T"), field("calc-chips", "chips", "1"),
                field("calc-link", "link per chip", "450GB/s"));
    const request = element("fieldset", {}, [element("legend", {}, ["Model and requests"])]);
    request.append(select("calc-model", "model", models.concat([OWN]), "llama-2-7b"),
                   field("calc-context", "tokens a request", "8192"),
                   field("calc-batch", "batch (empty: all that fit)", ""),
                   field("calc-weight-bits", "bits a weight", "16"), field("calc-cache-bits", "bits a cached number", "16"));
    const button = element("button", {type: "submit", id: "calc-answer", disabled: "disabled"}, ["Answer"]);
    form.append(request, shape, chip, button);
    const status = document.getElementById("calc-status");
    const command = element("pre", {id: "calc-command", tabindex: "0"});
    const output = element("pre", {id: "calc-output", tabindex: "0"});
    root.replaceChildren(form, status, command, output);
    return {form, status, command, output, button, shape};
  }

  function value(id) {
    return document.getElementById(id).value;
  }

  function argv() {
    const model = value("calc-model");
    const args = [];
    if (model === OWN) {
      const items = SHAPE.map(([key]) => [key, value("calc-" + key).trim()]).filter(([, v]) => v !== "");
      args.push("--card", items.map(([k, v]) => k + "=" + v).join(","));
    } else {
      args.push(model);
    }
    args.push("--context", value("calc-context"));
    if (value("calc-batch").trim() !== "") args.push("--batch", value("calc-batch"));
    args.push("--weight-bits", value("calc-weight-bits"), "--cache-bits", value("calc-cache-bits"),
              "--memory", value("calc-memory"), "--bandwidth", value("calc-bandwidth"), "--flops", value("calc-flops"),
              "--chips", value("calc-chips"), "--link", value("calc-link"));
    return args;
  }

  function quoted(arg) {
    return /^[A-Za-z0-9_./,=:+-]+$/.test(arg) ? arg : "'" + arg.replace(/'/g, "'\\''") + "'";
  }

  const RUNNER = `
import contextlib, io, sys
sys.path.insert(0, "/home/pyodide/calculator")
import card

def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = card.main(list(argv))
        except SystemExit as stop:
            status = stop.code
    return [status, out.getvalue(), err.getvalue()]

models = list(card.CATALOGUE)
`;

  async function start(root) {
    const page = window.performance.now();
    let ui = null;
    const say = (text) => { document.getElementById("calc-status").textContent = text; };
    root.replaceChildren(element("p", {id: "calc-status", role: "status", "aria-live": "polite"},
                                 ["Loading Python in your browser (about 13 MB, once)…"]));
    try {
      await new Promise((resolve, reject) => {
        const tag = element("script", {src: new URL("pyodide/pyodide.js", base).href});
        tag.onload = resolve;
        tag.onerror = () => reject(new Error("this site has no copy of Pyodide (_static/pyodide/); it is added by " +
                                             "`make book` when npm is installed"));
        document.head.append(tag);
      });
      const pyodide = await window.loadPyodide({indexURL: new URL("pyodide/", base).href});
      const response = await fetch(new URL("calculator/card.py", base));
      if (!response.ok) throw new Error("this site has no copy of book/card.py (_static/calculator/card.py)");
      pyodide.FS.mkdirTree("/home/pyodide/calculator");
      pyodide.FS.writeFile("/home/pyodide/calculator/card.py", await response.text());
      pyodide.runPython(RUNNER);
      const run = pyodide.globals.get("run");
      const models = pyodide.globals.get("models").toJs();
      ui = build(root, models);
      const loaded = window.performance.now() - page;
      const answer = () => {
        const args = argv();
        ui.command.textContent = "$ python -m book.card " + args.map(quoted).join(" ");
        const result = run(args);
        const [status, out, err] = result.toJs();
        result.destroy();
        ui.output.textContent = status === 0 ? out : err;
        ui.output.dataset.status = String(status);
        ui.output.dataset.argv = JSON.stringify(args);
        ui.status.textContent = status === 0 ? "The answer, printed by book/card.py in your browser:" :
          "That input cannot be used; book/card.py says what it expected:";
      };
      ui.form.addEventListener("submit", (event) => { event.preventDefault(); answer(); });
      document.getElementById("calc-model").addEventListener("change", (event) => {
        ui.shape.hidden = event.target.value !== OWN;
      });
      document.getElementById("calc-chip").addEventListener("change", (event) => {
        const figures = CHIPS[event.target.value];
        if (!figures) return;
        ["calc-memory", "calc-bandwidth", "calc-flops", "calc-link"].forEach((id, i) => {
          document.getElementById(id).value = figures[i];
        });
      });
      answer();
      ui.button.removeAttribute("disabled");
      root.dataset.loadedMs = String(Math.round(loaded));
      root.dataset.answeredMs = String(Math.round(window.performance.now() - page));
      root.dataset.ready = "true";
    } catch (error) {
      say("The calculator could not start: " + (error && error.message ? error.message : String(error)) + ".");
      root.dataset.ready = "failed";
    }
  }

  function begin() {
    // Python (about 13 MB) is fetched only when the form comes into view, not for every reader of the page
    const root = document.getElementById("card-calculator");
    if (!root) return;
    if (!("IntersectionObserver" in window)) return start(root);
    root.replaceChildren(element("p", {id: "calc-status", role: "status", "aria-live": "polite"},
                                 ["The calculator loads Python in your browser when you scroll to it."]));
    const watch = new IntersectionObserver((seen) => {
      if (seen.some((entry) => entry.isIntersecting)) {
        watch.disconnect();
        start(root);
      }
    }, {rootMargin: "300px"});
    // observed once the page has its full length (images, fonts), so that the form is not in view by accident
    if (document.readyState === "complete") watch.observe(root);
    else window.addEventListener("load", () => watch.observe(root), {once: true});
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", begin);
  else begin();
})();
