"""Every measured figure in the performance docs names its evidence, and the evidence holds.

docs/performance.md, docs/sandbox-performance.md and docs/operations.md name, beside each table
of measured figures, the commit and the command behind it in an "Evidence:" paragraph, and link
its raw output under benchmarks/results/ where that output was kept (or say it was not). Here:
- each results file a doc links exists and starts with `# commit <sha>` and `# command: ...`
  (so does every other file under benchmarks/results/);
- every table of figures (a header `figure` or `pair`, or a column of overheads) sits in a
  section with an Evidence paragraph that names a commit and a command, and either links a
  results file or says the raw output was not kept;
- in a section that links results files, each number of its figure tables' value cells, and
  each quoted `name`: value, appears in those files as printed;
- each commit a doc or a results file names is in the history of HEAD (skipped without git).
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("docs/performance.md", "docs/sandbox-performance.md", "docs/operations.md")
RESULTS = ROOT / "benchmarks" / "results"

RESULTS_LINK = re.compile(r"\]\(([^)\s]*benchmarks/results/[^)\s#]+)\)")
COMMIT_IN_DOC = re.compile(r"`([0-9a-f]{7,40})`")
COMMAND_IN_DOC = re.compile(r"`[^`]*(?:benchmarks/|scripts/)[^`]*`")
QUOTED_FIGURE = re.compile(r"`([a-z][a-z0-9_]*)`: (\d+(?:\.\d+)?)")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]*\w)")
HEADER_COMMIT = re.compile(r"^# commit ([0-9a-f]{40})$")
HEADER_COMMAND = re.compile(r"^# command: \S")


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) for each part of a Markdown text between headings, fenced code ignored."""
    parts: list[tuple[str, list[str]]] = [("(top)", [])]
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{1,6} ", line):
            parts.append((line, []))
        else:
            parts[-1][1].append(line)
    return [(heading, "\n".join(lines)) for heading, lines in parts]


def tables(body: str) -> list[list[list[str]]]:
    """Each Markdown table of a section as rows of cells (the separator row left out)."""
    found: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*body.splitlines(), ""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", cell) for cell in cells):
                current.append(cells)
        elif current:
            found.append(current)
            current = []
    return found


def is_figure_table(table: list[list[str]]) -> bool:
    header = [cell.lower() for cell in table[0]]
    return header[0] in ("figure", "pair") or any("overhead" in cell for cell in header)


def paragraphs(body: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]


def results_file(doc: str, link: str) -> Path:
    return (ROOT / doc).parent.joinpath(link).resolve()


def header_problems(path: Path) -> list[str]:
    """What a results file lacks of its `# commit` and `# command:` header."""
    header = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    problems = []
    if not any(HEADER_COMMIT.match(line) for line in header):
        problems.append(f"{path.relative_to(ROOT)}: no '# commit <40-hex sha>' header line")
    if not any(HEADER_COMMAND.match(line) for line in header):
        problems.append(f"{path.relative_to(ROOT)}: no '# command: ...' header line")
    return problems


def raw_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def raw_numbers(paths: list[Path]) -> set[float]:
    """The numbers in the values (after `name:`) of the raw output lines."""
    return {
        float(number)
        for path in paths
        for line in raw_lines(path)
        for number in NUMBER.findall(line.partition(":")[2])
    }


