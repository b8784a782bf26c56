"""Print the runtime dependencies of pyproject.toml pinned to their lower bounds
(`llvmlite>=0.45,<0.51` -> `llvmlite==0.45`), for `make test-min`. Python 3.10 has no tomllib,
so the one `dependencies = [...]` line is read with a regular expression."""
import pathlib
import re

text = (pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
deps = re.search(r"^dependencies = \[(.*?)\]", text, re.MULTILINE | re.DOTALL)
assert deps, "no dependencies line in pyproject.toml"
names = re.findall(r'"([^"]+)"', deps.group(1))
print(" ".join(re.sub(r">=([^,]+).*", r"==\1", name) for name in names))
