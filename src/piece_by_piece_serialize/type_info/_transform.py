"""Type-info text -> AST: the parser of ``grammars/type_info.lark`` and the callbacks that build the AST.

The engine (:mod:`.._lalr.engine`, running the tables lark computes from the grammar, contextual lexer; see
:mod:`.._lalr.build`) calls the callbacks of :class:`_ToAst` bottom-up, one per rule, and they build the frozen
dataclasses of :mod:`._ast`; lark is not imported. A syntax error becomes a :class:`TreeSpecNameError`
positioned at the offending character with the expected tokens named for people, and the semantic checks the
grammar cannot express (the count of ``dict__N`` equals its keys, keys are distinct, a legacy ``DynamicCache__N``
has an even N, the layer limit) raise the same error at the offending token.

Invariant: a text with a syntax error anywhere reports that syntax error, even when a semantic check of an earlier
part fails first (the checks run during the parse): the text is then parsed again without them
(Note [syntax errors first]).

Imports: the engine and its tables (:mod:`.._lalr`), the error class, the AST (:mod:`._ast`) and the cache
vocabulary (:mod:`._cache_kinds`); :mod:`..treespec_name` only when a ``___`` TreeSpec name is read (torch only
when it is decoded into a TreeSpec, not when it is only shown).
Never the package ``__init__`` (which imports this module on first parse), never lark.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .._diagnostics import Refused, join_or
from .._lalr.choice import Engine, Failure, Token
from .._lalr.tables import load
from ..errors import TreeSpecNameError
from . import _ast as ti
from ._cache_kinds import STATE_PARAMS

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
    "KV_SHARING_DICT": "'KVSharingDict'",
    "$END": "end of input",
    "<END-OF-FILE>": "end of input",
}


def _layers_limit(n: int, pos: int) -> None:
    if n > ti.MAX_CACHE_LAYERS:
        raise Refused(
            f"a cache may describe at most MAX_CACHE_LAYERS={ti.MAX_CACHE_LAYERS} layers, got {n}", pos
        )


_Param = tuple[str, int | None, int]  # a parameter's letter, its number and the letter's offset
_Body = tuple[list[_Param], tuple[ti.LayerRun, ...]]  # a layer list: options group, layers
_Group = tuple[int, ti.LayerInfo, int]  # a layer group: its count, its layer and its offset


class _ToAst:
    """Bottom-up: tokens -> ints and strings -> layers -> one TypeInfo node. Each method takes the rule's
    children as the engine gives them (named tokens kept) and returns the rule's value. With ``resolve`` False,
    a ``___`` TreeSpec name is checked and its leaves counted but no TreeSpec is built (no torch: the views)."""

    def __init__(self, resolve: bool = True) -> None:
        self.resolve = resolve

    def start(self, c: list[ti.TypeInfo]) -> ti.TypeInfo:
        return c[0]

    def tensor(self, c: list[Token]) -> ti.TypeInfo:
        return ti.TensorInfo()

    def none(self, c: list[Token]) -> ti.TypeInfo:
        return ti.NoneInfo()

    def scalar(self, c: list[Token]) -> ti.TypeInfo:
        return ti.ScalarInfo(c[0].value)

    def count(self, c: list[Token]) -> Token:
        return c[0]

    def tensor_list(self, c: list[Token]) -> ti.TypeInfo:
        return ti.TensorListInfo(int(c[1].value))

    def key(self, c: list[Token]) -> Token:
        return c[0]

    def tensor_dict(self, c: list[Token]) -> ti.TypeInfo:
        count = c[1]
        keys = [tok for tok in c[3:] if tok.type == "KEY"]
        if int(count.value) != len(keys):
            raise Refused(
                f"dict__{count.value} announces {count.value} keys but {len(keys)} follow", count.start_pos
            )
        seen: set[str] = set()
        for tok in keys:
            if tok.value in seen:
                raise Refused(f"duplicate dict key {tok.value!r}", tok.start_pos)
            seen.add(tok.value)
        return ti.TensorDictInfo(tuple(tok.value for tok in keys))

    def kv_sharing(self, c: list[Any]) -> ti.TypeInfo:
        count = c[2]
        keys = [tok for tok in c[3:] if isinstance(tok, Token) and tok.type == "KEY"]
        counts = [tok for tok in c[3:] if isinstance(tok, Token) and tok.type in ("COUNT", "ZERO")]
        if int(count.value) != len(keys):
            raise Refused(f"KVSharingDict_{count.value} announces {count.value} keys but {len(keys)} follow", count.start_pos)
        seen: set[str] = set()
        for tok in keys:
            if tok.value in seen:
                raise Refused(f"duplicate key {tok.value!r}", tok.start_pos)
            seen.add(tok.value)
        return ti.KVSharingInfo(tuple((k.value, int(n.value)) for k, n in zip(keys, counts, strict=True)))

    # caches ------------------------------------------------------------------------------------

    def param(self, c: list[Token]) -> _Param:
        letter = c[0]
        return letter.value, (int(c[1].value) if len(c) > 1 else None), letter.start_pos

    def options(self, c: list[Any]) -> list[_Param]:
        return list(c[1:])

    def state(self, c: list[Any]) -> ti.LinearState:
        head: Token = c[0]  # the "s"
        params: list[_Param] = c[1:]
        try:
            return ti.LinearState._of_params(ti._normalise_params(
                [(letter, value) for letter, value, _ in params], STATE_PARAMS, "a recurrent state 's'"
            ))
        except ValueError as err:
            raise Refused(str(err), head.start_pos) from None

    def group(self, c: list[Any]) -> _Group:
        count = 1
        number: int | None = None
        kind: Token | None = None
        params: list[tuple[str, int | None]] = []
        states: list[ti.LinearState] = []
        for item in c:
            if isinstance(item, Token):
                if item.type == "COUNT":
                    count = int(item.value)
                elif item.type == "LAYER_KIND":
                    kind = item
                else:  # NUMBER
                    number = int(item.value)
            elif isinstance(item, ti.LinearState):
                states.append(item)
            else:
                params.append(item[:2])
        if kind is None:  # pragma: no cover - the grammar requires it
            raise TypeError("a layer group without a layer kind")
        code = kind.value
        try:
            layer = ti.LayerInfo(code.upper(), code.isupper(), number, tuple(params), tuple(states))
        except ValueError as err:
            raise Refused(str(err), kind.start_pos) from None
        first: Token = c[0]  # COUNT or LAYER_KIND: where the group starts
        return count, layer, first.start_pos

    def no_layers(self, c: list[Token]) -> list[_Group]:
        return []

    def layers(self, c: list[Any]) -> list[_Group]:
        return [item for item in c if not isinstance(item, Token)]  # drop the "_" between groups

    def layer_list(self, c: list[Any]) -> _Body:
        options: list[_Param] = []
        if len(c) > 1:  # options, "_", layers
            options = c[0]
        total = 0
        runs: list[ti.LayerRun] = []
        for count, layer, start in c[-1]:
            total += count
            _layers_limit(total, start)
            if runs and runs[-1].layer == layer:  # a non-canonical "D_D" is read as "2D"
                runs[-1] = ti.LayerRun(runs[-1].count + count, layer)
            else:
                runs.append(ti.LayerRun(count, layer))
        return options, tuple(runs)

    def cache(self, c: list[Any]) -> ti.CacheInfo:
        return _cache_info(c[0], c[2])

    def legacy_cache(self, c: list[Token]) -> ti.TypeInfo:
        name, count = c[0], c[2]
        _legacy_name(name, f"{name.value}__{count.value}")
        n = int(count.value)
        if n % 2:
            raise Refused(
                f"DynamicCache__{n}: the legacy form counts tensors, a key and a value per layer, "
                "so it must be even",
                count.start_pos,
            )
        _layers_limit(n // 2, count.start_pos)
        return ti.CacheInfo("DynamicCache", (ti.LayerRun(n // 2, ti.LayerInfo()),) if n else ())

    def legacy_blocked_cache(self, c: list[Token]) -> ti.TypeInfo:
        name, keys, values = c[0], c[2], c[4]
        _legacy_name(name, f"{name.value}__{keys.value}_{values.value}")
        raise Refused(
            f"DynamicCache__{keys.value}_{values.value} is the older spelling with all keys first, then all "
            "values; it is not read, write the cache's type-info again with type_as_str_with_info",
            0,
        )

    def pair_of_layers(self, c: list[Any]) -> ti.EncoderDecoderCacheInfo:
        name = c[0]
        return ti.EncoderDecoderCacheInfo(
            _cache_info(name, c[2], "DynamicCache"), _cache_info(name, c[4], "DynamicCache")
        )

    def pair_of_caches(self, c: list[Any]) -> ti.EncoderDecoderCacheInfo:
        return ti.EncoderDecoderCacheInfo(c[2], c[4])

    def cache_leaf(self, c: list[Any]) -> tuple[Token, ti.AnyCacheInfo]:
        return c[0], c[2]

    def with_caches(self, c: list[Any]) -> ti.TypeInfo:
        tok: Token = c[-1]
        tree = _treespec_info(tok, self.resolve)
        caches: list[ti.CacheLeaf] = []
        for item in c[1:-1]:
            if isinstance(item, Token):  # the "__" between cache leaves
                continue
            index_tok, cache = item
            index = int(index_tok.value)
            if caches and index <= caches[-1].index:
                raise Refused(
                    f"cache leaf {index} after leaf {caches[-1].index}: leaf indices must increase",
                    index_tok.start_pos,
                )
            if index >= tree.n_leaves:
                raise Refused(
                    f"cache leaf {index} is out of range: the TreeSpec name has {tree.n_leaves} leaves",
                    index_tok.start_pos,
                )
            caches.append(ti.CacheLeaf(index, cache))
        return ti.TreeWithCachesInfo(tuple(caches), tree)

    def treespec(self, c: list[Token]) -> ti.TypeInfo:
        return _treespec_info(c[0], self.resolve)


def _cache_info(name: Token, body: _Body, as_name: str | None = None) -> ti.CacheInfo:
    options, runs = body
    try:
        return ti.CacheInfo(as_name or name.value, runs, tuple((letter, value) for letter, value, _ in options))
    except ValueError as err:
        pos = options[0][2] if options and "options" in str(err) else name.start_pos
        raise Refused(str(err), pos) from None


def _legacy_name(name: Token, text: str) -> None:
    if name.value != "DynamicCache":
        raise Refused(
            f"{text}: only DynamicCache has this legacy spelling; write {name.value}_<layers>", name.start_pos
        )


def _treespec_info(tok: Token, resolve: bool) -> ti.TreeSpecInfo:
    # Imported here: decoding a TreeSpec name needs torch, every other form does not; counting its leaves does not.
    from ..treespec_name import name_leaf_count, tree_spec_from_name

    try:
        n_leaves, spec = tree_spec_from_name(tok.value) if resolve else (name_leaf_count(tok.value), None)
    except TreeSpecNameError as err:
        if tok.start_pos:  # inside WithCaches: report the position in the whole type-info string
            raise Refused(err.msg, tok.start_pos + err.pos) from None
        raise
    return ti.TreeSpecInfo(tok.value, n_leaves, spec)


class _Shapes:
    """Callbacks that build only the shape of the parse: ``(rule, children)`` for every rule. They check nothing,
    so they tell a syntax error from a semantic one, and :func:`is_cache_name` reads the tree they build."""

    def __getattr__(self, rule: str) -> Callable[[list[Any]], tuple[str, list[Any]]]:
        if rule.startswith("__"):
            raise AttributeError(rule)
        return lambda children: (rule, children)


_lock = threading.Lock()
_engines: dict[str, Engine] = {}


def _engine(kind: str = "ast") -> Engine:
    """The engine building the AST (``"ast"``), the AST without building TreeSpecs (``"unresolved"``), or only
    the shape of the parse (``"shapes"``), each built once."""
    engine = _engines.get(kind)
    if engine is None:
        with _lock:
            engine = _engines.get(kind)
            if engine is None:
                callbacks = _ToAst(kind == "ast") if kind in ("ast", "unresolved") else _Shapes()
                engine = Engine(load("type_info"), callbacks)
                _engines[kind] = engine
    return engine


def _expected(names: Any) -> list[str]:
    return sorted({_DISPLAY.get(name, name) for name in names})


def _syntax_error(text: str, err: Failure, engine: Engine) -> TreeSpecNameError:
    if err.token is not None:
        # What the parser could really take here (an LALR state merged from several contexts lists look-aheads
        # that only one of them accepts), as lark's UnexpectedToken.accepts; its expected set when nothing is.
        expected = _expected(engine.accepts(err.states) or err.expected)
        if err.token.type == "$END":
            pos, got = len(text), "end of input"
        else:
            pos, got = err.token.start_pos, repr(err.token.value)
    else:  # no terminal of this state's lexer matches here
        expected = _expected(err.expected)
        pos = err.pos
        got = repr(text[pos])
    if not text:
        return TreeSpecNameError("empty type-info string", text, 0, tuple(expected))
    return TreeSpecNameError(f"expected {join_or(expected, empty='')}, got {got}", text, pos, tuple(expected))


# Note [syntax errors first]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# The callbacks of _ToAst check what the grammar cannot say (counts, duplicate keys, layer kinds, the TreeSpec name
# inside) as their rule is reduced, so a failed check stops the parse before the rest of the text is read. The
# language reports a syntax error anywhere in the text before any such check (the order the lark parser gave, which
# parsed the whole text before building the AST), so when a check fails the text is parsed again with _Shapes,
# which checks nothing: its syntax error, if any, is the error; else the check's. Among checks the first to fail
# is reported, in the order the rules are reduced: left to right, children before their parent.


def parse(text: str, *, resolve: bool = True) -> ti.TypeInfo:
    """Parse ``text`` into a TypeInfo node; raise TreeSpecNameError on any malformed input.

    ``resolve=False`` leaves the ``spec`` of a TreeSpec name ``None`` (its leaves are still counted and its
    spelling checked): what the views need, without torch and without resolving the types it names.
    """
    engine = _engine("ast" if resolve else "unresolved")
    try:
        result: ti.TypeInfo = engine.parse(text)
        return result
    except Failure as err:
        raise _syntax_error(text, err, engine) from None
    except (Refused, TreeSpecNameError) as err:
        semantic: Refused | TreeSpecNameError = err
    shapes = _engine("shapes")
    try:
        shapes.parse(text)
    except Failure as err:
        raise _syntax_error(text, err, shapes) from None
    if isinstance(semantic, Refused):
        raise TreeSpecNameError(semantic.msg, text, semantic.pos) from None
    raise semantic from None


def is_cache_name(name: str) -> bool:
    """Whether ``name`` is read back as one cache name token (``<name>_0`` is a cache of that name).

    Registration checks a new name with the grammar itself, so that every name it accepts is one the
    parser reads back whole (not cut by a longer literal such as ``EncoderDecoderCache``).
    """
    try:
        _, (node,) = _engine("shapes").parse(f"{name}_0")
    except Failure:
        return False
    rule, children = node
    first = children[0] if children else None
    return rule == "cache" and isinstance(first, Token) and first.type == "CACHE_NAME" and first.value == name
