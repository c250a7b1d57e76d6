"""Writes cases.json: Einsum equations with random inputs and numpy's
einsum of them (float64), for TestEinsumNumpy.

Run with any Python that has numpy: python3 gen.py
"""
import json

import numpy as np

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bhqk,bhkd->bqhd", [(1, 2, 3, 4), (1, 2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->ji", [(3, 3, 2)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i...,i...->...", [(3, 2, 2), (3, 2, 1)]),
    ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 2)]),
    ("ab,cd,bd->ac", [(2, 3), (4, 5), (3, 5)]),
    ("abc,abd->cd", [(2, 3, 4), (2, 3, 5)]),
    ("ijk,ikl,il->ij", [(2, 3, 4), (2, 4, 5), (2, 5)]),
    ("Bi,iA", [(2, 3), (3, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
]


def main():
    rng = np.random.default_rng(12)
    out = []
    for eq, shapes in CASES:
        xs = [rng.standard_normal(s) for s in shapes]
        y = np.asarray(np.einsum(eq, *xs))
        out.append({
            "equation": eq,
            "inputs": [{"shape": list(x.shape), "data": x.ravel().tolist()} for x in xs],
            "output": {"shape": list(y.shape), "data": y.ravel().tolist()},
        })
    with open("cases.json", "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(c) for c in out) + "\n]\n")


if __name__ == "__main__":
    main()
