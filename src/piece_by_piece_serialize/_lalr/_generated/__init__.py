"""Generated LALR tables, one module per grammar (see piece_by_piece_serialize._lalr.build)."""
