"""Every construct of the notation, executed on every backend, against the slow loop oracle
(``tests/reference.py``), which derives values from the spec alone (not from the projections
the lowering uses)."""

from __future__ import annotations

import numpy as np
import pytest

import tensig as ts
from arrays import oracle_case, to_numpy

FUNCS = {"einsum": ts.einsum, "einsum1": ts.einsum1, "outer_sum": ts.outer_sum,
         "tropical": ts.tropical, "einmax1": ts.einmax1, "concat": ts.concat}

# (op, spec, operand shapes, keyword arguments)
CASES = [
    ("einsum", "ij;jk=>ik", ["2,3", "3,4"], {}),
    ("einsum", "b|i->o; o->p => b|i->p", ["2|3->4", "4->5"], {}),
    ("einsum", "ij;|jk=>ik", ["2|3,4", "4,2"], {}),
    ("einsum", "i; ij => ij", ["3", "3,2"], {}),
    ("einsum", "ii; i => i", ["3,3", "3"], {}),
    ("einsum1", "_i_ => i", ["2,3,4"], {}),
    ("einsum1", "ij => ji", ["2|3->2,4"], {}),
    ("einsum1", "..v..|...ijk => ..v..kji", ["2,3|4,2,3,2"], {}),
    ("einsum1", "2..v..|... => ..v..", ["4,2|3->2"], {}),
    ("einsum1", "...|... => ...|...2", ["2|3"], {}),
    ("einsum1", "...|... => ...|1...", ["2|3"], {}),
    ("einsum1", "... => |->0", ["2|3->4"], {}),
    ("einsum1", "i => ii", ["3"], {}),
    ("einsum1", "ij => iij", ["2,3"], {}),
    ("einsum1", "i => ij", ["3"], {"sizes": {"j": 2}}),
    ("einsum1", "i, 1 => i, 0, 2", ["3,2"], {}),
    ("einsum", "o<+k; k => o", ["7", "3"], {}),
    ("einsum", "2*o=+k; k => o", ["8", "3"], {}),
    ("einsum", "o=+2*k; k => o", ["7", "2"], {}),
    ("einsum", "o=+k; k => o", ["6", "4"], {}),
    ("einsum", "s*o<+d*k; k => o", ["11", "3"], {"params": {"s": 3, "d": 2}}),
    ("einsum", "o+k; k => o", ["6", "3"], {"use_padding": True}),
    ("einsum", "o+k; k => o", ["6", "3"], {"use_padding": False}),
    ("einsum", "...|oh<+kh, 2*ow=+kw, ic; |kh, kw, ic -> oc => ...|oh, ow, oc",
     ["2|5,6,2", "3,3,2->3"], {}),
    ("einsum1", "o+1 => o", ["5"], {}),
    ("einsum1", "3*o+2 => o", ["9"], {}),
    ("tropical", "...|2*oh<+wh, c; |wh => ...|oh, c", ["2|6,3", "2"], {}),
    ("tropical", "o=+k; k => o", ["6", "3"], {}),
    ("tropical", "ij; jk => ik", ["2,3", "3,2"], {}),
    ("tropical", "i; j => ", ["3", "2"], {}),
    ("einmax1", "ij => i", ["3,4"], {}),
    ("einmax1", "ii => ", ["3,3"], {}),
    ("einmax1", "i => i2", ["2"], {}),
    ("outer_sum", "i; j => ij", ["3", "2"], {}),
    ("outer_sum", "ij; jk => ik", ["2,3", "3,2"], {}),
    ("outer_sum", "i; i => ", ["3", "3"], {}),
    ("outer_sum", "ij; k => i", ["2,3", "4"], {}),
    ("concat", "a; b => a^b", ["2", "3"], {}),
    ("concat", "a^b => a", ["5"], {"sizes": {"a": 2}}),
    ("concat", "a^b => b", ["5"], {"sizes": {"a": 2}}),
    ("concat", "a => a^b", ["2"], {"sizes": {"b": 3}}),
    ("concat", "b => a^b", ["2"], {"sizes": {"a": 3}}),
    ("concat", "a^b^c => b", ["6"], {"sizes": {"a": 1, "c": 2}}),
    ("concat", "b => a^b^c", ["2"], {"sizes": {"a": 1, "c": 2}}),
    ("concat", "3^a => a", ["5"], {}),
    ("concat", "a => a^3", ["2"], {}),
    ("concat", "3^a^1 => a", ["6"], {}),
    ("concat", "a^b => b^a", ["5"], {"sizes": {"a": 2}}),
    ("concat", "s, a; s, b => s, a^b", ["2,2", "2,3"], {}),
    ("concat", "x, ...; y, ...; z, ... => x^y^z, ...", ["1,2", "2,2", "1,2"], {}),
    ("concat", "a, c; b => a^b", ["2,3", "2"], {}),
]


def _id(case):
    return f"{case[0]}:{case[1]}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_construct_matches_the_loop_oracle(case, backend):
    op, spec, _, kw = case
    args, expected, expected_shape = oracle_case(case, backend)
    out = FUNCS[op](spec, *args, **kw)
    if isinstance(out, ts.RowArray):
        assert out.rows == expected_shape
    else:
        assert not expected_shape.batch and not expected_shape.input
    got = to_numpy(backend, out)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
