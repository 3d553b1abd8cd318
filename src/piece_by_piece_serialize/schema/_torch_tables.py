"""The constants of torch's schema parser and printer, each written down once (torch 2.13).

Sources: schema_type_parser.cpp (the type names), c10::getStringToDtypeMap and parseSingleConstant (the names a
default may be), c10::Device (device types), c10::TypeKind (the order of Union members), DictType::create (the
key types), parse_string_literal.h and printQuotedString (string escapes), and the C limits torch's number
conversion runs into. The parser (``_transform``, ``_literals``, ``_defaults``, ``_union``) reads these tables in
one direction and the printer (``_ast``, ``_values``) in the other, so both are derived here from one literal.

Invariants: plain data only; this module imports nothing from the package, so every other module may import it.
"""

from __future__ import annotations

import sys

# spelling -> canonical (printed) name
_BASE_TYPES = {
    "int": "int",
    "SymInt": "SymInt",
    "float": "float",
    "complex": "complex",
    "bool": "bool",
    "str": "str",
    "Scalar": "Scalar",
    "ScalarType": "ScalarType",
    "Layout": "Layout",
    "MemoryFormat": "MemoryFormat",
    "Device": "Device",
    "DeviceIndex": "int",
    "ConstQuantizerPtr": "int",
    "Generator": "Generator",
    "Quantizer": "Quantizer",
    "Storage": "Storage",
    "Stream": "Stream",
    "QScheme": "QScheme",
    "Capsule": "Capsule",
    "Any": "Any",
    "AnyClassType": "AnyClassType",
    "AnyEnumType": "AnyEnumType",
    "SymBool": "SymBool",
    "None": "NoneType",
    "NoneType": "NoneType",
}

# The default-value parser is chosen by the "fake" type: ScalarType, Layout and MemoryFormat defaults are ints.
_SCALAR_KINDS = {
    "int": "int",
    "SymInt": "int",
    "ScalarType": "int",
    "Layout": "int",
    "MemoryFormat": "int",
    "float": "float",
    "complex": "complex",
    "bool": "bool",
    "str": "str",
    "Scalar": "number",
    "Device": "device",
    "Tensor": "tensor",
    "Generator": "tensor",
    "Quantizer": "tensor",
}

# Identifiers accepted as a default for any type, and their codes.
_ENUM_DEFAULTS = {"float": 6, "complex": 9, "long": 4, "strided": 0, "Mean": 1, "contiguous_format": 0}

# Identifiers accepted as a ScalarType / ScalarType? default (c10::getStringToDtypeMap), and their codes.
_DTYPES = {
    "uint8": 0, "int8": 1, "int16": 2, "short": 2, "int32": 3, "int": 3, "int64": 4, "long": 4,
    "float16": 5, "half": 5, "float32": 6, "float": 6, "float64": 7, "double": 7,
    "complex32": 8, "chalf": 8, "complex64": 9, "cfloat": 9, "complex128": 10, "cdouble": 10,
    "bool": 11, "qint8": 12, "quint8": 13, "qint32": 14, "bfloat16": 15, "quint4x2": 16, "quint2x4": 17,
    "bits1x8": 18, "bits2x4": 19, "bits4x2": 20, "bits8": 21, "bits16": 22,
    "float8_e5m2": 23, "float8_e4m3fn": 24, "float8_e5m2fnuz": 25, "float8_e4m3fnuz": 26,
    "uint16": 27, "uint32": 28, "uint64": 29,
    "uint1": 30, "uint2": 31, "uint3": 32, "uint4": 33, "uint5": 34, "uint6": 35, "uint7": 36,
    "int1": 37, "int2": 38, "int3": 39, "int4": 40, "int5": 41, "int6": 42, "int7": 43,
    "float8_e8m0fnu": 44, "float4_e2m1fn_x2": 45,
}  # fmt: skip

# The inverse, for the printer: the identifier a code is written as. The first name of each code wins (0 prints
# as strided, not contiguous_format); reversed() makes the first name the last one written into the dict.
_ENUM_NAMES = {code: name for name, code in reversed(_ENUM_DEFAULTS.items())}


# c10::Device accepts these type names (privateuseone may be renamed at run time; not modelled).
_DEVICE_TYPES = frozenset(
    [
        "cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla",
        "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone"
    ]
)

# Order of members in a normalised Union: torch sorts them by c10::TypeKind, then (for equal kinds) by text.
_KIND_ORDER = {
    name: i
    for i, name in enumerate(
        [
            "Any", "AnyEnumType", "Tensor", "Storage", "Tuple", "List", "Dict", "Scalar", "float", "complex",
            "Future", "Await", "RRef", "int", "NoneType", "str", "Generator", "Quantizer", "bool", "Optional",
            "TypeVar", "Device", "Stream", "Class", "Capsule", "QScheme", "ScalarType", "Layout", "MemoryFormat",
            "AnyClassType", "SymInt", "SymBool", "Union"
        ]
    )
}

# DictType::create accepts only these key types ("Cannot create dict for key type ...").
_DICT_KEYS = frozenset(
    {"int", "SymInt", "float", "complex", "bool", "str", "Tensor", "Device", "Any", "ScalarType", "Layout", "MemoryFormat"}
)

# torch builds containers (tuples, Dict, Union, Future, Await, RRef) from the "fake" types of their members:
# SymInt, ScalarType, Layout and MemoryFormat become int there (Future(SymInt) prints as Future(int)), and the
# members' alias annotations are dropped.
_FAKE_INT = frozenset({"SymInt", "ScalarType", "Layout", "MemoryFormat"})

# String escapes: the character after a backslash -> the character it stands for. The lexer reads these (plus a
# line continuation) and the printer writes them, so the two cannot disagree.
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n", "v": "\v", "t": "\t"}

# C limits: std::stoll reads a 64-bit int, and below DBL_MIN a double is subnormal (where glibc's strtod reports
# ERANGE unless the result is exact, and where torch's %.17g output no longer reads back).
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_DBL_MIN = sys.float_info.min
