"""The docs are tested: every ```python block in docs/*.md and README.md runs, what it shows
as output is checked, and every link and section reference resolves.

Examples: the python blocks of one page run in order in one namespace (as a reader would type
them), from a file that holds each block at its line in the page, so a failure points at the
page's line. A block preceded by a `<!-- not-run: reason -->` line is skipped (a GPU, a
sketch of internals). What is checked, per top-level statement with a trailing comment:
- `# expr == [1. 2.]`: after the statement, `expr` holds those numbers;
- `print(...)  # text`: what the call printed begins the comment, followed by nothing or by
  punctuation (`# 140.0: a numpy array works too`);
- a bare expression with a number as its value, whose comment starts with a number
  (`div(-7, 2)   # -4`): that number.
A block followed at once by an output fence starting `SomeError: message` must raise that
error with that message; followed by another output fence, it must print that text
(whitespace collapsed; a `file.py:line:col` matches any location and `...` anything).

Links: `[text](target)` must name an existing file and, with `#anchor`, a heading of it
(GitHub/myst slugs, as `myst_heading_anchors` in docs/conf.py makes them); a section named in
prose, `usage.md, "Random numbers"` or `see "Random numbers"` (same page), must be a heading
or a bold run-in title (`**Logging.**`) of that page; a heading may be named without a
trailing parenthesis or the subtitle after a colon ("Dense layouts" for "Dense layouts
(`jr.root`)").
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import re
import tokenize
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^(`{3,})\s*(\S*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*\S.*-->\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    lang: str
    first: int                  # 1-based line of the first code line
    lines: tuple[str, ...]
    not_run: bool               # preceded by a <!-- not-run: ... --> marker
    output: tuple[str, ...] | None = None   # an unlabelled fence right after it


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown page, each python block with the output fence that
    follows it directly (if any)."""
    lines = text.splitlines()
    found: list[Block] = []
    k = 0
    while k < len(lines):
        m = FENCE.match(lines[k])
        if not m:
            k += 1
            continue
        end = next((j for j in range(k + 1, len(lines)) if lines[j].strip() == m.group(1)),
                   len(lines))
        before = next((lines[j] for j in range(k - 1, -1, -1) if lines[j].strip()), "")
        found.append(Block(m.group(2), k + 2, tuple(lines[k + 1:end]),
                           bool(NOT_RUN.match(before.strip()))))
        k = end + 1
    out: list[Block] = []
    for b in found:
        prev = out[-1] if out else None
        if (b.lang == "" and prev is not None and prev.lang == "python"
                and b.first - 1 == prev.first + len(prev.lines) + 1):
            out[-1] = dataclasses.replace(prev, output=b.lines)
        out.append(b)
    return out


# ---- the examples -------------------------------------------------------------------------
def _numbers(text: str) -> np.ndarray:
    return np.array([float(t) for t in re.findall(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|inf",
                                                  text)])


