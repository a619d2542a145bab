"""Inside the sandbox: run a notebook's code, call its functions on the hidden inputs, print the answers.

    python grade_runner.py NOTEBOOK.ipynb PROBES.py [--with-args] [--probe-seconds S]

This script decides nothing. It runs every code cell of the notebook in order (a cell
that raises is recorded and the next one runs), then executes PROBES.py, which lists
calls `(question, function name, arguments, driver[, description])` (see `probe_functions` in
tools/grading/grade.py), and calls each function on a fresh copy of
its arguments. Each answer is written as soon as it is known, one JSON line per call,
to the standard output it was started with, as plain data with its exact type
(`{"float": 0.5}`, `{"ndarray": {...}}`, `{"other": "mymodule.MyFloat"}`): never a pickle.
A trusted process outside the sandbox (tools/grading/grade.py) compares them with the answers of
the solution. Whatever the notebook patches in this interpreter, it can change only
what is printed here, never the verdict.

With --probe-seconds, a call that has not returned after S seconds is stopped (a timer's signal) and its answer
is `{"too_slow": S}`, as are the question's later calls, which are not made: a question whose answer is too slow
for one input costs that question, and the time left goes to the others.
"""

import copy
import json
import os
import signal
import sys
import types

MAX_ITEMS = 1_000_000  # numbers in one answer


def _stub_otter():
    """`import otter` gives a stand-in: the notebook's `grader.check` cells are the learner's feedback, not
    the grade, and the real otter is slow to import."""
    otter = types.ModuleType("otter")

    class Notebook:
        def __init__(self, *args, **kwargs):
            pass

        def check(self, *args, **kwargs):
            return None

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    otter.Notebook = Notebook
    sys.modules["otter"] = otter


class _Anything:
    """Stands in for IPython's shell in a plain interpreter: every attribute is a function doing nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _python_source(source):
    """A cell's code without IPython's magics and shell escapes (`%...`, `!...`), which plain Python cannot run."""
    if source.lstrip().startswith("%%"):
        return ""
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        lines.append(line[: len(line) - len(stripped)] + "pass" if stripped.startswith(("%", "!")) else line)
    return "\n".join(lines)


def _one_line(err):
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160]}" if text else type(err).__name__


def encode(x, depth=0):  # noqa: C901 (one branch per type the channel carries)
    """A value as plain JSON data that keeps its exact type; anything unusual becomes {"other": type name}."""
    t = type(x)
    if depth > 20:
        return {"other": "too deeply nested"}
    if x is None:
        return {"none": None}
    if t is bool:
        return {"bool": x}
    if t is int:
        return {"int": x} if abs(x) < 2**63 else {"other": "int too large"}
    if t is float:
        return {"float": x}
    if t is str:
        return {"str": x[:10_000]}
    if t in (list, tuple):
        if len(x) > MAX_ITEMS:
            return {"other": "sequence too long"}
        return {t.__name__: [encode(v, depth + 1) for v in x]}
    if t is dict:
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in list(x.items())[:10_000]]}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if t is numpy.ndarray:
            # longdouble (float128) is a float whose items tolist() keeps as NumPy scalars, which JSON cannot write
            if x.size > MAX_ITEMS or x.dtype.kind not in "biuf" or x.dtype.itemsize > 8:
                return {"other": f"numpy.ndarray of {x.dtype}"}
            return {"ndarray": {"dtype": x.dtype.name, "shape": list(x.shape), "data": x.ravel().tolist()}}
        if (
            isinstance(x, numpy.generic)
            and t.__module__ == "numpy"
            and x.dtype.kind in "biuf"
            and x.dtype.itemsize <= 8
        ):
            return {"npscalar": {"dtype": x.dtype.name, "value": x.item()}}
    torch = sys.modules.get("torch")
    if torch is not None and t is torch.Tensor:
        if x.numel() > MAX_ITEMS or x.is_complex():
            return {"other": f"torch.Tensor of {x.dtype}"}
        flat = x.detach().cpu().reshape(-1)
        if x.dtype == torch.bfloat16:
            flat = flat.float()
        return {
            "tensor": {
                "dtype": str(x.dtype),
                "shape": list(x.shape),
                "data": flat.tolist(),
                "requires_grad": bool(x.requires_grad),
            }
        }
    return {"other": f"{t.__module__}.{t.__qualname__}"}


class _TooSlow(BaseException):
    """Raised in a call by the timer of --probe-seconds."""


def _stop(signum, frame):
    raise _TooSlow


def main(notebook_path, probes_path, with_args=False, probe_seconds=None):
    out = os.fdopen(os.dup(1), "w")  # the answers' channel; the notebook's own prints go nowhere
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")

    def emit(record):
        try:
            line = json.dumps(record)
        except (TypeError, ValueError):  # an answer encode() let through that JSON cannot write: that answer alone
            line = json.dumps({**record, "answer": {"other": "a value the grader cannot read"}})
        out.write(line + "\n")
        out.flush()

    _stub_otter()
    with open(notebook_path, encoding="utf-8") as f:
        notebook = json.load(f)
    namespace = {
        "__name__": "__main__",
        "__builtins__": __builtins__,
        "display": lambda *a, **k: None,
        "get_ipython": lambda: _Anything(),
    }
    cells = [c for c in notebook.get("cells", []) if c.get("cell_type") == "code"]
    for i, cell in enumerate(cells):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        try:
            exec(compile(_python_source(source), f"<cell {i + 1}>", "exec"), namespace)
        except BaseException as err:  # SystemExit and KeyboardInterrupt too: the next cell still runs
            emit({"cell_error": {"cell": i + 1, "error": _one_line(err)}})
    emit({"cells_done": len(cells)})

    probe_space = {"__name__": "probes"}
    with open(probes_path, encoding="utf-8") as f:
        exec(compile(f.read(), "probes.py", "exec"), probe_space)
    too_slow = set()  # the questions a call of which ran out of time
    for index, record in enumerate(probe_space["PROBES"]):
        question, function, args, driver = record[:4]  # a 5th item, a description, is for the grader only
        extra = {"args": encode(args)} if with_args else {}
        fn = namespace.get(function)
        if question in too_slow:
            answer = {"too_slow": probe_seconds}
        elif not callable(fn):
            answer = {"missing": function}
        else:
            try:
                if probe_seconds:  # set again before each call: a cell may have replaced the handler
                    signal.signal(signal.SIGALRM, _stop)
                    signal.setitimer(signal.ITIMER_REAL, probe_seconds)
                try:
                    args = copy.deepcopy(args)
                    value = driver(fn, *args) if driver else fn(*args)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                answer = encode(value)
            except _TooSlow:
                too_slow.add(question)
                answer = {"too_slow": probe_seconds}
            except BaseException as err:
                answer = {"raised": _one_line(err)}
        emit({"probe": index, "question": question, "answer": answer, **extra})
    emit({"done": True})
    out.close()
    os._exit(0)


if __name__ == "__main__":
    flags = sys.argv[3:]
    seconds = float(flags[flags.index("--probe-seconds") + 1]) if "--probe-seconds" in flags else None
    main(sys.argv[1], sys.argv[2], "--with-args" in flags, seconds)
