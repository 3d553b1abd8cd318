"""The ONNX optimizer the writer runs: onnxscript's, as torch.onnx runs it, in time linear in the graph.

Note [a linear optimizer]
~~~~~~~~~~~~~~~~~~~~~~~~~
``torch.onnx.export(optimize=True)`` runs onnxscript's ``optimize_ir``: function inlining, then twice constant
folding, its default rewrite rules and the removal of what became unused, then its clean-up passes. One default
rule, ``SlicesSplit`` (two ``Slice`` nodes taking the two halves of a tensor's last dimension become one
``Split``), has a pattern of two output nodes, and onnxscript matches such a pattern by building, for every node
of the graph, a table of every node of the graph and trying each pair (its comment: "potentially expensive"). The
optimization then grows with the square of the graph: the automatic decode step of a tiny Qwen3-Next, one program
of 16,425 ONNX nodes (1,011 ``Slice``), took 129 s in ``optimize_ir`` and 7.5 s without that rule, to the same
4,957 nodes; its ``to_onnx`` went from 202 s to 80 s (Note [identical pieces] keeps the functions of a cut model
small; a model exported in one program, or a large piece, has no such luck).

So :func:`optimize` runs the same passes in the same order with the same options, and the default rules less
those whose pattern has more than one output node (``SlicesSplit`` in onnxscript 0.7). What is lost is that
rewrite: such a pair of ``Slice`` nodes stays two nodes, computing the same values. ``should_fold`` is
``optimize_ir``'s (Note [external weights] in :mod:`.` uses it to keep weights as the model holds them).
The constant folder's warnings about nodes it leaves as they are (``Skipping constant folding for op SequenceEmpty
with multiple outputs``, twice per ``Loop`` a translation writes) say nothing a user can act on, and with no logging
configured Python prints them on stderr: then, and only then (no handler on the root logger, no level set on the
folder's), they go nowhere while it runs.

Imports: onnxscript and onnx_ir (the onnx extra), on use; nothing of the library.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any


def _default_folding(node: Any) -> bool | None:
    return None  # onnxscript's own rules


def linear_rules() -> list[Any]:
    """onnxscript's default rewrite rules whose patterns have one output node (Note [a linear optimizer])."""
    from onnxscript import rewriter

    # onnxscript names no public list of its defaults nor of a rule's pattern: both are read where optimize_ir
    # reads them, and tests/onnx_export/test_optimize.py fails if either moves
    return [rule for rule in rewriter._DEFAULT_REWRITE_RULES if rule._target_pattern.has_single_output_node]


def optimize(model: Any, should_fold: Callable[[Any], bool | None] = _default_folding) -> None:
    """``onnxscript.optimizer.optimize_ir(model, should_fold=should_fold)``, in place, without the rules that make
    it quadratic (Note [a linear optimizer])."""
    import onnx_ir as ir
    import onnx_ir.passes.common as common
    from onnxscript import rewriter
    from onnxscript.optimizer import _constant_folding

    loop = ir.passes.PassManager(
        [
            _constant_folding.FoldConstantsPass(
                shape_inference=True,
                input_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
                output_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
                should_fold=should_fold,
            ),
            rewriter.RewritePass(linear_rules()),
            common.RemoveUnusedNodesPass(),
            common.RemoveUnusedFunctionsPass(),  # type: ignore[no-untyped-call]  # unannotated in onnx_ir
            common.RemoveUnusedOpsetsPass(),
        ],
        steps=2,
        early_stop=True,
    )
    passes = ir.passes.Sequential(
        common.InlinePass(),
        loop,
        common.RemoveUnusedNodesPass(),
        common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common.LiftSubgraphInitializersToMainGraphPass(),
        common.DeduplicateInitializersPass(),
        common.CommonSubexpressionEliminationPass(),
        common.OutputFixPass(),
        common.NameFixPass(),
    )
    with _quiet(_constant_folding.logger):
        passes(model)


@contextlib.contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """``logger`` passes on errors only, for the time of the block, unless logging is configured."""
    level = logger.level
    if level != logging.NOTSET or logging.getLogger().handlers:
        yield
        return
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
