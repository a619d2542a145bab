"""Trusted side of grading: read the answers a sandbox printed and compare them with the solution's.

Runs in the grader's own interpreter, which no submission's code ever enters. The
answers arrive as plain JSON (see tools/grading/grade_runner.py); `decode` turns them back into
values of the exact type they claim, refusing anything malformed, and `same` compares an
answer with the solution's: the same type (a float is not an int, a float32 tensor is
not a float64 one), the same shape, and values within a tolerance fitted to the dtype.
An exercise's own checks (grading/checks.py in its autograder zip, written in the
`# CHECKS` cells of its master) add properties on top: invariances, draws that match the
chances, and so on. They raise `Wrong("one line for the learner")`.

A reason goes back to the learner, so it names the property that failed (a type, a dtype, a shape or
count that differs, a wrong value) and never a value that the hidden inputs decide or that the
submission chose: neither the answer (a function could return its arguments), nor the solution's
shape or length, nor an exception's message. `Raised.message` keeps the message for the instructor.
"""

from __future__ import annotations

import builtins
import math
import os
import re
from dataclasses import dataclass

import numpy as np

DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"}
TORCH_DTYPES = {
    "torch.bool": "bool",
    "torch.uint8": "uint8",
    "torch.int8": "int8",
    "torch.int16": "int16",
    "torch.int32": "int32",
    "torch.int64": "int64",
    "torch.float16": "float16",
    "torch.bfloat16": "float32",
    "torch.float32": "float32",
    "torch.float64": "float64",
}
MAX_ITEMS = 1_000_000  # numbers in one answer, as tools/grading/grade_runner.py encodes it
MAX_DIMS = 32  # NumPy's own limit is 64
MAX_DICT = 10_000  # items of one dict, as grade_runner.py encodes it
TOLERANCE = {"float16": (1e-2, 1e-3), "float32": (1e-4, 1e-6), "float64": (1e-6, 1e-9)}  # (rtol, atol)


class Wrong(Exception):
    """An answer that does not meet a check; the message is the learner's one-line reason."""


class Malformed(ValueError):
    """The sandbox printed something that is not a well-formed answer."""


@dataclass(frozen=True)
class Tensor:
    """A torch tensor as the sandbox described it (the grader needs no torch to judge it)."""

    dtype: str  # e.g. "torch.float32"
    values: np.ndarray
    requires_grad: bool

    @property
    def shape(self):
        return tuple(self.values.shape)


@dataclass(frozen=True)
class Other:
    """A value of a type the grader does not accept as an answer (a subclass, a custom object, ...)."""

    type_name: str


@dataclass(frozen=True)
class Raised:
    message: str


@dataclass(frozen=True)
class Missing:
    function: str


def _array(spec, dtypes):
    if not isinstance(spec, dict) or set(spec) - {"dtype", "shape", "data", "requires_grad"}:
        raise Malformed("array")
    dtype, shape, data = spec.get("dtype"), spec.get("shape"), spec.get("data")
    if dtype not in dtypes or not isinstance(shape, list) or not isinstance(data, list):
        raise Malformed("array")
    if len(shape) > MAX_DIMS or len(data) > MAX_ITEMS:
        raise Malformed("array shape")
    size = 1
    for n in shape:  # checked before any arithmetic on it: a forged shape of a million dimensions costs nothing
        if type(n) is not int or not 0 <= n <= MAX_ITEMS:
            raise Malformed("array shape")
        size *= n
        if size > MAX_ITEMS:
            raise Malformed("array shape")
    if size != len(data):
        raise Malformed("array shape")
    if not all(type(v) in (int, float, bool) for v in data):
        raise Malformed("array data")
    np_dtype = dtypes[dtype] if isinstance(dtypes, dict) else dtype
    return np.array(data, dtype=np_dtype).reshape(shape)


def is_too_slow(obj: object) -> bool:
    """The runner's record of a call stopped by its --probe-seconds timer: `{"too_slow": seconds}`."""
    return (
        isinstance(obj, dict)
        and list(obj) == ["too_slow"]
        and type(obj["too_slow"]) in (int, float)
        and 0 < obj["too_slow"] < 1e6
    )


def decode(obj: object) -> object:
    """The value an encoded answer describes, with its exact type; raises Malformed on anything else (numbers
    too large for their type included)."""
    try:
        return _decode(obj)
    except OverflowError:
        raise Malformed("a number too large for its type") from None


def _decode(obj):  # noqa: C901 (one branch per tag of the answer channel)
    if not isinstance(obj, dict) or len(obj) != 1:
        raise Malformed("not a tagged value")
    [(tag, v)] = obj.items()
    if tag == "none" and v is None:
        return None
    if tag == "bool" and type(v) is bool:
        return v
    if tag == "int" and type(v) is int:
        return v
    if tag == "float" and type(v) in (float, int):
        return float(v)
    if tag == "str" and type(v) is str:
        return v
    if tag in ("list", "tuple") and type(v) is list:
        items = [_decode(x) for x in v]
        return items if tag == "list" else tuple(items)
    if tag == "dict" and type(v) is list:
        if len(v) > MAX_DICT:
            raise Malformed("dict too large")
        out = {}
        for pair in v:
            if type(pair) is not list or len(pair) != 2:
                raise Malformed("dict item")
            key = _decode(pair[0])
            if type(key) not in (str, int, bool, float, type(None)):
                raise Malformed("dict key")
            out[key] = _decode(pair[1])
        return out
    if tag == "ndarray":
        return _array(v, DTYPES)
    if (
        tag == "npscalar"
        and isinstance(v, dict)
        and v.get("dtype") in DTYPES
        and type(v.get("value")) in (int, float, bool)
    ):
        return np.dtype(v["dtype"]).type(v["value"])
    if tag == "tensor" and isinstance(v, dict) and type(v.get("requires_grad")) is bool:
        return Tensor(v["dtype"], _array(v, TORCH_DTYPES), v["requires_grad"])
    if tag == "other" and type(v) is str:
        return Other(clean(v, 100))
    if tag == "raised" and type(v) is str:
        return Raised(clean(v, 200))
    if tag == "missing" and type(v) is str:
        return Missing(clean(v, 100))
    raise Malformed(f"unknown tag {tag!r}"[:60])


