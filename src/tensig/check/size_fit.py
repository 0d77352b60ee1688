"""Fitting result sizes from sample runs: the one mechanism behind every library fallback.

An operation verify does not model by hand (NumPy's long tail, a torch op on meta tensors, a
JAX function under ``eval_shape``) is run at a few size assignments, and each result size is
solved as ``floor((sum a_i*s_i + b) / q)`` in the symbols of its arguments, or as a product of
their sizes (:func:`fit_sizes`).  A size that fits nothing is ``None``: the caller makes it a
fresh size, never a wrong answer.  The work is bounded: at most :data:`MAX_SYMBOLS` symbols,
divisors up to :data:`MAX_DIVISOR`, and :func:`size_guard` on the elements of one run.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import itertools
import math
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from tensig.check import sym_sizes, tracing
from tensig.check import tracer as S
from tensig.check.broadcasting import shared, strides_of
from tensig.check.sym_functions import sym_dims, sym_leaves
from tensig.core import kept
from tensig.core.dims import Dim

__all__ = ["MAX_SYMBOLS", "Base", "below_literals", "cached", "concrete", "differs",
           "failure_kind", "fit", "fit_key", "fit_size", "fit_sizes", "floors_hold",
           "largest_count", "leaves", "named", "sample_points", "short", "size_guard",
           "swapped", "symbols"]

STEP = 12  # one step per symbol (times the unit): a multiple of divisors 2, 3, 4 and 6, so
# floors show as exact slopes; small, since a library that allocates pays for every point
MAX_SYMBOLS = 8  # each symbol costs one more run
MAX_DIVISOR = 8
MAX_ELEMENTS = 2_000_000  # per run of a library that allocates: witnesses are small
SPAN = 16  # runs along each symbol that tell two fresh sizes apart (_told_apart), at least
MAX_RESIDUES = 7  # runs of floors_hold: T // 8's residues, or T // 2's and L // 4's together

Shapes = list[tuple[int, ...] | None]  # one run's result shapes (None: not an array)


def symbols(x: Any) -> list[str]:
    """The symbols of every symbolic array, size and range in ``x`` (nested), sorted."""
    return sorted({n for d in sym_dims(x) for n in d.symbols})


def concrete(x: Any, env: dict[str, int], leaf: Callable[[Any], Any]) -> Any:
    """A call's arguments at one size assignment: sizes as ints, ranges as ranges, containers
    walked, every other value through ``leaf`` (a symbolic array becomes the library's)."""
    if isinstance(x, sym_sizes.SymSize):
        return x.dim.evaluate(env)
    if isinstance(x, sym_sizes.SymRange):
        return range(x.start.evaluate(env), x.stop.evaluate(env), x.step)
    if isinstance(x, list | tuple):
        items = [concrete(v, env, leaf) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    if isinstance(x, dict):
        return {k: concrete(v, env, leaf) for k, v in x.items()}
    return leaf(x)


def leaves(result: Any) -> Iterator[Any]:
    if isinstance(result, tuple | list):
        for r in result:
            yield from leaves(r)
    else:
        yield result


def _elements(args: Any, env: dict[str, int]) -> int:
    return sum(math.prod(d.evaluate(env) for d in a.dims) for a in sym_leaves(args)
               if isinstance(a, S.SymArray))


def size_guard(args: Any, env: dict[str, int],
               seen: Sequence[tuple[dict[str, int], Shapes]] = ()) -> None:
    """Refuse a run whose witness arrays would be too large to build, or (given the runs
    ``seen``: their sizes and result shapes) whose result would: it grows with the inputs as a
    power, the steepest between two runs seen (``np.outer`` of ``n`` cells: ``n**2``; of
    66700, 17 GB), or from one cell to the one run seen."""
    n = _elements(args, env)
    if n > MAX_ELEMENTS:
        raise tracing.Unsupported("evaluating at witness sizes (too large)")
    points = [(_elements(args, e), sum(math.prod(s) for s in shapes if s is not None))
              for e, shapes in seen]
    steps = list(itertools.pairwise([(1, 1), *points] if len(points) == 1 else points))
    powers = [math.log(o1 / o0) / math.log(n1 / n0) for (n0, o0), (n1, o1) in steps
              if n0 < n1 and 0 < o0 < o1]
    last, out = points[-1] if points else (0, 0)
    if powers and last < out and out * (n / last) ** max(powers) > 64 * MAX_ELEMENTS:
        raise tracing.Unsupported("evaluating at witness sizes (a result too large)")


def sample_points(names: list[str], base: dict[str, int], unit: int = 1,
                  step: int = STEP) -> list[dict[str, int]]:
    """The base, one step per symbol (to solve), and two checks at other residues.  Offsets are
    multiples of ``unit`` (divisions assumed exact at the base stay exact), and the base's
    order of the symbols (``K <= L``: a window no longer than its input) holds at every point:
    the steps go to the largest symbol, then the two largest..., the check offsets grow with
    rank."""
    step *= unit
    ranked = sorted(names, key=base.__getitem__)
    points = [dict(base)]
    for n in reversed(ranked):
        points.append({**points[-1], n: base[n] + step})
    rank = {n: r for r, n in enumerate(ranked)}
    for first, per in ((1, 2), (3, 1)):  # near the base: a library that allocates pays less
        points.append({**base, **{n: base[n] + unit * (first + per * r) for n, r in rank.items()}})
    return points


def fit_size(names: list[str], envs: list[dict[str, int]], values: list[int],
             products: list[Dim]) -> Dim | tuple[str, int] | None:
    """``floor((sum a_i*s_i + b) / q)`` from the base and per-symbol steps, checked on the rest
    of :func:`sample_points`' list (first a product ``d`` in ``products``, or ``k*d + c``
    checked on at least three runs, that fits every run).  A floor that more than one offset
    ``b`` fits asks for runs at every residue of one symbol: ``(symbol, q)``."""
    if all(v == values[0] for v in values):
        return Dim.const(values[0])
    for d in products:  # or k*d + c (np.repeat(x, 2) flattens: 2*B*T; np.diff then: - 1)
        at = [d.evaluate(env) for env in envs]
        i = next((i for i, p in enumerate(at) if p != at[0]), 0)
        k = (values[i] - values[0]) // (at[i] - at[0]) if i else 1
        if (k, values[0] - k * at[0]) != (1, 0) and len(envs) < 3:
            continue  # two runs (the rest raised) fit any k and c: a third must check them
        if all(k * p + values[0] - k * at[0] == v for p, v in zip(at, values, strict=True)):
            return d * k + (values[0] - k * at[0])
    if len(envs) < len(names) + 1:
        return None
    base, order, slopes = envs[0], list[str](), list[tuple[int, int]]()
    for i in range(1, len(names) + 1):
        (n,) = (s for s in names if envs[i][s] != envs[i - 1][s])
        order.append(n)
        slopes.append((values[i] - values[i - 1], envs[i][n] - envs[i - 1][n]))
    q = math.lcm(*(den // math.gcd(num, den) for num, den in slopes))
    if q > MAX_DIVISOR:
        return None
    terms = [(num * q // den, s) for (num, den), s in zip(slopes, order, strict=True)]
    n0 = sum(c * base[s] for c, s in terms)
    fits = [b for b in range(q * values[0] - n0, q * values[0] - n0 + q)
            if all((sum(c * env[s] for c, s in terms) + b) // q == v
                   for env, v in zip(envs, values, strict=True))]
    if not fits:
        return None
    if len(fits) > 1:
        coprime = [s for c, s in terms if math.gcd(c, q) == 1]
        return (coprime or [s for c, s in terms if c])[0], q
    total = sum((Dim.symbol(s) * c for c, s in terms), Dim.const(fits[0]))
    return total if q == 1 else total // q


def fit_sizes(evaluate: Callable[[dict[str, int]], Shapes], args: Any, what: str,
              base: dict[str, int], unit: int = 1, *, step: int = STEP,
              errors: tuple[type[BaseException], ...] = (),
              note: Callable[[str], Any] | None = None,
              first: Shapes | None = None) -> list[list[Dim | None] | None]:
    """Fit each result size of an operation as an expression in the symbols of ``args``:
    ``evaluate(env)`` gives each result's shape at one assignment (an int a 1-tuple), ``base``
    is one it accepts, ``first`` its shapes there if run already.  A run that raises one of
    ``errors`` leaves the fit to the runs before it; that and an axis that fits nothing
    (``None``) are told to ``note``.  A quotient of sizes (``ceil(T / S)``) is no symbol its
    runs may vary apart from them (``np.pad(x, (0, n*S - T))`` went negative): not fitted."""
    order = symbols(args)
    if len(order) > MAX_SYMBOLS:
        raise tracing.Unsupported(f"{what} with more than {MAX_SYMBOLS} symbolic sizes")
    t = tracing._TRACER.get()  # none: a fit outside a trace (tests)
    for (n, d), q in (t.quotients() if t and order else {}).items():
        if q.symbols & set(order):
            raise tracing.Unsupported(f"{what} of a size divided by a size, ({n}) // ({d})")
    tell = note or (lambda message: None)
    envs = sample_points(order, base, unit, step) if order else [dict(base)]
    runs: list[Shapes] = [] if first is None else [first]
    for env in envs[len(runs):]:
        try:
            runs.append(evaluate(env))
        except errors as e:
            if not runs:
                raise
            tell(f"{what} accepts these shapes only at some sizes ({short(e)}); traced where "
                 "it does")
            break
    envs = envs[:len(runs)]
    columns = _columns(runs, what)
    # non-affine sizes worth trying: each argument's runs of trailing sizes (flattenings),
    # those times a size passed as a count (``np.repeat(k, H // G, axis=2)``: G * R; keyword
    # ones too), and two arguments' sizes multiplied (``torch.kron``, ``cartesian_prod``)
    arrays = [x.dims for x in sym_leaves(args) if isinstance(x, S.SymArray)]
    products = [p for dims in arrays for i in range(len(dims))
                for p in itertools.accumulate(dims[i:], operator.mul)]
    counts = [x.dim for x in sym_leaves(args) if isinstance(x, sym_sizes.SymSize)]
    products += [p * c for c in counts for p in products] + \
        [a * b for x, y in itertools.combinations(arrays, 2) for a in x for b in y]
    products = list(dict.fromkeys(products))  # many operands share sizes: each tried once
    fits = [fit_size(order, envs, values, products) for values in columns]
    residues: dict[str, int] = {}
    for f in fits:
        if isinstance(f, tuple):
            residues[f[0]] = max(residues.get(f[0], 1), f[1])
    if residues:  # floors: run at every residue of the open symbols, then fit again
        extra = [{**envs[0], s: envs[0][s] + r} for s, q in residues.items() for r in range(1, q)]
        try:
            more = _columns([evaluate(env) for env in extra], what)
            envs, columns = envs + extra, [c + m for c, m in zip(columns, more, strict=True)]
            fits = [fit_size(order, envs, values, products) for values in columns]
        except errors:
            pass
    dims = iter(f if isinstance(f, Dim) else None for f in fits)
    out = [None if shape is None else [next(dims) for _ in shape] for shape in runs[0]]
    for values, f in zip(columns, fits, strict=True):
        if not isinstance(f, Dim):
            tell(f"{what}: a result size ({values[0]} at one assignment) is no simple "
                 "expression in the input sizes; traced as a fresh size")
    return out


def _columns(runs: list[Shapes], what: str) -> list[list[int]]:
    """Each result axis's size across the runs (results that are not arrays skipped)."""
    first = runs[0]
    for shapes in runs:
        if [s is None or len(s) for s in shapes] != [s is None or len(s) for s in first]:
            raise tracing.Unsupported(f"{what} (its result rank depends on the sizes)")
    return [[(shapes[j] or ())[axis] for shapes in runs]
            for j, shape in enumerate(first) if shape is not None for axis in range(len(shape))]


def short(e: BaseException) -> str:
    """A library's error in one line."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]


def named(message: str, env: dict[str, int], dims: Iterable[Dim] = ()) -> str:
    """A library's message from a run at ``env``, its sizes written as the symbols, or as the
    operands' sizes ``dims`` (``B*H``, not 1840); sizes under 11 stay numbers: they are axes
    and small constants as often as sizes."""
    names = {str(v): str(d) for d in dims if d.constant is None and (v := d.evaluate(env)) >= 11}
    names.update({str(v): k for k, v in env.items() if v >= 11})
    return re.sub(r"\b\d+\b", lambda m: names.get(m.group(0), m.group(0)), message)


#: the finding a fitted op's refusal (or JAX's, under its symbolic shapes) is, by words of the
#: library's message, first match; any other refusal is "op-shape".  An einsum says "reduction
#: dimension", a stack "all input arrays", a gufunc (``vecdot``, ``solve``) "core dimension",
#: torch's elementwise ops "non-singleton dimension"; "conv_general", not "conv": "Attempting to
#: convert array of shape ..." is no convolution
_FAILURE_KINDS = (("broadcast", "broadcast"), ("non-singleton dimension", "broadcast"),
                  ("reshape", "reshape"), ("concatenat", "concat"),
                  ("all input arrays must have the same shape", "concat"),
                  ("dot_general", "contraction"), ("contract", "contraction"),
                  ("reduction dimension", "contraction"), ("conv_general", "contraction"),
                  ("core dimension", "contraction"), ("not aligned", "contraction"))


def failure_kind(message: str) -> str:
    """The finding kind of a library's refusal of operand shapes, by its message's words."""
    text = message.lower()
    return next((kind for word, kind in _FAILURE_KINDS if word in text), "op-shape")


# -- A fit's runs and its result -------------------------------------------------------------


class Base(NamedTuple):
    """Sizes a fit may start from, the assumption a run only there makes, and the ``unit`` and
    ``step`` of its sample points (:func:`sample_points`)."""
    env: dict[str, int]
    assumes: str
    unit: int = 1
    step: int = STEP


def fit(name: str, run: Callable[[dict[str, int]], Any], shaped: Callable[[Any], Shapes],
        args: Any, kwargs: dict[str, Any], bases: list[Base], *,
        classify: Callable[[BaseException], BaseException],
        errors: tuple[type[BaseException], ...], rejected: Callable[[BaseException], Fit],
        template_of: Callable[[Any, list[list[Any] | None], dict[str, int]], Any],
        data: Callable[[dict[str, int]], Any] | None = None, allocates: bool = False) -> Fit:
    """The one fit of every library's op: ``run(env)`` runs it (the result's shapes by
    ``shaped``) from the first of ``bases`` it accepts (:func:`first_run`; refused at every
    one: ``rejected``), its sizes are fitted (:func:`fit_sizes`), then tried with the operands'
    sizes in the other order (:func:`ordered`), below the base (:func:`below_literals`) and off
    the divisors of their floors (:func:`floors_hold`); ``template_of(sample, fits, base)``
    makes the result.  ``data`` runs it on distinct values: where zeros are refused as data
    (polyfit's SVD of a zero matrix), and a size that differs from the zeros' depends on the
    data (a fresh size, a Remora box).  ``allocates``: the runs build real arrays, so none
    whose result would be too large is made (:func:`size_guard` on every run after the first,
    given those before it)."""
    try:
        sample, base, error = first_run(run, bases, classify)
    except tracing.Unsupported:
        if data is None:
            raise
        run, data = data, None
        sample, base, error = first_run(run, bases, classify)
    if base is None:
        assert error is not None
        return rejected(error)
    env, found, first = base.env, list[tracing.Finding](), shaped(sample)
    seen = [(env, first)]  # every run: the evidence that two fresh sizes are one

    def shapes_at(at: dict[str, int]) -> Shapes:
        if allocates:
            size_guard((args, kwargs), at, seen)
        seen.append((at, shaped(run(at))))
        return seen[-1][1]
    fits = fit_sizes(shapes_at, (args, kwargs), name, env, base.unit, step=base.step,
                     errors=errors, first=first,
                     note=lambda message: found.append(tracing.Finding("assumption", message)))
    if data is not None:
        with contextlib.suppress(Exception):  # a fill it refuses (indices out of range)
            fits = _boxed(fits, first, shaped(data(env)))
    fits = _far(shapes_at, name, args, kwargs, env, fits, found)
    least = below_literals(shapes_at, args, kwargs, env, fits, errors)
    if error is None:  # else the base's own assumption (the other order, larger sizes) holds
        found += ordered(shapes_at, name, fits, env, errors, {s: k for s, k, _ in least})
    found += [tracing.Finding("assumption", f"assumes {k} <= {s}: {name}{why}")
              for s, k, why in least]
    if error is not None and not any(bases[0].env[s] < k for s, k, _ in least):  # explained
        found.insert(0, tracing.Finding("assumption", f"{name} fails at some sizes ("
                                        f"{named(short(error), bases[0].env)}); assumes "
                                        f"{base.assumes}"))
    held = floors_hold(shapes_at, (args, kwargs), env, fits)
    keys = _told_apart(shapes_at, (args, kwargs), base, fits, seen)
    return template_of(sample, keys, env), tuple(found), held


def fresh_keys(fits: list[list[Dim | None] | None], seen: list[Shapes]
               ) -> list[list[Dim | tuple[int | None, ...]] | None]:
    """``fits`` with each unfitted size keyed by its values at every run in ``seen`` (the
    first the sample's): :func:`build` makes one fresh size per key, so two sizes are one only
    where every run gave them one value (``tril_indices_from``'s two index arrays), not where
    the sample happened to (``avg_pool2d(x, (50, 60))``'s H // 50 and W // 60 are both 1)."""
    def at(shapes: Shapes, j: int, i: int) -> int | None:
        shape = shapes[j] if j < len(shapes) else None
        return shape[i] if shape is not None and i < len(shape) else None
    return [None if dims is None else
            [tuple(at(g, j, i) for g in seen) if d is None else d for i, d in enumerate(dims)]
            for j, dims in enumerate(fits)]


def _told_apart(shaped: Callable[[dict[str, int]], Shapes], args: Any, base: Base,
                fits: list[list[Dim | None] | None], seen: list[tuple[dict[str, int], Shapes]]
                ) -> list[list[Dim | tuple[int | None, ...]] | None]:
    """:func:`fresh_keys` of ``fits``, two fresh sizes equal at every run ``seen`` (H // 10
    and (H + 2) // 10 at H = 52, 76, 57, 104) told apart first by runs one unit apart from the
    base along each symbol (:func:`_apart`): a floor by a count differs there (H = 58) if
    anywhere, a change of that floor within :data:`SPAN` units of one."""
    def keys() -> list[list[Dim | tuple[int | None, ...]] | None]:
        return fresh_keys(fits, [shapes for _, shapes in seen])

    def merged() -> bool:
        fresh = [k for dims in keys() if dims for k in dims if isinstance(k, tuple)]
        return len(fresh) != len(set(fresh))
    for s in symbols(args) if merged() else ():
        with contextlib.suppress(Exception):  # refused, or too large: no more evidence
            for r in _apart(base.env[s], base.unit, largest_count(*args)):
                shaped({**base.env, s: base.env[s] + r * base.unit})
        if not merged():
            break
    return keys()


def _apart(start: int, unit: int, count: int) -> list[int]:
    """Steps (of ``unit``) from ``start`` that :func:`_told_apart` runs: one per residue of a
    count up to ``4 * SPAN`` (at least :data:`SPAN`); past it, SPAN, then SPAN either side of
    the count's next multiple, where a floor by it changes (``avg_pool2d(x, 200, padding=(0,
    1))``: H // 200 and (H + 2) // 200 differ only at H = 198, 199 modulo 200)."""
    if count <= 4 * SPAN:
        return list(range(1, max(SPAN, count) + 1))
    at = (start + (SPAN + 1) * unit + count - 1) // count * count  # past the first SPAN
    middle = (at - start) // unit
    return [*range(1, SPAN + 1), *range(middle - SPAN, middle + SPAN + 1)]


def _far(shaped: Callable[[dict[str, int]], Shapes], name: str, args: Any,
         kwargs: dict[str, Any], env: dict[str, int], fits: list[list[Dim | None] | None],
         found: list[tracing.Finding]) -> list[list[Dim | None] | None]:
    """The fit's runs are near the base, where a floor by a longer count is constant
    (``avg_pool1d(x, 50)`` gives 1 from T = 50 to 99): one more run with every size scaled
    past twice the largest count, a size that differs there fresh (None), said in ``found``."""
    k = 2 * largest_count(args, kwargs) // min(env.values(), default=1) + 2
    far = {s: v * k for s, v in env.items()}
    try:
        got = shaped(far)
    except Exception:  # refused there, or too large to build: no evidence
        return fits
    if [f is None or len(f) for f in fits] != [g is None or len(g) for g in got]:
        raise tracing.Unsupported(f"{name} (its result rank depends on the sizes)")

    def kept(d: Dim | None, n: int) -> Dim | None:
        if d is None or d.evaluate(far) == n:
            return d
        found.append(tracing.Finding("assumption", f"{name}: a result size fitted as {d} is "
                                     f"{n} at sizes {k} times as large; traced as a fresh size"))
        return None
    return [f if f is None or g is None else [kept(d, n) for d, n in zip(f, g, strict=True)]
            for f, g in zip(fits, got, strict=True)]


def largest_count(args: Any, kwargs: dict[str, Any]) -> int:
    """The call's largest int argument (``top_k(x, 50)``'s 50; 0: none): a fit scales past it."""
    return max((x for x in leaves((args, list(kwargs.values()))) if type(x) is int), default=0)


def _boxed(fits: list[list[Dim | None] | None], zero_shapes: Shapes, data_shapes: Shapes
           ) -> list[list[Dim | None] | None]:
    """Sizes that change with the data (not with the sizes) are fresh (None): a Remora box."""
    return [dims if dims is None or z is None or d is None or z == d else
            [None if i >= len(d) or z[i] != d[i] else dim for i, dim in enumerate(dims)]
            for dims, z, d in zip(fits, zero_shapes, data_shapes, strict=True)]


def first_run(run: Callable[[dict[str, int]], Any], bases: list[Base],
              classify: Callable[[BaseException], BaseException]
              ) -> tuple[Any, Base | None, BaseException | None]:
    """``run`` at each base until the library accepts one: (its result, that base, an earlier
    base's shape error), or (None, None, the first error); ``classify`` returns a shape error
    and raises (the trace stops) on any other."""
    error: BaseException | None = None
    for base in bases:
        try:
            return run(base.env), base, error
        except Exception as e:
            shaped = classify(e)
            error = error or shaped
    return None, None, error


def template(sample: Any, fits: Iterator[list[Any] | None],
             leaf: Callable[[Any], tuple[Any, ...]]) -> Any:
    """A fitted result as data, built afresh per call by :func:`build`: ``("seq", type,
    parts)``, ``("size", dim)`` of an int (an unfitted size is its key from
    :func:`fresh_keys`, or its sample value: a fresh size), ``("array", dims, kind, shared)``
    where ``leaf`` says ``("array", kind)`` or ``("array", kind, shared)`` (the axes whose
    elements share memory: a view of an expanded input), or what ``leaf`` says of any other
    leaf."""
    if isinstance(sample, tuple | list):
        return ("seq", type(sample), tuple(template(x, fits, leaf) for x in sample))
    sizes = next(fits)
    if isinstance(sample, int) and not isinstance(sample, bool):
        return ("size", int(sample) if not sizes or sizes[0] is None else sizes[0])
    tag = leaf(sample)
    if tag[0] == "array":
        return ("array", tuple(int(n) if d is None else d for d, n in
                               zip(sizes or (), sample.shape, strict=False)), *tag[1:])
    return tag


def build(template: Any, fresh: dict[Any, Dim] | None = None, inputs: list[Any] | None = None
          ) -> Any:
    """The symbolic result a :func:`template` describes, each unfitted size a fresh one (one
    per key: ``tril_indices_from``'s two index arrays have one length), and
    ``("input", i)`` this call's ``inputs[i]`` (an in-place op's result: a fit is cached), and
    a value a copy (``find_peaks``' dict: user code may write into it)."""
    fresh = {} if fresh is None else fresh

    def dim(d: Any) -> Dim:
        return d if isinstance(d, Dim) else fresh.setdefault(d, tracing.tracer().new_dim("n"))

    tag = template[0]
    if tag == "array":
        out = S.SymArray([dim(d) for d in template[1]], template[2])
        if any(template[3:]):  # a stride of 0 on each shared axis
            out.moved = tuple(0 if i in template[3] else s for i, s in enumerate(strides_of(out)))
        return out
    if tag == "size":
        d = dim(template[1])
        return sym_sizes.SymSize(d) if d.constant is None else d.constant
    if tag != "seq":
        return (inputs or [])[template[1]] if tag == "input" else copy.deepcopy(template[1])
    kind, items = template[1], [build(p, fresh, inputs) for p in template[2]]
    if hasattr(kind, "_fields"):  # a named tuple
        return kind(*items)
    try:
        return kind(items)  # a tuple, a list, or torch.return_types.* (one sequence)
    except TypeError:
        return tuple(items)


def shapes(result: Any, arrays: type[Any] | tuple[type[Any], ...]) -> Shapes:
    """Each result leaf's sizes for the fit: an array's shape, an int (a size) as a 1-tuple."""
    return [tuple(x.shape) if isinstance(x, arrays) else (x,) if isinstance(x, int)
            and not isinstance(x, bool) else None for x in leaves(result)]


def below_literals(shaped: Callable[[dict[str, int]], Shapes], args: Any,
                   kwargs: dict[str, Any], base: dict[str, int],
                   fits: list[list[Dim | None] | None], errors: tuple[type[BaseException], ...]
                   ) -> list[tuple[str, int, str]]:
    """The fit's runs never see a symbol below its base: each is lowered to the least size its
    inputs take (1, or where a ``T - 3`` axis is empty), the others kept, and where the library
    refuses that, or its result differs from the fit below a literal size it was given and
    returns (``np.diag`` of ``[B, 3]``: ``min(B, 3)``), a bisection finds the least size it
    holds from: (symbol, that size, why), to assume ('assumes 4 <= T': a pool of window 4).
    The bisection assumes that every size above one the library accepts is accepted too (a
    window, a kth: lower bounds); a run that fails otherwise (no meta kernel there, too large
    to build) ends it, keeping the failure found below and the size that held.  Each symbol
    is lowered alone, so the least sizes are run once more together: where that fails
    (``np.delete(x, 150)`` of ``[B, N]`` holds at B = 12 and at N = 1, not at both), the sizes
    lowered are assumed only from the base."""
    sizes = {d.constant for dims in fits if dims for d in dims if d is not None}
    given = [*leaves(args), *leaves(list(kwargs.values()))]
    arrays = [a for a in given if isinstance(a, S.SymArray)]
    literals = {v for v in given if type(v) is int} | {d.constant for a in arrays for d in a.dims}
    top = max((k for k in literals & sizes if k is not None), default=0)
    found, corner = [], dict(base)  # corner: each symbol at the least size it held from

    def fails(env: dict[str, int], lowered: list[str]) -> str | None:  # why, or None: it holds
        at = ", ".join(f"{s} = {env[s]}" for s in lowered)
        try:
            got = shaped(env)
        except errors as e:
            return f" refuses {at} ({short(e)})"
        bad = any(env[s] < top for s in lowered) and differs(fits, got, env)
        return f"'s result sizes differ from the fit at {at}" if bad else None

    def unordered(s: str, k: int) -> bool:  # k <= s holds with the others above k: no order
        scaled = {o: v * (k // min(base.values()) + 2) for o, v in base.items()}  # units kept
        with contextlib.suppress(Exception):
            return fails({**scaled, s: k}, [s]) is None
        return False
    for s in symbols((args, kwargs)):
        low = next((v for v in range(1, base[s]) if all(
            d.evaluate({**base, s: v}) >= 0 for a in arrays for d in a.dims)), base[s])
        why: str | None = ""  # "": no evidence
        high = base[s]
        with contextlib.suppress(Exception):  # no evidence past a run that fails otherwise
            why = fails({**base, s: low}, [s])
            while why is not None and high - low > 1:  # fails at low, holds at high
                mid = (low + high) // 2
                if (w := fails({**base, s: mid}, [s])) is None:
                    high = mid
                else:
                    low, why = mid, w
        if why is None:
            corner[s] = low
        # a bound not under the others' sizes may be their order (ordered() says it) unless
        # it holds with them larger: topk(x, 50) of [B, N] from B = 48 needs 50 <= N
        elif why and (all(high < base[o] for o in base if o != s) or unordered(s, high)):
            found.append((s, high, why))
            corner[s] = high
    lowered = [s for s in corner if corner[s] != base[s]]
    if found and len(lowered) > 1:  # each held with the others at the base: together too?
        try:
            why = fails(corner, lowered)
        except Exception as e:  # no evidence that they hold together
            why = f" fails at {', '.join(f'{s} = {corner[s]}' for s in lowered)} (" \
                  f"{type(e).__name__})"
        if why is not None:  # B*N > 150: only the base's sizes are known to hold together
            return [(s, base[s], why) for s in lowered]
    return found


def swapped(env: dict[str, int]) -> dict[str, int]:
    """``env``'s sizes in the other order among its symbols (the largest's to the smallest):
    where an op valid only for ``K <= L`` fails, or a fit of ``min(B, T)`` is told apart."""
    names = sorted(env, key=env.__getitem__)
    return {**env, **dict(zip(names, reversed([env[n] for n in names]), strict=True))}


def ordered(shaped: Callable[[dict[str, int]], Shapes], name: str,
            fits: list[list[Dim | None] | None], env: dict[str, int],
            errors: tuple[type[BaseException], ...], least: dict[str, int] | None = None
            ) -> list[tracing.Finding]:
    """A fit from ``env`` that fails with the sizes there in the other order (a 'valid'
    convolution's ``N - K + 1``, ``diag``'s ``min(B, T)``), or a call refused in it
    (``np.insert(y, len(x), v)``, one of ``errors``): it holds with them ordered as at ``env``.
    Each size in ``least`` stays at its least size there (:func:`below_literals`):
    ``avg_pool1d(x, 50)`` refuses T = 40 for its window, not for the order of B, C, T."""
    names, other = sorted(env, key=env.__getitem__), swapped(env)
    other.update({s: max(other[s], k) for s, k in (least or {}).items()})
    why = "'s result sizes depend on the order of its operands' sizes (traced in this one)"
    try:
        if len(names) < 2 or not differs(fits, shaped(other), other):
            return []
    except errors as e:  # refused in that order
        why = f" refuses them in the other order ({type(e).__name__}: {e})"
    except Exception:  # no meta kernel there, say: no evidence
        return []
    return [tracing.Finding("assumption", f"assumes {' <= '.join(names)}: {name}{why}")]


def floors_hold(evaluate: Callable[[dict[str, int]], Shapes], args: Any, base: dict[str, int],
                fits: list[list[Dim | None] | None]) -> bool:
    """Whether the fit holds where the floors in the sizes of ``args`` are inexact (it steps by
    their divisors: ``T`` for ``np.repeat(x[:T // 2], 2)`` held at even ``T`` only): a run off
    ``base`` at each joint residue of the divided symbols (at most :data:`MAX_RESIDUES`), and
    at each below a divisor (``T // 3`` is 0: ``np.diff`` gives 0, not -1), none raising."""
    moduli: dict[str, int] = {}
    for d in sym_dims(args):
        for p, k in tracing.divisions(d):
            moduli.update({s: math.lcm(moduli.get(s, 1), k) for s in p.symbols})
    if math.prod(moduli.values()) - 1 > MAX_RESIDUES:
        return False
    envs = [{**base, **{s: base[s] + r for s, r in zip(moduli, rs, strict=True)}}
            for rs in itertools.product(*map(range, moduli.values()))][1:]
    envs += [{**base, s: r} for s, k in moduli.items() for r in range(1, k)]
    try:
        return not any(differs(fits, evaluate(env), env) for env in envs)
    except Exception:  # refused off the divisors (or too large to build)
        return False


def differs(fits: list[list[Dim | None] | None], got: Shapes, env: dict[str, int]) -> bool:
    """Whether a run's result shapes ``got`` at ``env`` differ from the fitted sizes there."""
    if [f is None or len(f) for f in fits] != [g is None or len(g) for g in got]:
        return True
    return any(d is not None and d.evaluate(env) != n for f, g in zip(fits, got, strict=True)
               if f and g for d, n in zip(f, g, strict=True))


# -- One cache of fits for every library: a fit is a function of what its runs read ---------

Fit = tuple[Any, tuple[tracing.Finding, ...], bool]  # a result template, findings, floors_hold
_FITS: dict[Any, Fit] = {}
_PLAIN = (type(None), bool, int, float, complex, str, bytes, type, enum.Enum, np.dtype,
          np.generic)
_VALUES = 4096  # a NumPy array argument of at most this many elements is keyed by its bytes


def fit_key(op: Any, args: Any, kwargs: dict[str, Any], at: Any = None,
            plain: tuple[type, ...] = (), shaped: tuple[type[Any], ...] = ()) -> Any:
    """A fit's cache key: the op, each argument as the runs read it (a symbolic array its dims
    and kind, a size its expression, a ``plain`` value itself, a small NumPy array its values,
    one of ``shaped``, run as meta tensors, its shape and dtype), and ``at`` (the sizes the runs
    start from).  None (not cached) for anything else: a function may act differently at each
    call while looking the same."""
    def describe(v: Any) -> Any:
        if isinstance(v, S.SymArray):
            return "A", v.dims, v.kind, tuple(shared(v))
        if isinstance(v, sym_sizes.SymSize):
            return "S", v.dim
        if isinstance(v, sym_sizes.SymRange):
            return "R", v.start, v.stop, v.step
        if isinstance(v, shaped):
            return "T", tuple(v.shape), v.dtype
        if type(v) is np.ndarray and v.size <= _VALUES and v.dtype.kind in "biufcSU":
            return "N", v.shape, v.dtype.str, v.tobytes()
        if isinstance(v, list | tuple):
            return type(v), tuple(describe(x) for x in v)
        if isinstance(v, dict):
            return dict, tuple((k, describe(x)) for k, x in v.items())
        if isinstance(v, _PLAIN + plain):  # repr: -0.0 == 0.0, but a sign may be read
            return type(v), repr(v) if isinstance(v, float | complex | np.inexact) else v
        raise TypeError
    try:
        key = (op, describe(args), describe(kwargs), at)
        hash(key)
    except TypeError:
        return None
    return key


def cached(key: Any, fit: Callable[[], Fit], args: Any) -> Any:
    """The template ``fit()`` makes (kept under ``key``; None: not kept), and its findings
    reported at this call as at the first, the floors in the sizes of ``args`` too unless it
    holds off them (:func:`floors_hold`): a fit runs the library only once per key.  A fit
    that raises (a data error, an op not modelled) is not kept."""
    hit = None if key is None else _FITS.get(key)
    if hit is None:
        hit = fit()
        if key is not None:
            kept(_FITS, key, hit, 4096)
    t = tracing.tracer()
    for d in () if hit[2] else sym_dims(args):
        t.rely(d)
    for f in hit[1]:
        t.report(f.kind, f.message)
    return hit[0]
