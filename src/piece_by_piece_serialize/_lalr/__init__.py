"""The parse engine shared by the five languages: a table-driven LALR(1) run time and the tables it runs.

``engine`` runs the tables; ``tables`` loads the generated module of each grammar at run time (no lark);
``build`` exports the tables that lark computes from ``grammars/*.lark`` into ``_generated/`` (``make tables``);
``grammar`` finds the grammar files and builds lark parsers for the build and the tests. This package imports
nothing else from the library: the languages import it, never the reverse.
"""