def clean(text: object, limit: int | None = None, escape: bool = False) -> str:
    """The one sanitiser of text on the trusted side: one line of printable text, at most `limit` characters.

    By default every character that does not print (a control character, a line break) becomes a space and runs
    of white space one space (what a sandbox printed, a reason); with `escape`, each such character is written
    as its escape instead, so that two names that differ only there stay two (`display_name`, a CSV cell)."""
    text = str(text)
    if escape:
        text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    else:
        text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if limit is None else text[:limit]


# The names of Python's own exceptions: the only exception names a reason may show (a submission can define
# and raise a class of any name, and so write into its reason).
BUILTIN_EXCEPTIONS = frozenset(
    name for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, BaseException)
)


def describe(x: object) -> str:
    """A short name of a value's type for a learner, from the grader's own words only: 'a float', 'a NumPy array
    of float64' (a dtype decode() accepted), 'a value of another type' for anything else, whatever it calls itself
    (a submission names its classes, so a class name could carry the hidden inputs); never a shape."""
    if isinstance(x, Tensor):
        return f"a {x.dtype} tensor"
    if isinstance(x, np.ndarray):
        return f"a NumPy array of {x.dtype}"
    if isinstance(x, np.generic):
        return f"a NumPy {x.dtype} scalar"
    if isinstance(x, Other):
        return "a value of another type"
    if x is None:
        return "None"
    name = type(x).__name__
    if name not in ("bool", "int", "float", "str", "list", "tuple", "dict"):
        return "a value of another type"
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _close(got, want, dtype_name):
    rtol, atol = TOLERANCE.get(dtype_name, (0.0, 0.0))
    if rtol == 0.0:
        return np.array_equal(got, want)
    return bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))


def error_kind(message: object) -> str:
    """What an exception's one-line message may show a learner: the name of a built-in exception
    ('ValueError: ...' -> 'ValueError'), and for an OSError the system's own text of its errno ('OSError (No space
    left on device)'); any other name, which the submission chose, is 'an exception'."""
    name, _, rest = str(message).partition(":")
    name = name.strip()
    if name not in BUILTIN_EXCEPTIONS:
        return "an exception"
    found = re.match(r"\s*\[Errno (\d{1,4})\] ", rest)
    if found:
        text = os.strerror(int(found.group(1)))
        if rest[found.end() :].startswith(text):
            return f"{name} ({text})"
    return name


def same(got: object, want: object, what: str = "the answer") -> None:  # noqa: C901 (one branch per kind of value compared)
    """Raise Wrong unless `got` has exactly the type, shape and (within tolerance) the values of `want`. The
    reason names what differs (type, dtype, shape, count, values), never a value or a shape itself."""
    if isinstance(got, Raised):
        raise Wrong(f"raised {error_kind(got.message)}")
    if isinstance(got, Missing):
        raise Wrong(f"no function named {got.function}")
    if type(want) is tuple and type(got) is list:  # "a pair" may be written either way
        got = tuple(got)
    if type(got) is not type(want):
        raise Wrong(f"{what} is {describe(got)}; expected {describe(want)}")
    if isinstance(want, (list, tuple)):
        if len(got) != len(want):
            raise Wrong(f"{what} has the wrong number of items")
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"item {i} of {what}")
    elif isinstance(want, dict):
        if set(got) != set(want):
            raise Wrong(f"{what} has the wrong keys")
        for key in want:
            same(got[key], want[key], f"an item of {what}")  # not the key: the hidden inputs may decide it
    elif isinstance(want, Tensor):
        if got.dtype != want.dtype:
            raise Wrong(f"{what} is {describe(got)}; expected {describe(want)}")
        if got.shape != want.shape:
            raise Wrong(f"{what} has the wrong shape")
        if not _close(got.values, want.values, TORCH_DTYPES.get(want.dtype, "")):
            raise Wrong(f"{what} has the right shape and dtype but wrong values")
    elif isinstance(want, np.ndarray):
        if got.dtype != want.dtype:
            raise Wrong(f"{what} is {describe(got)}; expected {describe(want)}")
        if got.shape != want.shape:
            raise Wrong(f"{what} has the wrong shape")
        if not _close(got, want, want.dtype.name):
            raise Wrong(f"{what} has the right shape and dtype but wrong values")
    elif isinstance(want, float):
        if not (math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12) or (math.isnan(got) and math.isnan(want))):
            raise Wrong(f"{what} is wrong")
    elif isinstance(want, np.generic):
        if got.dtype != want.dtype or not _close(np.asarray(got), np.asarray(want), want.dtype.name):
            raise Wrong(f"{what} is wrong")
    elif got != want:
        raise Wrong(f"{what} is wrong")


def values(x: object) -> np.ndarray:
    """The numbers of an array-like answer (a Tensor or a NumPy array), as a NumPy array."""
    if isinstance(x, Tensor):
        return x.values
    if isinstance(x, np.ndarray):
        return x
    raise Wrong(f"expected an array or a tensor, got {describe(x)}")


CHECK_NAMES = {
    "Wrong": Wrong,
    "Tensor": Tensor,
    "same": same,
    "values": values,
    "describe": describe,
    "np": np,
    "math": math,
}
