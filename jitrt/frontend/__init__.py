"""Frontend: the `@jr.kernel`/`@jr.func` decorators, source capture, and Python AST -> kernel IR."""