def _comment(line: str) -> str | None:
    """The trailing comment of a source line (None if there is none)."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(line + "\n").readline))
    except (tokenize.TokenError, SyntaxError):   # a line inside a bracket: no comment here
        return None
    return next((t.string[1:].strip() for t in toks if t.type == tokenize.COMMENT), None)


def _check_comment(stmt: ast.stmt, comment: str, printed: str, value: Any, ns: dict,
                   where: str) -> None:
    for claim in re.finditer(r"(?:^|, )(?P<expr>[\w.\[\]()]+) == (?P<arr>\[[^\]]*\])",
                             comment):
        got = np.asarray(eval(claim.group("expr"), ns), dtype=float).ravel()  # noqa: S307
        want = _numbers(claim.group("arr"))
        assert got.shape == want.shape and np.allclose(got, want), \
            f"{where}: {claim.group('expr')} is {got}, the page says {want}"
    is_print = (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "print")
    if is_print:
        shown = printed.strip()
        rest = comment[len(shown):]
        assert comment.startswith(shown) and (not rest or not (rest[0].isalnum() or
                                                                rest[0] in "._")), \
            f"{where}: printed {shown!r}, the page says {comment!r}"
        return
    first = re.match(r"^[-+]?\d+(\.\d*)?(e[-+]?\d+)?(?=$|[\s,:;(])", comment)
    if isinstance(stmt, ast.Expr) and first and isinstance(value, (int, float, np.number)):
        assert np.isclose(float(value), float(first.group(0))), \
            f"{where}: the value is {value!r}, the page says {first.group(0)}"


def _error_matches(expected: tuple[str, ...], exc: BaseException) -> bool:
    return _shown(expected, f"{type(exc).__name__}: {exc}")


def _shown(expected: tuple[str, ...], actual: str) -> bool:
    """Whether `actual` is the text an output block shows (whitespace collapsed; a
    `file.py:line:col` stands for any location, `...` for anything)."""
    want = " ".join(" ".join(expected).split())
    got = " ".join(actual.split())
    wild = {"...": ".*", "path": r"\S*\.py:\d+:\d+"}
    pieces = re.split(r"(\.\.\.|\S*\.py:\d+:\d+)", want)
    pattern = "".join(wild["..."] if k % 2 and p == "..." else wild["path"] if k % 2
                      else re.escape(p) for k, p in enumerate(pieces))
    return re.fullmatch(pattern, got, re.S) is not None


def run_page(page: Path, tmp: Path) -> int:
    """Run the python blocks of `page` in one namespace; return how many ran."""
    text = page.read_text()
    runnable = [b for b in blocks(text) if b.lang == "python" and not b.not_run]
    if not runnable:
        return 0
    padded = [""] * (len(text.splitlines()) + 1)
    for b in runnable:
        padded[b.first - 1:b.first - 1 + len(b.lines)] = b.lines
    script = tmp / f"{page.stem}_md.py"
    script.write_text("\n".join(padded) + "\n")
    ns: dict[str, Any] = {"__name__": "__main__", "__file__": str(script)}
    for b in runnable:
        source = "\n" * (b.first - 1) + "\n".join(b.lines) + "\n"
        tree = ast.parse(source, str(script))
        # a comment belongs to the last statement of its line (`b = ...; k(b)  # b == [..]`)
        last_on_line = {s.end_lineno: s for s in tree.body}
        printed = []
        try:
            for stmt in tree.body:
                printed.append(_run_statement(stmt, source.splitlines(), ns, str(script),
                                              f"{page.name}:{stmt.lineno}",
                                              last_on_line[stmt.end_lineno] is stmt))
        except Exception as exc:  # noqa: BLE001 - compared with the page's output block
            if b.output is None or not _error_matches(b.output, exc):
                raise AssertionError(f"{page.name}: the block at line {b.first} raised "
                                     f"{type(exc).__name__}: {exc}") from exc
        else:
            assert b.output is None or not re.match(r"^\w+(Error|Warning):", b.output[0]), \
                f"{page.name}: the block at line {b.first} did not raise {b.output[0]!r}"
            assert b.output is None or _shown(b.output, "".join(printed)), \
                f"{page.name}: the block at line {b.first} printed {''.join(printed)!r}"
    return len(runnable)


def _run_statement(stmt: ast.stmt, lines: list[str], ns: dict, filename: str,
                   where: str, owns_comment: bool) -> str:
    """Run one top-level statement, check its comment; return what it printed."""
    buf = io.StringIO()
    value = None
    with contextlib.redirect_stdout(buf):
        if isinstance(stmt, ast.Expr):
            value = eval(compile(ast.Expression(stmt.value), filename, "eval"), ns)  # noqa: S307
        else:
            exec(compile(ast.Module([stmt], []), filename, "exec"), ns)  # noqa: S102
    print(buf.getvalue(), end="")
    comment = _comment(lines[stmt.end_lineno - 1]) if stmt.end_lineno else None
    if comment and owns_comment:
        _check_comment(stmt, comment, buf.getvalue(), value, ns, where)
    return buf.getvalue()


@pytest.mark.cpu_only
@pytest.mark.no_gpu_builds
@pytest.mark.parametrize("page", [p for p in PAGES if "```python" in p.read_text()],
                         ids=lambda p: p.name)
def test_the_examples_of_a_page_run(page: Path, tmp_path: Path) -> None:
    assert run_page(page, tmp_path) > 0 or "not-run" in page.read_text()


# ---- links and section references ----------------------------------------------------------
def slug(title: str) -> str:
    """A heading's anchor as GitHub and myst-parser make it: the rendered text (inline code
    marks dropped), lower case, punctuation other than `-` and `_` removed, spaces -> `-`."""
    text = re.sub(r"[`*]", "", title).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def sections(text: str) -> tuple[set[str], set[str]]:
    """(anchors, titles) of a page: the slug of every heading outside code fences (repeats
    numbered -1, -2 as GitHub does) and the titles prose may name: headings and bold run-in
    titles (`**Logging.**`), each with and without its inline code marks."""
    anchors: set[str] = set()
    titles: set[str] = set()
    counts: dict[str, int] = {}
    in_code = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        run_in = re.match(r"^\*\*([^*]+?)\.?\*\*", line)
        title = m.group(1) if m else run_in.group(1) if run_in else None
        if title is None:
            continue
        for t in (title, title.replace("`", "")):
            # "Dense layouts (`jr.root`)" may be named "Dense layouts", "Tiered compilation:
            # the cold pair" "Tiered compilation"
            titles |= {t, re.sub(r"\s*\([^)]*\)$", "", t), t.split(": ")[0]}
        if m:
            base = slug(title)
            n = counts.get(base, 0)
            counts[base] = n + 1
            anchors.add(base if n == 0 else f"{base}-{n}")
    return anchors, titles


def _prose(text: str) -> str:
    """The page without its code fences, whitespace collapsed (references wrap lines)."""
    out, in_code = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code:
            out.append(line)
    return " ".join(" ".join(out).split())


def broken_links(pages: list[Path]) -> list[str]:
    """Every link, anchor and prose section reference of `pages` that does not resolve."""
    problems = []
    for page in pages:
        text = page.read_text()
        prose = _prose(text)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"^[a-z]+:", target):
                continue                      # http:, mailto:: not checked (no network)
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                problems.append(f"{page.name}: link to {target}: no file {path}")
            elif anchor and dest.suffix == ".md" and anchor not in sections(dest.read_text())[0]:
                problems.append(f"{page.name}: link to {target}: no heading #{anchor} "
                                f"in {dest.name}")
        refs = [(m.group(1) + ".md", m.group(2)) for m in
                re.finditer(r"(?:docs/)?([\w-]+)\.md,? \"([^\"]+)\"", prose)]
        refs += [(page.name, m.group(1)) for m in re.finditer(r"\bsee \"([^\"]+)\"", prose)]
        for name, title in refs:
            dest = page.parent / name
            if not dest.exists():
                dest = ROOT / "docs" / name
            if not dest.exists():
                problems.append(f"{page.name}: \"{title}\" in {name}: no such page")
            elif title not in sections(dest.read_text())[1]:
                problems.append(f"{page.name}: \"{title}\": no such section in {name}")
    return problems


def test_every_link_anchor_and_section_reference_resolves() -> None:
    assert broken_links(PAGES) == []


def test_a_broken_anchor_or_section_reference_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text('# Title\n\n## `print` and `assert`\n\n**Logging.** text\n')
    good = tmp_path / "b.md"
    good.write_text('See [it](a.md#print-and-assert), a.md, "Logging" and\n'
                    'a.md, "`print` and `assert`".\n')
    assert broken_links([good]) == []
    bad = tmp_path / "c.md"
    bad.write_text('[x](a.md#print-and-asert) [y](nope.md) a.md, "Loging" (see "Nowhere")\n')
    assert broken_links([bad]) == [
        "c.md: link to a.md#print-and-asert: no heading #print-and-asert in a.md",
        "c.md: link to nope.md: no file nope.md",
        'c.md: "Loging": no such section in a.md',
        'c.md: "Nowhere": no such section in c.md']


def test_a_wrong_output_in_a_page_fails(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("```python\nimport numpy as np\nprint(np.arange(3))   # [0 1 2]\n"
                    "a = np.ones(2)   # a == [1. 1.]\n```\n")
    assert run_page(page, tmp_path) == 1
    page.write_text("```python\nimport numpy as np\nprint(np.arange(3))   # [0 1 3]\n```\n")
    with pytest.raises(AssertionError, match=r"printed '\[0 1 2\]', the page says"):
        run_page(page, tmp_path)
    page.write_text("```python\nimport numpy as np\na = np.ones(2)   # a == [1. 2.]\n```\n")
    with pytest.raises(AssertionError, match=r"a is \[1. 1.\], the page says \[1. 2.\]"):
        run_page(page, tmp_path)
    page.write_text("```python\nraise ValueError('no: 3')\n```\n```\nValueError: no: 4\n```\n")
    with pytest.raises(AssertionError, match="raised ValueError: no: 3"):
        run_page(page, tmp_path)
    page.write_text("```python\nprint('a', 1)\n```\n```\na 2\n```\n")
    with pytest.raises(AssertionError, match=re.escape("printed 'a 1\\n'")):
        run_page(page, tmp_path)
    page.write_text("<!-- not-run: a sketch -->\n```python\nundefined_name\n```\n")
    assert run_page(page, tmp_path) == 0
