"""Sphinx configuration: the guides in docs/ (Markdown, through myst-parser) and an API
reference generated from the package's docstrings (autodoc). Built by `make docs` with
warnings as errors."""
project = "jitrt"
author = "The jitrt developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
master_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "description"
html_theme = "alabaster"
suppress_warnings = ["myst.xref_missing"]
