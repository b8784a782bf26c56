"""Frontend: source capture, `@jr.func` objects, and Python AST -> kernel IR (no runtime)."""
