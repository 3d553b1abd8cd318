"""Lark tree -> type-info AST: the only module of the type-info language that imports lark.

It builds the LALR parser for ``grammars/type_info.lark`` once (strict, so a grammar conflict fails
loudly) and turns its parse tree into the frozen dataclasses of :mod:`.type_info`. Lark's exceptions
never escape: a syntax error becomes a :class:`TreeSpecNameError` positioned at the offending
character with the expected tokens named for people, and the semantic checks the grammar cannot
express (the count of ``dict__N`` equals its keys, keys are distinct, a legacy ``DynamicCache__N``
has an even N, the layer limit) raise the same error at the offending token.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from . import type_info as ti
from ._grammar import build_parser
from .errors import TreeSpecNameError

# How each terminal is named in an error message ("expected a count or 'D', got 'x'").
_DISPLAY = {
    "TENSOR": "'Tensor'",
    "NONE": "'None'",
    "BOOL": "'bool'",
    "INT": "'int'",
    "FLOAT": "'float'",
    "LIST_PREFIX": "'list__'",
    "DICT_PREFIX": "'dict__'",
    "DYNAMIC_CACHE": "'DynamicCache'",
    "ENCODER_DECODER_CACHE": "'EncoderDecoderCache'",
    "USCORE": "'_'",
    "DUNDER": "'__'",
    "FULL": "'D'",
    "FULL_EMPTY": "'d'",
    "SLIDING": "'W'",
    "SLIDING_EMPTY": "'w'",
    "ZERO": "'0'",
    "COUNT": "a positive integer",
    "KEY": "a dict key",
    "TREESPEC_NAME": "a TreeSpec name",
    "WITH_CACHES": "'WithCaches'",
    "$END": "end of input",
    "<END-OF-FILE>": "end of input",
}


class _SemanticError(Exception):
    """Raised inside the transformer; carries the message and the offending token's offset."""

    def __init__(self, msg: str, pos: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.pos = pos


def _layers_limit(n: int, pos: int) -> None:
    if n > ti.MAX_CACHE_LAYERS:
        raise _SemanticError(
            f"a cache may describe at most MAX_CACHE_LAYERS={ti.MAX_CACHE_LAYERS} layers, got {n}", pos
        )


@v_args(inline=True)
class _ToAst(Transformer[Token, ti.TypeInfo]):
    """Bottom-up: tokens -> ints and strings -> layers -> one TypeInfo node."""

    def start(self, node: ti.TypeInfo) -> ti.TypeInfo:
        return node

    def tensor(self, _tok: Token) -> ti.TypeInfo:
        return ti.TensorInfo()

    def none(self, _tok: Token) -> ti.TypeInfo:
        return ti.NoneInfo()

    def scalar(self, tok: Token) -> ti.TypeInfo:
        return ti.ScalarInfo(str(tok))

    def count(self, tok: Token) -> Token:
        return tok

    def tensor_list(self, _prefix: Token, count: Token) -> ti.TypeInfo:
        return ti.TensorListInfo(int(count))

    def key(self, tok: Token) -> Token:
        return tok

    def tensor_dict(self, _prefix: Token, count: Token, _sep: Token, *rest: Token) -> ti.TypeInfo:
        keys = [tok for tok in rest if tok.type == "KEY"]
        if int(count) != len(keys):
            raise _SemanticError(
                f"dict__{count} announces {count} keys but {len(keys)} follow", count.start_pos or 0
            )
        seen: set[str] = set()
        for tok in keys:
            if str(tok) in seen:
                raise _SemanticError(f"duplicate dict key {str(tok)!r}", tok.start_pos or 0)
            seen.add(str(tok))
        return ti.TensorDictInfo(tuple(str(tok) for tok in keys))

    # layers ------------------------------------------------------------------------------------

    def full(self, _tok: Token) -> ti.CacheLayer:
        return ti.CacheLayer(None, True)

    def full_empty(self, _tok: Token) -> ti.CacheLayer:
        return ti.CacheLayer(None, False)

    def sliding(self, _tok: Token, window: Token) -> ti.CacheLayer:
        return ti.CacheLayer(int(window), True)

    def sliding_empty(self, _tok: Token, window: Token) -> ti.CacheLayer:
        return ti.CacheLayer(int(window), False)

    @v_args(inline=False, meta=True)
    def group(self, meta: Any, items: list[Any]) -> tuple[Token | None, ti.CacheLayer, int]:
        if len(items) == 2:
            return items[0], items[1], meta.start_pos
        return None, items[0], meta.start_pos

    def no_layers(self, _tok: Token) -> ti.DynamicCacheInfo:
        return ti.DynamicCacheInfo(())

    def layers(self, *items: Any) -> ti.DynamicCacheInfo:
        total = 0
        runs: list[ti.LayerRun] = []
        for item in items:
            if isinstance(item, Token):  # the "_" between groups
                continue
            count, layer, start = item
            n = 1 if count is None else int(count)
            total += n
            _layers_limit(total, start)
            if runs and runs[-1].layer == layer:  # a non-canonical "D_D" is read as "2D"
                runs[-1] = ti.LayerRun(runs[-1].count + n, layer)
            else:
                runs.append(ti.LayerRun(n, layer))
        return ti.DynamicCacheInfo(tuple(runs))

    def dynamic_cache(self, _name: Token, _sep: Token, cache: ti.DynamicCacheInfo) -> ti.TypeInfo:
        return cache

    def legacy_cache(self, _name: Token, _sep: Token, count: Token) -> ti.TypeInfo:
        n = int(count)
        if n % 2:
            raise _SemanticError(
                f"DynamicCache__{n}: the legacy form counts tensors, a key and a value per layer, "
                "so it must be even",
                count.start_pos or 0,
            )
        _layers_limit(n // 2, count.start_pos or 0)
        return ti.DynamicCacheInfo((ti.LayerRun(n // 2, ti.CacheLayer(None, True)),) if n else ())

    def legacy_blocked_cache(self, _name: Token, _sep: Token, keys: Token, _sep2: Token, values: Token) -> ti.TypeInfo:
        raise _SemanticError(
            f"DynamicCache__{keys}_{values} is the older spelling with all keys first, then all values; "
            "it is not read, write the cache's type-info again with type_as_str_with_info",
            0,
        )

    def encoder_decoder_cache(
        self,
        _name: Token,
        _sep: Token,
        self_cache: ti.DynamicCacheInfo,
        _sep2: Token,
        cross_cache: ti.DynamicCacheInfo,
    ) -> ti.TypeInfo:
        return ti.EncoderDecoderCacheInfo(self_cache, cross_cache)

    def cache_leaf(self, index: Token, _sep: Token, cache: ti.TypeInfo) -> tuple[Token, ti.TypeInfo]:
        return index, cache

    def with_caches(self, _name: Token, *items: Any) -> ti.TypeInfo:
        *leaves, tok = items
        tree = _treespec_info(tok)
        caches: list[ti.CacheLeaf] = []
        for item in leaves:
            if isinstance(item, Token):  # the "__" between cache leaves
                continue
            index_tok, cache = item
            index = int(index_tok)
            if caches and index <= caches[-1].index:
                raise _SemanticError(
                    f"cache leaf {index} after leaf {caches[-1].index}: leaf indices must increase",
                    index_tok.start_pos or 0,
                )
            if index >= tree.n_leaves:
                raise _SemanticError(
                    f"cache leaf {index} is out of range: the TreeSpec name has {tree.n_leaves} leaves",
                    index_tok.start_pos or 0,
                )
            caches.append(ti.CacheLeaf(index, cache))
        return ti.TreeWithCachesInfo(tuple(caches), tree)

    def treespec(self, tok: Token) -> ti.TypeInfo:
        return _treespec_info(tok)


def _treespec_info(tok: Token) -> ti.TreeSpecInfo:
    # Imported here: decoding a TreeSpec name needs torch, every other form does not.
    from .treespec_name import tree_spec_from_name

    try:
        n_leaves, spec = tree_spec_from_name(str(tok))
    except TreeSpecNameError as err:
        if tok.start_pos:  # inside WithCaches: report the position in the whole type-info string
            raise _SemanticError(err.msg, tok.start_pos + err.pos) from None
        raise
    return ti.TreeSpecInfo(str(tok), n_leaves, spec)


_PARSER: Any = None


def _parser() -> Any:
    global _PARSER
    if _PARSER is None:
        _PARSER = build_parser(
            "type_info", parser="lalr", maybe_placeholders=False, propagate_positions=True
        )
    return _PARSER


def _expected(names: Any) -> list[str]:
    shown = sorted({_DISPLAY.get(name, name) for name in names})
    return shown


def _join(shown: list[str]) -> str:
    if len(shown) <= 1:
        return "".join(shown)
    return ", ".join(shown[:-1]) + " or " + shown[-1]


def _syntax_error(text: str, err: UnexpectedInput) -> TreeSpecNameError:
    if isinstance(err, UnexpectedToken):
        expected = _expected(err.accepts or err.expected)
        pos = len(text) if err.token.type == "$END" else (err.token.start_pos or 0)
        got = "end of input" if err.token.type == "$END" else repr(str(err.token))
    elif isinstance(err, UnexpectedCharacters):
        expected = _expected(err.allowed or ())
        pos = err.pos_in_stream or 0
        got = repr(text[pos])
    elif isinstance(err, UnexpectedEOF):
        expected = _expected(err.expected)
        pos = len(text)
        got = "end of input"
    else:  # pragma: no cover - lark has no other subclass
        expected, pos, got = [], 0, "unexpected input"
    if not text:
        return TreeSpecNameError("empty type-info string", text, 0, tuple(expected))
    return TreeSpecNameError(f"expected {_join(expected)}, got {got}", text, pos, tuple(expected))


def parse(text: str) -> ti.TypeInfo:
    """Parse ``text`` into a TypeInfo node; raise TreeSpecNameError on any malformed input."""
    try:
        tree = _parser().parse(text)
        return _ToAst().transform(tree)
    except UnexpectedInput as err:
        raise _syntax_error(text, err) from None
    except VisitError as err:
        inner = err.orig_exc
        if isinstance(inner, _SemanticError):
            raise TreeSpecNameError(inner.msg, text, inner.pos) from None
        if isinstance(inner, TreeSpecNameError):
            raise inner from None
        raise
