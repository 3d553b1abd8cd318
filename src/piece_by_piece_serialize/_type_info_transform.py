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
    "CACHE_NAME": "a cache name such as 'DynamicCache'",
    "ENCODER_DECODER_CACHE": "'EncoderDecoderCache'",
    "USCORE": "'_'",
    "DUNDER": "'__'",
    "OPTIONS": "'O'",
    "LAYER_KIND": "a layer kind",
    "STATE": "'s'",
    "PARAM": "a parameter",
    "ZERO": "'0'",
    "COUNT": "a positive integer",
    "NUMBER": "a number",
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

    # caches ------------------------------------------------------------------------------------

    def param(self, letter: Token, *number: Token) -> tuple[str, int | None, int]:
        return str(letter), (int(number[0]) if number else None), letter.start_pos or 0

    def options(self, _tok: Token, *params: tuple[str, int | None, int]) -> list[tuple[str, int | None, int]]:
        return list(params)

    @v_args(inline=False, meta=True)
    def state(self, meta: Any, items: list[Any]) -> ti.LinearState:
        params = [item for item in items if not isinstance(item, Token)]
        try:
            return ti.LinearState._of_params(ti._normalise_params(
                [(letter, value) for letter, value, _ in params], ti.STATE_PARAMS, "a recurrent state 's'"
            ))
        except ValueError as err:
            raise _SemanticError(str(err), meta.start_pos) from None

    @v_args(inline=False, meta=True)
    def group(self, meta: Any, items: list[Any]) -> tuple[int, ti.LayerInfo, int]:
        count = 1
        number: int | None = None
        kind: Token | None = None
        params: list[tuple[str, int | None]] = []
        states: list[ti.LinearState] = []
        for item in items:
            if isinstance(item, Token):
                if item.type == "COUNT":
                    count = int(item)
                elif item.type == "LAYER_KIND":
                    kind = item
                else:  # NUMBER
                    number = int(item)
            elif isinstance(item, ti.LinearState):
                states.append(item)
            else:
                params.append(item[:2])
        assert kind is not None  # the grammar requires it
        code = str(kind)
        try:
            layer = ti.LayerInfo(code.upper(), code.isupper(), number, tuple(params), tuple(states))
        except ValueError as err:
            raise _SemanticError(str(err), kind.start_pos or 0) from None
        return count, layer, meta.start_pos

    def no_layers(self, _tok: Token) -> list[Any]:
        return []

    def layers(self, *items: Any) -> list[Any]:
        return [item for item in items if not isinstance(item, Token)]  # drop the "_" between groups

    @v_args(inline=False)
    def layer_list(self, items: list[Any]) -> tuple[list[Any], tuple[ti.LayerRun, ...]]:
        options: list[Any] = []
        if len(items) > 1:  # options, "_", layers
            options = items[0]
        total = 0
        runs: list[ti.LayerRun] = []
        for count, layer, start in items[-1]:
            total += count
            _layers_limit(total, start)
            if runs and runs[-1].layer == layer:  # a non-canonical "D_D" is read as "2D"
                runs[-1] = ti.LayerRun(runs[-1].count + count, layer)
            else:
                runs.append(ti.LayerRun(count, layer))
        return options, tuple(runs)

    def cache(self, name: Token, _sep: Token, body: tuple[list[Any], tuple[ti.LayerRun, ...]]) -> ti.TypeInfo:
        return _cache_info(name, body)

    def legacy_cache(self, name: Token, _sep: Token, count: Token) -> ti.TypeInfo:
        _legacy_name(name, f"{name}__{count}")
        n = int(count)
        if n % 2:
            raise _SemanticError(
                f"DynamicCache__{n}: the legacy form counts tensors, a key and a value per layer, "
                "so it must be even",
                count.start_pos or 0,
            )
        _layers_limit(n // 2, count.start_pos or 0)
        return ti.CacheInfo("DynamicCache", (ti.LayerRun(n // 2, ti.LayerInfo()),) if n else ())

    def legacy_blocked_cache(self, name: Token, _sep: Token, keys: Token, _sep2: Token, values: Token) -> ti.TypeInfo:
        _legacy_name(name, f"{name}__{keys}_{values}")
        raise _SemanticError(
            f"DynamicCache__{keys}_{values} is the older spelling with all keys first, then all values; "
            "it is not read, write the cache's type-info again with type_as_str_with_info",
            0,
        )

    def pair_of_layers(self, name: Token, _sep: Token, first: Any, _sep2: Token, second: Any) -> ti.TypeInfo:
        return _pair(_cache_info(name, first, "DynamicCache"), _cache_info(name, second, "DynamicCache"), name)

    def pair_of_caches(self, name: Token, _sep: Token, first: ti.CacheInfo, _sep2: Token, second: ti.CacheInfo) -> ti.TypeInfo:
        return _pair(first, second, name)

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


def _cache_info(name: Token, body: tuple[list[Any], tuple[ti.LayerRun, ...]], as_name: str | None = None) -> ti.CacheInfo:
    options, runs = body
    try:
        return ti.CacheInfo(as_name or str(name), runs, tuple((letter, value) for letter, value, _ in options))
    except ValueError as err:
        pos = options[0][2] if options and "options" in str(err) else (name.start_pos or 0)
        raise _SemanticError(str(err), pos) from None


def _legacy_name(name: Token, text: str) -> None:
    if str(name) != "DynamicCache":
        raise _SemanticError(f"{text}: only DynamicCache has this legacy spelling; write {name}_<layers>", name.start_pos or 0)


def _pair(first: ti.CacheInfo, second: ti.CacheInfo, name: Token) -> ti.EncoderDecoderCacheInfo:
    return ti.EncoderDecoderCacheInfo(first, second)


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


def is_cache_name(name: str) -> bool:
    """Whether ``name`` is read back as one cache name token (``<name>_0`` is a cache of that name).

    Registration checks a new name with the grammar itself, so that every name it accepts is one the
    parser reads back whole (not cut by a longer literal such as ``EncoderDecoderCache``).
    """
    try:
        tree = _parser().parse(f"{name}_0")
    except UnexpectedInput:
        return False
    node = tree.children[0]
    first = node.children[0] if node.children else None
    return getattr(node, "data", None) == "cache" and isinstance(first, Token) and first.type == "CACHE_NAME" and str(first) == name