def problems_in(doc: str, text: str) -> list[str]:
    """Everything wrong with the evidence of ``text``, the contents of ``doc`` (its path from
    the repository's root, against which its links resolve)."""
    problems: list[str] = []
    for heading, body in sections(text):
        where = f"{doc} {heading!r}"
        links = RESULTS_LINK.findall(body)
        files = [results_file(doc, link) for link in links]
        for link, path in zip(links, files, strict=True):
            if not path.is_file():
                problems.append(f"{where}: links {link}, which does not exist")
            elif RESULTS not in path.parents:
                problems.append(f"{where}: links {link}, outside benchmarks/results/")
            else:
                problems.extend(header_problems(path))
        figure_tables = [t for t in tables(body) if is_figure_table(t)]
        evidence = [p for p in paragraphs(body) if p.startswith("Evidence")]
        if figure_tables and not evidence:
            problems.append(f"{where}: a table of figures with no 'Evidence:' paragraph")
        for paragraph in evidence:
            start = paragraph[:60].replace("\n", " ")
            if not COMMIT_IN_DOC.search(paragraph):
                problems.append(f"{where}: evidence names no commit: {start!r}")
            if not COMMAND_IN_DOC.search(paragraph):
                problems.append(f"{where}: evidence names no command: {start!r}")
            if not RESULTS_LINK.search(paragraph) and "not kept" not in paragraph:
                problems.append(
                    f"{where}: evidence neither links raw output nor says it was not kept: "
                    f"{start!r}"
                )
        present = [path for path in files if path.is_file()]
        if not present:
            continue
        printed = raw_numbers(present)
        for table in figure_tables:
            for row in table[1:]:
                for cell in row[1:]:
                    for number in NUMBER.findall(cell):
                        if float(number) not in printed:
                            problems.append(
                                f"{where}: {row[0]!r} states {number}, which is in none of "
                                f"{', '.join(links)}"
                            )
        lines = {line for path in present for line in raw_lines(path)}
        for name, value in QUOTED_FIGURE.findall(body):
            if f"{name}: {value}" not in lines:
                problems.append(
                    f"{where}: quotes `{name}`: {value}, a line none of {', '.join(links)} has"
                )
    return problems


@pytest.mark.parametrize("doc", DOCS)
def test_each_figure_names_its_evidence_and_its_raw_output_says_the_same(doc: str) -> None:
    assert problems_in(doc, (ROOT / doc).read_text()) == []


def test_every_results_file_has_its_commit_and_command() -> None:
    files = sorted(path for path in RESULTS.iterdir() if path.is_file())
    assert files
    assert [problem for path in files for problem in header_problems(path)] == []


def test_the_docs_link_raw_output_at_all() -> None:
    """Guards the checks above against a link pattern that stopped matching anything."""
    linked = {
        results_file(doc, link).name
        for doc in DOCS
        for link in RESULTS_LINK.findall((ROOT / doc).read_text())
    }
    assert {"elastic_bench.txt", "test_upgrade_up_seconds.txt"} <= linked


@pytest.mark.parametrize(
    ("doc", "old", "new", "complaint"),
    [
        # a figure of a table that differs from its raw output
        ("docs/performance.md", "| 11.0 s |", "| 11.5 s |", "states 11.5"),
        # a quoted output line that differs from the raw file
        ("docs/operations.md", "`upgrade_up_seconds`: 53", "`upgrade_up_seconds`: 54", "54"),
        # a link to raw output that is not there
        ("docs/performance.md", "results/elastic_bench.txt)", "results/elastic.txt)", "not exist"),
        # a table of figures whose evidence was dropped
        ("docs/operations.md", "Evidence: the killed run's", "The killed run's", "no 'Evidence:'"),
        # evidence without its command
        (
            "docs/sandbox-performance.md",
            "`f8328c8`); command `.venv/bin/python benchmarks/sandbox_bench.py`, two runs",
            "`f8328c8`); command unknown, two runs",
            "no command",
        ),
    ],
)
def test_the_check_fails_on_a_changed_doc(doc: str, old: str, new: str, complaint: str) -> None:
    text = (ROOT / doc).read_text()
    assert text.count(old) == 1, f"the mutation's anchor {old!r} moved; update this test"
    problems = problems_in(doc, text.replace(old, new))
    assert any(complaint in problem for problem in problems), problems


def named_commits() -> dict[str, str]:
    """Each commit the docs or the results files name, with where."""
    named = {}
    for doc in DOCS:
        for sha in COMMIT_IN_DOC.findall((ROOT / doc).read_text()):
            named.setdefault(sha, doc)
    for path in RESULTS.iterdir():
        for line in path.read_text().splitlines():
            if match := HEADER_COMMIT.match(line):
                named.setdefault(match.group(1), str(path.relative_to(ROOT)))
    return named


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )


def test_every_commit_named_is_in_the_history_of_head() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("no .git here (an unpacked archive?): commits cannot be looked up")
    if shutil.which("git") is None:
        pytest.skip("git is not installed: commits cannot be looked up")
    if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone: the history that holds the named commits may be missing")
    named = named_commits()
    assert len(named) > 10
    missing = []
    for sha, where in sorted(named.items()):
        full = git("rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}").stdout.strip()
        if not full:
            missing.append(f"{sha} ({where}): no such commit")
        elif git("merge-base", "--is-ancestor", full, "HEAD").returncode != 0:
            missing.append(f"{sha} ({where}): not an ancestor of HEAD")
    assert missing == []
