"""Every shell block in README.md and docs/*.md runs as written (issue 28): a newcomer copying a
block gets no usage error and no "no such file". Checked without running anything (no root, no
testbed):

- **Which blocks.** Fenced ```sh, ```bash, ```shell and ```console blocks. In a console block the
  lines starting with ``$ `` or ``# `` (a root prompt) are commands, the rest is output. A ```text
  or unlabelled block whose lines look like commands must be labelled ```sh or ```console, unless
  :data:`REFERENCE_BLOCKS` lists it with the reason it is a reference (a synopsis, a table of
  commands and what they do), not a script; of those only the command names are checked.
- **Which lines.** ``\\`` continues a line; ``&&``, ``||``, ``;``, ``|`` and ``&`` separate
  commands; ``$(...)`` is a command too; ``# ...`` is a comment; leading ``VAR=value``, ``sudo``
  (and its options) and ``env`` are not the command; a heredoc's body (``cat > lab.toml <<EOF``)
  is text, not commands.
- **netstack.** ``netstack ...``, ``.venv/bin/netstack ...``, ``python -m netstack.cli ...`` (and
  the command ``netstack exec NODE -- CMD`` runs) must parse: ``build_parser().parse_args`` and the
  CLI's ``resolve``, never the command itself. The deprecated ``--runtime live|sim`` of a
  subcommand is a failure too (``--mode``).
- **Files.** A file a command reads (a topology file, ``--pcap``, ``--compare OLD NEW``, ``-r``,
  ``-f``, a script it runs, any word with a ``/`` or a file extension) must be in the repository
  (``git ls-files``, untracked files that are not ignored included; .venv/ is what
  scripts/install.sh makes), be a shipped topology's name, or be written by an earlier command of
  the same document: ``> F``, ``-w``/``-o``/``--out``/``--output``/``--dir``, ``cp``/``mv``/
  ``mkdir``/``touch``/``tee``, ``netstack keys generate F``, ``netstack bench NAME`` (its
  ``results/bench-NAME-*``), ``netstack sim`` (``results/sim-*``). Paths outside the checkout
  (``/dev/null``, ``~/...``) are the system's, not checked; ``/tmp/...`` must be written first.
- **Placeholders** must be marked: ``<LINK>`` (angle brackets, anywhere in a word), a word in
  capitals (``FILE``, ``PID``, ``P``; a lower-case extension or a folder may go with it:
  ``TOPOLOGY.toml``, ``OLD.json``, ``results/NEW.json``), ``$VAR``, or ``...``. A placeholder is
  not checked as a file, and a usage error that quotes it is not counted; the rest of its line is
  checked. docs/testbed.md "Examples in these docs" states the same convention for writers.

A failure names the document and line, and why.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import io
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pytest

from netstack import cli
from netstack.errors import CommandError
from netstack.topo.model import shipped_topologies

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGS = {"sh", "bash", "shell", "console"}

#: blocks of commands that are a reference, not a script to copy: (document, how the block's first
#: line starts) -> why. Only their command names are checked.
REFERENCE_BLOCKS = {
    ("README.md", "netstack --help "): "the command list: each command beside what it does, with "
                                       "alternatives (enable|disable|status) and [optional] parts",
    ("docs/tcd.md", "netstack tcd enable sw2 p-sw3 ["): "a synopsis: [optional] parts, alternatives tcd|ecn",
    ("docs/tcd.md", "netstack bench tcd ["): "a synopsis: [optional] parts, alternatives scenarios|fct|live",
}

#: a line of a ```text or unlabelled block that is a command (not output such as "netstack link: error")
LOOKS_LIKE_COMMAND = re.compile(r"^(?:\$ \S|(?:# )?(?:sudo (?:-E )?)?(?:\.venv/bin/)?netstack (?!\S+:(?:\s|$)))")
ANGLE = re.compile(r"<([A-Za-z][\w.-]*)>")
CAPS = re.compile(r"(?:[\w./-]*/)?[A-Z][A-Z0-9_]*(?:\.[a-z0-9]+)*")
FILE_SUFFIXES = {".toml", ".json", ".jsonl", ".pcap", ".pcapng", ".sh", ".py", ".md", ".yml", ".yaml", ".lua",
                 ".svg", ".raw", ".txt", ".csv", ".png", ".keys", ".cfg", ".mem", ".hex"}
CONTROL = {"&&", "||", ";", "|", "&", "|&", ";;", "(", ")"}
#: options whose value a command writes (any program): capture files, outputs, folders
WRITE_OPTIONS = {"-w", "--write", "-o", "--output", "--out", "--dir", "--results-dir", "--log"}
#: commands that write every path they name (cp/mv: the last one)
WRITERS = {"mkdir": "all", "touch": "all", "tee": "all", "cp": "last", "mv": "last"}
#: made by scripts/install.sh, README's first step
INSTALLED = (".venv/",)
PARSER = cli.build_parser()
SHIPPED = set(shipped_topologies())


def _repo_files() -> set[str]:
    """What a fresh checkout holds (plus new files not ignored): not results/ from a local run."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked sdist)
        return {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if ".git" not in p.parts}
    files = {f for f in out.split("\0") if f}
    return files | {parent.as_posix() for f in files for parent in PurePosixPath(f).parents}


