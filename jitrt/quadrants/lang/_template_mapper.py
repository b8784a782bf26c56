"""Quadrants' `qd.lang._template_mapper` as far as Genesis reaches it: the module's
`__builtins__` (the builtins dict, where `gs.init` sets `__debug__`). Nothing else."""
