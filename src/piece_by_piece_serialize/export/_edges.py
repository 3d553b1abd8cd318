"""The points at the edges of the domains of a piece's programs by size, where the points of the declared ranges
give no program for a side of a branch (Note [edges of a domain]), for :mod:`._ranges`' checks.

Note [edges of a domain]
~~~~~~~~~~~~~~~~~~~~~~~~
A point that moves one dimension of an example reaches a branch on one size; Llama 4's mask also branches on the sum
of two (``past + new == 15``, one short of its chunk: torch keeps ``8 * (past + new) != 120``), and on a bound one
domain derives from another dimension (``past <= 12`` where more than one token is new), which no such point
crossed. The domains of the programs by size say where those branches are: each condition of a domain, read with the
sizes of the piece's call in an example, changes its truth value at some size of the dimensions it reads
(:meth:`..domains.Domain.edges`, which moves together the sizes the domain holds equal: a cache's keys with its
count): where the condition compares affine functions of the moved size (the sum's ``!=``), the sizes where it
changes are solved for, at any distance; other forms (a division, a remainder) are scanned near the example, then at
doubling distances. So once the points of every example are checked, each example's call of the piece is moved to
each side of each such edge, each size through the model's dimensions it follows (equal to it in every example), and
the points whose call no domain holds are checked as the others are (those of the same size moved alike first, then
alone), each giving the piece a program by size where none holds; again while a round gives a program (at most
:data:`ROUNDS`), as a new domain has edges of its own. Only sizes between those the examples span are moved to: past
them, a piece that loops in Python over blocks of its sequence would get a program per block count (MiniMax's
lightning attention reached :data:`._by_size.MOST` from one example of 6 positions and lost them all), and no point
past the most programs a piece may have is tried. Llama 4's decode step gets 7 programs by size and its archive
computes all 92 of the calls above, in a fresh process and in onnxruntime; a piece whose domains hold one size of a
dimension (a loop unrolled, Note [one size per program]) has no edge there, as every other size is one.

Imports: the modules of this package below :mod:`._job` (:mod:`._alone`, :mod:`._by_size`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ._alone import first_call
from ._by_size import MOST, BySize, shapes_of

ROUNDS = 3  # rounds of points at the edges, each after the last gave a piece a program

Shapes = list[tuple[int, ...]]
# for each piece by size: its call's flat input shapes in each example that makes one, and the model's dimensions
# each size of those calls follows
Followed = dict[str, tuple[dict[int, Shapes], dict[tuple[int, int], set[str]]]]


def followed(by_size: Mapping[str, BySize], wrappers: Mapping[str, Any], recordings: Sequence[Any],
             every: Sequence[Mapping[str, tuple[int, Any]]]) -> Followed:  # fmt: skip
    """For each piece by size: the flat input shapes (weights first) of its first call of the structure its programs
    compute, in each example that makes one (``recordings``: each example's), and the model's dimensions (of
    ``every``: each example's groups) each size of those calls but the weights' follows: equal to it in every one
    of those examples."""
    out: Followed = {}
    for path, sized in by_size.items():
        op = wrappers[path]._pbp_op
        calls = {}
        for k, recording in enumerate(recordings):
            first = first_call(recording, path, op, sized.key)
            if first is not None:
                calls[k] = shapes_of(op.weights_of(), first[1].tensors)
        if calls:
            shapes = next(iter(calls.values()))
            follows = {(j, d): {n for n in every[0] if all(every[k][n][0] == calls[k][j][d] for k in calls)}
                       for j in range(len(sized.names), len(shapes)) for d in range(len(shapes[j]))}  # fmt: skip
            out[path] = (calls, follows)
    return out


def edge_points(i: int, every: Sequence[Mapping[str, tuple[int, Any]]], pieces: Followed, by_size: Mapping[str, BySize],
                scanned: set[tuple[str, int, int]]) -> Iterator[list[dict[str, int]]]:  # fmt: skip
    """Example ``i``'s sizes with the model's dimensions moved that the sizes each piece by size's domains hold equal
    follow (``pieces``: :func:`followed`'s), to each side of each of their edges, between the sizes the examples
    span (``every``: each example's groups): for each point, the sizes to try in turn. Each is made when the last
    is checked, as that one may have given the piece the program that holds the next. A domain is read once for an
    example (``scanned``: the piece, the example and the program's place, of the rounds before): a later round reads
    the new programs' (its points were tried, held by a domain, or past the most programs, which more programs
    do not change)."""
    dims, points = every[i], []
    # the sizes of each dimension the examples span: past them, a loop unrolled would get a program per step
    hull = {n: (min(e[n][0] for e in every), max(e[n][0] for e in every)) for n in dims}
    low, high = min((a for a, _ in hull.values()), default=1), max((b for _, b in hull.values()), default=1)
    for path, sized in list(by_size.items()):
        calls, follows = pieces.get(path, ({}, {}))
        if i not in calls:
            continue
        for index, (_, domain, _) in enumerate(list(sized.programs)):
            if (path, i, index) in scanned:
                continue
            scanned.add((path, i, index))
            for sizes, values in domain.edges(calls[i], len(sized.names), low, high).items():
                moving = set().union(*(follows[at.input, at.dim] for at in sizes))
                if not moving or not all(follows[at.input, at.dim] for at in sizes):
                    continue  # a size of the piece no dimension of the model's gives: no point moves it
                for value in sorted(values):
                    point = {n: value for n in sorted(moving)}
                    if not all(hull[n][0] <= value <= hull[n][1] for n in moving) or point in points or len(sized.programs) >= MOST:
                        continue  # between the examples' sizes only, and never past the most programs a piece has
                    # with the dimensions of the same size first (a cache's keys with its count), as eager refuses a
                    # cache whose keys moved alone; then alone
                    alike = {n: value for n, (s, _) in dims.items() if s in {dims[m][0] for m in moving}}
                    # the piece's call at each: one a domain holds is checked by the points of the ranges; a program
                    # is what a point at an edge is for
                    tries = [t for t in ([alike, point] if alike != point else [point]) if sized.choose(_there(calls[i], follows, t)) is None]
                    if tries:
                        points.append(point)
                        yield tries


def _there(shapes: Sequence[tuple[int, ...]], follows: Mapping[tuple[int, int], set[str]], point: Mapping[str, int]) -> Shapes:
    """A piece's call's ``shapes`` at ``point``: each size that ``follows`` a model's dimension the point moves, moved."""
    return [tuple(next((point[n] for n in follows.get((j, d), ()) if n in point), s) for d, s in enumerate(shape)) for j, shape in enumerate(shapes)]
