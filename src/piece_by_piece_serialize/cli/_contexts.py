"""Where a schema was written, as a context name, and what each context means to torch's parser.

A context is the call or file form a schema was found in (a YAML ``func:`` entry, C++ ``m.def``,
``torch.library.define`` ...). It decides whether type variables are allowed, whether the operator name
may be left out and whether a bare operator name stands in for a schema. The readers in :mod:`.sources`
tag each site with one; :mod:`._check` and :mod:`._lint` read the tag. Kept apart from the readers so
that the lint rules depend on these names only, not on how files are read.

Imports: nothing (the standard library only).
"""

from __future__ import annotations

__all__ = [
    "CONTEXT_C10_SCHEMA",
    "CONTEXT_CPP",
    "CONTEXT_CUSTOM_OP",
    "CONTEXT_JIT_PARSE_SCHEMA",
    "CONTEXT_JIT_PARSE_SCHEMA_OR_NAME",
    "CONTEXT_LIBRARY_DEFINE",
    "CONTEXT_PARSE_SCHEMA",
    "CONTEXT_SCHEMA_FUNCTION",
    "CONTEXT_TEXT",
    "CONTEXT_TORCH_LIBRARY_DEFINE",
    "CONTEXT_TORCH_SCHEMA",
    "CONTEXT_YAML",
    "NAMELESS",
    "NAME_ONLY",
    "NAME_OPTIONAL",
    "TYPEVARS_OFF",
]

# Contexts: where a schema was found decides how torch will parse it.
CONTEXT_TEXT = "text"
CONTEXT_YAML = "yaml"
CONTEXT_CPP = "cpp"  # TORCH_LIBRARY m.def / TORCH_SELECTIVE_SCHEMA: type variables are off
CONTEXT_TORCH_SCHEMA = "torch::schema"  # torch::schema(str, kind, allow_typevars=false)
CONTEXT_C10_SCHEMA = "c10::schema"
CONTEXT_JIT_PARSE_SCHEMA = "torch::jit::parseSchema"  # parseSchema(str, allow_typevars=true)
CONTEXT_JIT_PARSE_SCHEMA_OR_NAME = "torch::jit::parseSchemaOrName"
CONTEXT_LIBRARY_DEFINE = "Library.define"  # typevars off, full name optional
CONTEXT_TORCH_LIBRARY_DEFINE = "torch.library.define"  # nameless "(...) -> ..." schema, typevars off
CONTEXT_CUSTOM_OP = "custom_op"  # nameless schema, validated with typevars on, defined with them off
CONTEXT_PARSE_SCHEMA = "parse_schema"  # torch._C.parse_schema: typevars on
# A project's own helper named with --schema-function / schema-functions (executorch's register_fake_tosa_op):
# such helpers end in Library.define or torch.library.define, so type variables are off; whether the operator
# name is written depends on the helper, so both forms are read.
CONTEXT_SCHEMA_FUNCTION = "schema function"

# Contexts whose text torch defines through the dispatcher, where type variables are rejected.
TYPEVARS_OFF = frozenset(
    {
        CONTEXT_CPP,
        CONTEXT_TORCH_SCHEMA,
        CONTEXT_C10_SCHEMA,
        CONTEXT_LIBRARY_DEFINE,
        CONTEXT_TORCH_LIBRARY_DEFINE,
        CONTEXT_CUSTOM_OP,
        CONTEXT_SCHEMA_FUNCTION,
    }
)
# Contexts where the operator name may be written or left out.
NAME_OPTIONAL = frozenset({CONTEXT_TEXT, CONTEXT_SCHEMA_FUNCTION})
# Contexts whose text is a schema without the operator name.
NAMELESS = frozenset({CONTEXT_TORCH_LIBRARY_DEFINE, CONTEXT_CUSTOM_OP})
# Contexts that also take a bare operator name (torch infers the schema from the C++ function).
NAME_ONLY = frozenset({CONTEXT_CPP, CONTEXT_JIT_PARSE_SCHEMA_OR_NAME})