REPO_FILES = _repo_files()


def is_placeholder(word: str) -> bool:
    return "\u27e8" in word or "$" in word or word in ("...", "\u2026") or bool(CAPS.fullmatch(word))


# ----------------------------------------------------------------------------- extracting commands


@dataclass
class Block:
    line: int  #: the document's line of the block's first line
    lang: str
    lines: list[str]


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block (``` or ~~~, indented in a list too), with its info string's first word."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"\s*(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(m.group(1)):
            j += 1
        blocks.append(Block(i + 2, m.group(2).lower(), lines[i + 1:j]))
        i = j + 1
    return blocks


def command_lines(block: Block) -> list[tuple[int, str]]:
    """(document line, logical line) of each command line: prompts stripped in a console block,
    ``\\`` continuations and quotes open across lines joined, comment lines and heredoc bodies
    left out."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None  # a line that goes on: its start and text so far
    heredoc = None
    for n, raw in enumerate(block.lines, block.line):
        if heredoc is not None:
            heredoc = None if raw.strip() == heredoc else heredoc
            continue
        if pending is not None:
            start, line = pending[0], pending[1] + (raw if pending[1].endswith("\n") else raw.strip())
        elif block.lang == "console":
            if not raw.startswith(("$ ", "# ")):
                continue  # output
            line, start = raw[2:].strip(), n
        else:
            line, start = raw.strip(), n
            if not line or line.startswith("#"):
                continue
        pending = None
        if line.endswith("\\"):
            pending = (start, line[:-1].rstrip() + " ")
        elif _open_quote(line):
            pending = (start, line + "\n")  # a quoted string (python -c '...') spans lines
        else:
            m = re.search(r"<<-?\s*(['\"]?)(\w+)\1", line)
            heredoc = m.group(2) if m else None
            out.append((start, line))
    if pending is not None:  # the block ended inside a quote or after a \\: check_line says so
        out.append(pending)
    return out


def _open_quote(line: str) -> bool:
    try:
        shlex.split(line, comments=True)
    except ValueError:
        return True
    return False


@dataclass
class Simple:
    """One simple command: its words, and the files its redirections read and write."""
    words: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)


def simple_commands(line: str) -> list[Simple]:
    """A shell line as simple commands; each ``$(...)`` is one more (its place in the line keeps
    a ``$`` word, which no check reads). Raises ValueError on unbalanced quotes."""
    inner: list[str] = []

    def substitute(m: re.Match[str]) -> str:
        inner.append(m.group(1))
        return "$SUBST"

    line = re.sub(r"\$\(([^()]*)\)", substitute, line)
    line = ANGLE.sub(lambda m: f"\u27e8{m.group(1)}\u27e9", line)  # shlex would split <X> as redirections
    line = re.sub(r"(?<![\w.-])\d+(?=[<>])", "", line)  # 2>/dev/null, 2>&1: the fd is no argument
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    tokens = list(lex)
    out = [Simple()]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in CONTROL:
            out.append(Simple())
        elif set(tok) <= set("<>&") and ("<" in tok or ">" in tok):
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if not (tok.startswith("<<") or tok.endswith("&")):  # heredoc delimiter, 2>&1
                (out[-1].reads if "<" in tok else out[-1].writes).append(target)
            i += 1
        else:
            out[-1].words.append(tok)
        i += 1
    subs = [c for text in inner for c in simple_commands(text)]
    return [c for c in out if c.words] + subs


# ----------------------------------------------------------------------------- checking them


@dataclass
class DocCheck:
    """One document's checks, in order: what its earlier commands wrote counts as existing."""
    name: str
    written: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def fail(self, line: int, why: str) -> None:
        why = why.replace("\u27e8", "<").replace("\u27e9", ">")  # the <X> placeholders, as written
        self.failures.append(f"{self.name}:{line}: {why}")

    def exists(self, path: str) -> bool:
        path = path.removeprefix("./").rstrip("/") or "."
        if is_placeholder(path) or path.startswith("~") or path.startswith(INSTALLED):
            return True
        if path.startswith("/") and not path.startswith("/tmp/"):
            return True  # the system's (/dev/null, /etc/...): not this repository's business
        for w in self.written:
            w = w.rstrip("/")
            if fnmatch.fnmatch(path, w) or fnmatch.fnmatch(w, path) or path.startswith(w + "/"):
                return True
        return path in REPO_FILES or any(fnmatch.fnmatch(f, path) for f in REPO_FILES if "*" in path)

    def need(self, line: int, path: str, what: str) -> None:
        if not self.exists(path):
            self.fail(line, f"{what} {path!r}: not in the repository and no earlier command of this document "
                            "writes it (a placeholder? write it as FILE or <file>)")

    def wrote(self, paths: list[str]) -> None:
        self.written += [p.removeprefix("./") for p in paths if p]


def file_like(word: str) -> bool:
    if word.startswith("-") or "://" in word or is_placeholder(word) or any(c.isspace() for c in word):
        return False  # an option, an address, a placeholder, a string with spaces (code, a filter)
    return "/" in word or PurePosixPath(word).suffix in FILE_SUFFIXES


def check_line(doc: DocCheck, line: int, text: str) -> None:
    unquoted = re.sub(r"(^|\s)#.*", "", re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "''", text))
    glued = re.search(r"[A-Za-z][\w-]*>[\w-]+", unquoted)
    if glued:  # sw1>sw2: the shell writes a file sw2 and the command never sees the direction
        doc.fail(line, f"unquoted > in {glued.group(0)!r} is a redirection: quote it ('{glued.group(0)}')")
    try:
        commands = simple_commands(text)
    except ValueError as exc:
        doc.fail(line, f"{text!r}: {exc} (unbalanced quotes)")
        return
    for cmd in commands:
        for path in cmd.reads:
            doc.need(line, path, "reads")
        check_words(doc, line, cmd.words)
        doc.wrote(cmd.writes)


def check_words(doc: DocCheck, line: int, words: list[str]) -> None:
    """One command's words: netstack's are parsed, any other program's checked for files only."""
    while words and (re.match(r"[A-Za-z_]\w*=", words[0]) or words[0] in ("sudo", "env")):
        words = words[1:]
        while words and words[0].startswith("-") and words[0] != "--":  # sudo -E, sudo -u USER
            words = words[2:] if words[0] in ("-u", "-g") else words[1:]
    if not words:
        return
    prog = words[0]
    if prog == "netstack" or prog.endswith("/netstack"):
        check_netstack(doc, line, words[1:])
        if prog != "netstack":
            doc.need(line, prog, "runs")
        return
    if "-m" in words and words.index("-m") + 1 < len(words) and words[words.index("-m") + 1] == "netstack.cli":
        check_netstack(doc, line, words[words.index("-m") + 2:])
        return
    check_other(doc, line, words)


def check_other(doc: DocCheck, line: int, words: list[str]) -> None:
    """A program other than netstack: only the files it names."""
    prog = PurePosixPath(words[0]).name
    if "/" in words[0]:
        doc.need(line, words[0], "runs")
    args = words[1:]
    writes: list[str] = []
    reads: list[str] = []
    for i, word in enumerate(args):
        option, eq, value = word.partition("=")
        if eq and option in WRITE_OPTIONS:
            writes.append(value)
        elif i and args[i - 1] in WRITE_OPTIONS:
            writes.append(word)
        elif file_like(word):
            reads.append(word)
    mode = WRITERS.get(prog)
    if mode == "all":
        writes, reads = writes + reads, []
    elif mode == "last" and reads:
        writes, reads = writes + reads[-1:], reads[:-1]
    for path in reads:
        doc.need(line, path, f"{prog} reads")
    doc.wrote(writes)


def parse(argv: list[str]) -> argparse.Namespace | str | None:
    """The CLI's namespace, or its usage error; None for --help/--version. A placeholder the parser
    refuses (``--signal <SIG>``) stands in for a valid value: it takes the option's first choice
    (else 1), and the rest of the line is parsed on."""
    argv = list(argv)
    for _ in range(len(argv) + 1):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                args = PARSER.parse_args(argv)
                cli.resolve(args)
            return args
        except SystemExit as exc:
            if exc.code in (0, None):
                return None
            message = (err.getvalue().strip().splitlines() or [f"exit status {exc.code}"])[-1]
        except CommandError as exc:
            return str(exc)
        quoted = [i for i, w in enumerate(argv) if is_placeholder(w) and f"'{w}'" in message]
        if not quoted:
            return message
        argv[quoted[0]] = _stand_in(message)
    return message


def _stand_in(message: str) -> str:
    """A valid value for the argument a usage error names: the first of its choices, else 1."""
    m = re.search(r"choose from '?([^',)]+)", message)
    return m.group(1) if m else "1"


def check_netstack(doc: DocCheck, line: int, argv: list[str]) -> None:
    """Parse as the CLI does (never run); then the files the command reads and writes."""
    shown = "netstack " + " ".join(argv)
    args = parse(argv)
    if args is None:
        return  # --help, --version
    if isinstance(args, str):
        doc.fail(line, f"{shown!r} does not parse: {args}")
        return
    if getattr(args, "func", None) is None:
        doc.fail(line, f"{shown!r} names no command (netstack prints its help and exits 2)")
    elif getattr(args, "mode_alias", None) is not None:
        doc.fail(line, f"{shown!r}: --runtime live|sim is deprecated: write --mode {args.mode_alias}")
    reads, writes = netstack_files(args)
    for what, path in reads:
        doc.need(line, path, f"netstack {args.command} reads {what}")
    doc.wrote(writes)
    if args.command == "exec" and args.argv:
        check_words(doc, line, list(args.argv))


def netstack_files(args: argparse.Namespace) -> tuple[list[tuple[str, str]], list[str]]:
    """The files a parsed netstack command reads ((what, path)) and writes (paths, globs)."""
    def given(dest: str) -> list[str]:
        value = getattr(args, dest, None)
        if value is None or value is False:
            return []
        return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]

    reads = [("its topology", t) for t in given("topology") if t not in SHIPPED]
    reads += [(f"--{d.replace('_', '-')}", p) for d in ("pcap", "compare", "run_dir") for p in given(d)]
    reads += [("a log", p) for p in given("logs")]
    writes = [p for d in ("write", "output", "out", "dir", "log") for p in given(d)]
    if args.command == "keys" and args.keys_cmd == "generate":
        writes += given("file")
    else:
        reads += [("a key file", f) for f in given("file")]
    # netstack.bench.output.write_results: <name>-<UTC stamp>.json and <name>-latest.json (+ .md, .png)
    results = getattr(args, "results_dir", None) or "results"
    name = {"bench": f"bench-{getattr(args, 'benchmark', None)}", "sim": "sim-*", "demo": "demo"}.get(args.command)
    if name and name != "bench-None":
        writes += [f"{results}/{name}-latest.*", f"{results}/{name}-[0-9]*Z.json", f"{results}/{name}-*.png"]
    return reads, writes


def check_reference(doc: DocCheck, block: Block) -> None:
    """A reference block's command names (``lg enable|disable|status``) exist: a renamed command shows."""
    for n, raw in enumerate(block.lines, block.line):
        if not LOOKS_LIKE_COMMAND.match(raw):
            continue
        parser: argparse.ArgumentParser | None = PARSER
        for word in raw.split()[1:3]:
            subs = {name: sub for a in (parser._actions if parser else []) if isinstance(a, argparse._SubParsersAction)
                    for name, sub in a.choices.items()}
            if not subs or word.startswith(("-", "[")) or is_placeholder(word):
                break
            missing = [w for w in word.split("|") if w not in subs]
            if missing:
                doc.fail(n, f"reference block: no command {' '.join(missing)!r} here")
                break
            parser = subs[word.split("|")[0]]


def reference_key(name: str, block: Block) -> tuple[str, str] | None:
    """The REFERENCE_BLOCKS entry of a block, if any."""
    first = block.lines[0].strip() if block.lines else ""
    return next((key for key in REFERENCE_BLOCKS if key[0] == name and first.startswith(key[1])), None)


def check_document(name: str, text: str) -> list[str]:
    """Every failure of one document's shell blocks, as ``doc:line: why``."""
    doc = DocCheck(name)
    for block in fenced_blocks(text):
        if reference_key(name, block):
            check_reference(doc, block)
        elif block.lang in SHELL_LANGS:
            for line, command in command_lines(block):
                check_line(doc, line, command)
        elif block.lang in ("", "text"):
            n = next((n for n, raw in enumerate(block.lines, block.line) if LOOKS_LIKE_COMMAND.match(raw)), None)
            if n is not None:
                doc.fail(n, "a block of commands: label it ```sh (or ```console), or list it in "
                            "REFERENCE_BLOCKS with why it is a reference")
    return doc.failures


# ----------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_shell_block_runs_as_written(path):
    name = path.relative_to(ROOT).as_posix()
    failures = check_document(name, path.read_text())
    assert failures == [], "\n" + "\n".join(failures)


def test_the_documents_hold_commands_to_check():
    """(The test above would pass vacuously if the extractor found nothing.)"""
    lines = [c for p in DOCS for b in fenced_blocks(p.read_text()) if b.lang in SHELL_LANGS
             for c in command_lines(b)]
    assert len(lines) > 100
    keys = {reference_key(p.relative_to(ROOT).as_posix(), b) for p in DOCS for b in fenced_blocks(p.read_text())}
    assert set(REFERENCE_BLOCKS) <= keys, "a REFERENCE_BLOCKS entry matches no block any more: remove it"


def _check(markdown: str) -> list[str]:
    return check_document("x.md", markdown)


def test_a_bad_option_fails_with_its_line():
    failures = _check("text\n\n```sh\nnetstack up\nnetstack lg enable sw1-sw2 --copise 1\n```\n")
    assert len(failures) == 1 and failures[0].startswith("x.md:5: ") and "--copise" in failures[0]


def test_a_missing_file_fails_unless_an_earlier_command_writes_it():
    assert "capture.pcapng" in " ".join(_check("```sh\ntshark -r capture.pcapng\n```\n"))
    assert _check("```sh\nnetstack capture sw1-sw2 -w c.pcapng --count 5\n```\n\n"
                  "```console\n# tshark -r c.pcapng\noutput, not a command: tshark -r x.pcap\n```\n") == []
    assert _check("```sh\ncat > lab.toml <<'EOF'\n[topology]\nEOF\nnetstack up lab.toml\n```\n") == []
    assert _check("```sh\nnetstack bench headers\ncp results/bench-headers-latest.json before.json\n"
                  "netstack bench --compare before.json results/bench-headers-latest.json\n```\n") == []
    assert len(_check("```sh\nnetstack bench --compare results/bench-headers-OLD.json "
                      "results/bench-headers-latest.json\n```\n")) == 2


def test_an_unmarked_placeholder_fails_and_a_marked_one_passes():
    assert "my.toml" in " ".join(_check("```sh\nnetstack compose generate my.toml -o lab.yml\n```\n"))
    assert _check("```sh\nnetstack compose generate TOPOLOGY.toml -o lab.yml\ndocker-compose -f lab.yml up\n```\n") \
        == []
    assert _check("```sh\nnetstack lg enable <LINK> && netstack dissect --pcap <capture.pcapng>\n```\n") == []
    assert _check("```sh\nnetstack fault kill <NODE> --signal <SIG> --down-ms 50\n```\n") == []
    assert "--down-ms" in " ".join(_check("```sh\nnetstack fault kill <NODE> --signal <SIG> --down-ms x\n```\n"))
    assert _check("```sh\npy-spy top --pid PID\n```\n") == []


def test_shell_syntax_is_read_as_the_shell_reads_it():
    ok = "```bash\nNETSTACK_THOROUGH=1 sudo -E netstack impair sw1-sw2 --corrupt 1e-2 --direction 'sw1>sw2' \\\n" \
         "    --clear; netstack down 2>&1 | tee down.txt & cat down.txt  # a comment\n```\n"
    assert _check(ok) == []
    assert _check("```sh\nnetstack impair sw1-sw2 --direction sw1>sw2\n```\n")  # unquoted: > is a redirect
    assert _check("```sh\nnetstack up onepipe   # h1->tor1: in a comment, > is text\n```\n") == []
    assert _check("```sh\ntshark -X lua_script:$(netstack wireshark --prnt) -r /dev/null\n```\n")
    assert _check("```sh\nnetstack exec h1 -- netstack tcd recv --tcd\n```\n") == []
    assert _check("```console\n$ python -c 'import sys\nprint(1)' > out.txt\n$ cat out.txt\n1\n```\n") == []
    assert "unbalanced" in " ".join(_check("```sh\nnetstack up 'lg-testbed\n```\n"))
    assert _check("```sh\nnetstack exec h1 -- netstack tcd recv --tdc\n```\n")


def test_deprecated_spellings_and_unlabelled_command_blocks_fail():
    assert "--mode sim" in " ".join(_check("```sh\nnetstack tcd run single --runtime sim\n```\n"))
    assert "label it" in " ".join(_check("```\nnetstack up onepipe\n```\n"))
    assert "label it" in " ".join(_check("```text\n$ netstack status\n```\n"))
    assert _check("```text\nnetstack link: error: testbed ns: its namespaces are gone\n```\n") == []
    table = "```text\nnetstack --help       every command\nnetstack lg enable|disable|stats LINK  LinkGuardian\n```\n"
    assert [f.split(": ", 1)[0] for f in check_document("README.md", table)] == ["README.md:3"]
