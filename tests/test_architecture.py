"""The shape docs/architecture.md promises, checked on the source itself: the layers' imports
point one way, there is no import cycle, the generic layers name no protocol, engines stay
sans-IO, functions stay short, and the repository refers to no file it does not contain."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from netstack.protocols import PROTOCOLS, benches, command_module, commands, fuzz_targets, typed_modules

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("netstack", "headers", "daemons")
#: the sans-IO engines: no socket, clock, asyncio, subprocess or switch inside
ENGINES = (
    "netstack/linkguardian/sender.py", "netstack/linkguardian/receiver.py", "netstack/linkguardian/params.py",
    "netstack/tcsack/common.py", "netstack/tcsack/sender.py", "netstack/tcsack/receiver.py",
    "netstack/tcsack/gbn.py", "netstack/tcsack/rangeset.py", "netstack/tcsack/params.py",
    "netstack/dta/translator.py", "netstack/dta/requester.py", "netstack/dta/counters.py", "netstack/dta/collector.py",
    "netstack/dta/keywrite.py", "netstack/dta/reporter.py", "netstack/sim/reno.py", "netstack/engine.py",
    "netstack/dta/postcard.py", "netstack/dta/hopreport.py",
    "netstack/ethernet.py",
    "netstack/onepipe/endpoint.py", "netstack/onepipe/barrier.py", "netstack/onepipe/params.py",
    "netstack/onepipe/clock.py", "netstack/onepipe/reliable.py", "netstack/onepipe/controller.py",
    "netstack/onepipe/actions.py", "netstack/onepipe/recovery.py", "netstack/onepipe/rstate.py",
    "netstack/onepipe/ctlwire.py", "netstack/tcd/detector.py", "netstack/tcd/params.py", "netstack/tcd/marker.py",
    "netstack/tcd/dcqcn.py", "netstack/tcd/np.py", "netstack/tcd/pacing.py", "netstack/tcd/timely.py",
    "netstack/tcd/cc.py", "netstack/auth/frame.py",
    "netstack/onepipe/baselines/stamped.py", "netstack/onepipe/baselines/hostseq.py",
    "netstack/onepipe/baselines/token.py", "netstack/onepipe/baselines/lamport.py",
    "netstack/onepipe/kv/wire.py", "netstack/onepipe/kv/shard.py", "netstack/onepipe/kv/client.py",
    "netstack/onepipe/kv/twopc.py", "netstack/onepipe/kv/workload.py", "netstack/onepipe/kv/checker.py",
    # every worked example's engine (the code newcomers copy) keeps the same rules, found by its
    # place (docs/extending.md) so that a new example needs no line here
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "netstack" / "examples").glob("*/engine.py")),
)
SANS_IO_FORBIDDEN = ("socket", "asyncio", "time", "subprocess", "select", "uvloop", "netstack.switch",
                     "netstack.io", "netstack.runtime")
#: words that name a protocol
PROTOCOL_WORDS = re.compile(r"linkguardian|\blg_|\bdta\b|collector|tcsack|onepipe|1pipe|\btcd\b", re.I)
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """Every project module ``name`` imports, anywhere in the file (module level, inside
    functions, under TYPE_CHECKING)."""
    path = MODULES[name]
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names]
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


GRAPH = {name: _imports(name) for name in MODULES}


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in MODULES:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_among_the_project_modules():
    assert _cycles() == []


def test_only_the_cli_imports_the_command_modules():
    offenders = {m: sorted(t for t in ts if t.startswith("netstack.commands"))
                 for m, ts in GRAPH.items()
                 if not m.startswith("netstack.commands") and m != "netstack.cli"}
    assert {m: t for m, t in offenders.items() if t} == {}


def test_headers_import_nothing_of_netstack_or_the_daemons():
    assert {m: sorted(t for t in ts if not t.startswith("headers"))
            for m, ts in GRAPH.items() if m.startswith("headers") and any(not t.startswith("headers") for t in ts)} \
        == {}


@pytest.mark.parametrize("path", ENGINES)
def test_engines_are_sans_io(path):
    tree = ast.parse((ROOT / path).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    name = ".".join(Path(path).with_suffix("").parts)
    names |= GRAPH[name]
    bad = sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in SANS_IO_FORBIDDEN))
    assert bad == [], f"{path} imports {bad}"


#: where counters are kept besides the engines: switch features, marking policies, the switch's ports
#: and what the engines count through (docs/architecture.md "Engines are sans-IO")
COUNTED = (*ENGINES, "netstack/linkguardian/feature.py", "netstack/dta/feature.py", "netstack/dta/reportauth.py",
           "netstack/onepipe/feature.py", "netstack/onepipe/auth.py", "netstack/switch/port.py",
           "netstack/switch/counters.py", "netstack/io/pfcgate.py", "netstack/onepipe/baselines/switchseq.py")
#: counters kept apart from ``c`` because they are exported apart: (module, attribute) -> why
COUNTERS_APART = {("netstack/onepipe/feature.py", "a"): "a port's authentication counters, the status's 'auth'"}


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _classes(path: str) -> list[ast.ClassDef]:
    return [n for n in ast.walk(ast.parse((ROOT / path).read_text())) if isinstance(n, ast.ClassDef)]


def _makes_counters(node: ast.expr | None) -> bool:
    """``XCounters(...)``, ``field(default_factory=XCounters)``, or either branch of an ``if`` is one."""
    if isinstance(node, ast.IfExp):
        return _makes_counters(node.body) or _makes_counters(node.orelse)
    if isinstance(node, ast.Call) and _name(node.func) == "field":
        return any(k.arg == "default_factory" and _name(k.value).endswith("Counters") for k in node.keywords)
    return isinstance(node, ast.Call) and _name(node.func).endswith("Counters")


def _counters_kept_elsewhere(path: str, fields: set[str]) -> list[str]:
    """In ``path``'s classes (but the counters dataclasses themselves, which may extend and hold
    others): a counters dataclass inherited, an attribute or field named ``counters``, counters
    held in another attribute than ``c``, or ``self.<a counter's name>`` bumped."""
    out = []
    for cls in (c for c in _classes(path) if not c.name.endswith("Counters")):
        where = f"{path}: {cls.name}"
        out += [f"{where} inherits {_name(b)}" for b in cls.bases if _name(b).endswith("Counters")]
        for node in ast.walk(cls):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else []
            # attributes set anywhere, and the class's own fields (not a method's local names)
            names = [_name(t) for t in targets if isinstance(t, ast.Attribute) or (node in cls.body and _name(t))]
            out += [f"{where}: {n} (counters is the method)" for n in names if n in ("counters", "counters_")]
            if isinstance(node, ast.Assign | ast.AnnAssign) and _makes_counters(node.value):
                out += [f"{where}: counters held in {n}, not c" for n in names
                        if n != "c" and (path, n) not in COUNTERS_APART]
            if isinstance(node, ast.AugAssign) and _name(node.target) in fields \
                    and isinstance(node.target, ast.Attribute) and _name(node.target.value) == "self":
                out.append(f"{where}: self.{node.target.attr} is bumped outside c")
    return out


def test_counters_are_a_dataclass_in_c_everywhere():
    """docs/architecture.md "Engines are sans-IO": an engine's (a feature's, a port's) counters are a
    ``*Counters`` dataclass held in ``c``: never inherited, never the class's own attributes, never
    named ``counters`` (that is the method); and every ``counters()`` method reads ``self.c`` or
    hands the call on (a feature to its engine)."""
    fields = {s.target.id for path in COUNTED for cls in _classes(path) if cls.name.endswith("Counters")
              for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    offences = [o for path in COUNTED for o in _counters_kept_elsewhere(path, fields)]
    for path in COUNTED:
        for cls in _classes(path):
            method = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "counters"), None)
            if method is None or all(isinstance(s, ast.Raise | ast.Expr) for s in method.body):
                continue  # no counters(), or an abstract one
            reads_c = any(isinstance(n, ast.Attribute) and n.attr == "c" and _name(n.value) == "self"
                          for n in ast.walk(method))
            hands_on = any(isinstance(n, ast.Call) and _name(n.func) == "counters" for n in ast.walk(method))
            if not (reads_c or hands_on):
                offences.append(f"{path}: {cls.name}.counters() reads no self.c")
    assert len(fields) > 100 and offences == []


#: the topology model: the loader, its classes and values, and the checks of each section
TOPOLOGY_MODEL = ["netstack/topo/model.py", "netstack/topo/classes.py", "netstack/topo/values.py",
                  "netstack/topo/sections.py", "netstack/switch/plugins.py",
                  *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "netstack" / "topo" / "validate").glob("*.py"))]


@pytest.mark.parametrize("path", ["daemons/switch.py", *sorted(str(p.relative_to(ROOT)) for p in
                                                                 (ROOT / "netstack" / "runtime").glob("*.py")),
                                  "netstack/switch/core.py", "netstack/switch/port.py", *TOPOLOGY_MODEL,
                                  "netstack/sim/network.py", "netstack/sim/transport.py", "netstack/engine.py"])
def test_generic_layers_name_no_protocol(path):
    """Code, not prose: docstrings and comments may mention the protocols as examples."""
    tree = ast.parse((ROOT / path).read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words += PROTOCOL_WORDS.findall(node.value)
        elif isinstance(node, ast.Name | ast.Attribute):
            words += PROTOCOL_WORDS.findall(node.id if isinstance(node, ast.Name) else node.attr)
        elif isinstance(node, ast.alias):
            words += PROTOCOL_WORDS.findall(node.name)
    assert words == []


def _protocol_of(module: str) -> str | None:
    """The protocol whose package (``netstack.<name>``) or wire format (``headers.<name>``) ``module`` is in."""
    for p in PROTOCOLS:
        for pkg in (f"netstack.{p.name}", f"headers.{p.name}"):
            if module == pkg or module.startswith(pkg + "."):
                return p.name
    return None


def test_the_simulator_imports_no_protocol():
    """netstack/sim is the generic runtime: a protocol's simulated hosts and scenarios live in its own
    package and reach the simulator through the registry (``scenarios=``), never the other way round.
    Every import counts, lazy ones inside functions and TYPE_CHECKING ones too."""
    sim = [m for m in GRAPH if m == "netstack.sim" or m.startswith("netstack.sim.")]
    assert len(sim) > 10
    assert {m: sorted(t for t in GRAPH[m] if _protocol_of(t)) for m in sim if any(map(_protocol_of, GRAPH[m]))} \
        == {}


def test_the_registry_imports_nothing_of_the_project():
    """Everything in it is a module name: reading it costs nothing and cannot make a cycle."""
    assert GRAPH["netstack.protocols"] == set()


def _defines(module: str, name: str) -> bool:
    """``module`` defines ``name`` at its top level: a function, a class, an assignment or an import."""
    names: set[str] = set()
    for node in ast.parse(MODULES[module].read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return name in names


#: registry entries that do not yet have every part the shape asks for: protocol -> the parts missing
KNOWN_GAPS: dict[str, set[str]] = {}
#: the worked examples (netstack/examples/<name>/, docs/extending.md) have a shape of their own, checked
#: by their own test (test_the_worked_example_lives_in_its_folder_and_only_the_registry_names_it)
EXAMPLES = "netstack.examples."
PAPER_PROTOCOLS = [p for p in PROTOCOLS if not (p.control or "").startswith(EXAMPLES)]


@pytest.mark.parametrize("p", PAPER_PROTOCOLS, ids=[p.name for p in PAPER_PROTOCOLS])
def test_every_protocol_has_the_shape_docs_architecture_md_describes(p):
    """A package ``netstack/<name>/``, a control module in it, scenarios, commands, a benchmark, a fuzz
    target and typed modules, every one registered by a module name that exists."""
    def module(name: str | None, part: str, defines: str | None = None) -> bool:
        if part in KNOWN_GAPS.get(p.name, ()):
            return True
        return name is not None and name in MODULES and (defines is None or _defines(name, defines))

    assert f"netstack.{p.name}" in MODULES
    assert module(p.control, "control") and p.control.startswith(f"netstack.{p.name}.")
    assert module(p.scenarios, "scenarios", "SCENARIOS"), f"{p.name}: no scenarios module with SCENARIOS"
    assert all(module(m, "features", "attach") and module(m, "features", "validate_link") for m in p.features.values())
    # declarable in a topology file: a feature of a link end, or a table of its own
    assert p.features or p.sections or "topology" in KNOWN_GAPS.get(p.name, ()), f"{p.name}: no topology declaration"
    assert all(module(m, "sections", "validate_section") and module(m, "sections", "on_up")
               for m in p.sections.values())
    assert all(module(m, "node_kinds", "node_daemon") for m in p.node_kinds.values())
    assert p.commands and all(module(f"netstack.commands.{c}", "commands", "register") for c in p.commands)
    assert p.benches and all(module(m, "benches", "main") for m, _ in p.benches.values())
    assert p.fuzz and all(module("netstack.fuzz", "fuzz", f"run_{t}") for t in p.fuzz)
    assert p.typed and all(module(m, "typed") for m in p.typed)


def test_the_cli_benches_fuzz_and_typing_lists_hold_every_protocols_entries():
    """They are built from the registry (netstack.protocols): nothing a protocol registers is left out."""
    assert all(c in commands() for p in PROTOCOLS for c in p.commands)
    assert all(b in benches() for p in PROTOCOLS for b in p.benches)
    assert all(t in fuzz_targets() for p in PROTOCOLS for t in p.fuzz)
    assert all(m in typed_modules() for p in PROTOCOLS for m in p.typed)
    assert all(command_module(c) in MODULES for c in commands())


#: the verbs every protocol's control module offers (docs/architecture.md "Errors and control verbs")
COMMON_VERBS = ("enable", "disable", "status")


@pytest.mark.parametrize("p", [p for p in PROTOCOLS if p.control], ids=[p.name for p in PROTOCOLS if p.control])
def test_every_control_module_has_the_common_verbs_or_says_why_not(p):
    """enable, disable and status as module-level functions. A protocol without one (it has no such
    concept) has a module-level ``VERBS`` tuple naming the verbs it does have, and the ``#:`` comment
    just above it says why each missing one is missing."""
    path = MODULES[p.control]
    tree = ast.parse(path.read_text())
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    missing = [v for v in COMMON_VERBS if v not in functions]
    if not missing:
        return
    verbs = next((n for n in tree.body if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "VERBS" for t in n.targets)), None)
    assert verbs is not None, f"{p.control}: no {', '.join(missing)}, and no VERBS saying why"
    offered = ast.literal_eval(verbs.value)
    assert isinstance(offered, tuple) and offered and set(offered) <= functions - set(missing), offered
    above = path.read_text().splitlines()[:verbs.lineno - 1]
    why = []
    while above and above[-1].startswith("#"):
        why.insert(0, above.pop())
    assert all(v in " ".join(why) for v in missing), f"{p.control}: the comment above VERBS says nothing of {missing}"


ETHCOUNT = "netstack.examples.ethcount"


def _in_ethcount(module: str | None) -> bool:
    return module is not None and (module == ETHCOUNT or module.startswith(ETHCOUNT + "."))


def _names_in_code(path: Path) -> set[str]:
    """Every string constant (but docstrings), name, attribute and imported name of a module's code."""
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            out.add(node.value)
        elif isinstance(node, ast.Name | ast.Attribute | ast.alias | ast.ImportFrom):
            out.add(getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None)
                    or getattr(node, "module", None) or "")
    return out


def test_the_worked_example_lives_in_its_folder_and_only_the_registry_names_it():
    """docs/extending.md: ethcount is a registry entry whose every part is a module of its folder,
    netstack/examples/ethcount/, defining what that part must: the control module with the daemon's
    handlers, its status and the common verbs; the topology feature; the scenarios; the command
    module; the whole folder typed; a sans-IO engine; a docstring in every file. It has no benchmark
    and no fuzz target (a campaign's runner is a module of netstack/fuzz/, outside any folder). And
    nothing outside the folder imports it, by an import statement (the graph) or by a module name
    in its code (``importlib``), but the registry, which names it without importing it."""
    p = next(p for p in PROTOCOLS if p.name == "ethcount")
    assert ETHCOUNT in MODULES and p.typed == (ETHCOUNT,)
    assert _in_ethcount(p.control) and all(_defines(p.control, f) for f in ("switch_handlers", "switch_status",
                                                                            *COMMON_VERBS))
    assert p.features and all(_in_ethcount(m) and _defines(m, "validate_link") and _defines(m, "attach")
                              for m in p.features.values())
    assert _in_ethcount(p.scenarios) and _defines(p.scenarios, "SCENARIOS")
    assert p.commands and all(_in_ethcount(command_module(c)) and _defines(command_module(c), "register")
                              for c in p.commands)
    assert not (p.benches or p.fuzz or p.node_kinds or p.switch_only_ethertypes)
    test_engines_are_sans_io(f"{ETHCOUNT.replace('.', '/')}/engine.py")  # the rule every engine keeps
    mine = [m for m in MODULES if _in_ethcount(m)]
    assert len(mine) >= 8 and all(ast.get_docstring(ast.parse(MODULES[m].read_text())) for m in mine)
    importers = {m: sorted(t for t in ts if _in_ethcount(t)) for m, ts in GRAPH.items() if not _in_ethcount(m)}
    assert {m: t for m, t in importers.items() if t} == {}
    naming = sorted(m for m, path in MODULES.items() if not _in_ethcount(m) and m != "netstack.protocols"
                    and any(ETHCOUNT in name for name in _names_in_code(path)))
    assert naming == []
    assert any(ETHCOUNT in name for name in _names_in_code(MODULES["netstack.protocols"]))


def test_no_function_is_longer_than_about_80_lines():
    long = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {n} lines")
    assert long == []


#: pointers to files that live outside the repository (the project's private notes), and papers
#: named by a private number ("seed 000", "seed §6"), even when a line break splits them
OUTSIDE = re.compile(r"DESIGN\.md|PROTOCOLS\.md|specs/\w+\.md|/work/shared|\.\./shared|seeds?/\d{3}"
                     r"|\bseed\s+00\d\b|\bseed\s*§|\bthe seed's\b|\bin the seed\b", re.I)


def test_the_repository_refers_to_no_file_it_does_not_contain():
    texts = [p for p in ROOT.rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".toml", ".sh", ".yml", ".cfg")
             and not any(part.startswith(".") or part in ("results", "build") for part in p.relative_to(ROOT).parts)]
    hits = []
    for p in texts:
        if p == Path(__file__):
            continue
        text = p.read_text(errors="replace")
        for m in OUTSIDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            hits.append(f"{p.relative_to(ROOT)}:{line}: {m.group(0)!r}")
    assert hits == [], f"{len(hits)} references, first: {hits[:5]}"


def _anchors(md: Path) -> set[str]:
    """The anchors GitHub makes for a Markdown file's headings: lower case, punctuation but ``-``
    and ``_`` dropped, spaces as ``-``; a repeated heading gets ``-1``, ``-2``..."""
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_markdown_links_point_at_files_and_headings_that_exist():
    broken = []
    for md in [*(ROOT / "docs").glob("*.md"), ROOT / "README.md"]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", md.read_text()):
            if "://" in target or not (target or anchor):
                continue
            path = md.parent / target if target else md
            if not path.exists():
                broken.append(f"{md.relative_to(ROOT)} -> {target}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{md.relative_to(ROOT)} -> {target}#{anchor}: no such heading")
    assert broken == []


def test_the_graph_is_not_empty():
    """(The checks above would pass vacuously on an empty graph.)"""
    assert len(MODULES) > 100 and sum(len(v) for v in GRAPH.values()) > 300
    assert "netstack.linkguardian.feature" in GRAPH["netstack.linkguardian.control"]


def test_every_function_papers_md_names_exists():
    """docs/papers.md maps mechanisms to code: each name it gives (``Class.method``, ``function``,
    ``CONSTANT``) must be defined somewhere in the source, so the map cannot silently rot."""
    defined: set[str] = set()
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                defined.add(node.name)
                defined |= {f"{node.name}.{b.name}" for b in node.body
                            if isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign):
                defined |= {t.id for t in node.targets if isinstance(t, ast.Name)}
                defined |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)}  # self.ack_no = ...
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                defined.add(node.target.id)  # (module constants and record fields alike)
    text = (ROOT / "docs" / "papers.md").read_text()
    names = [t for t in re.findall(r"`([^`]+)`", text)
             if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?", t) and not t.endswith((".py", ".md"))]
    missing = sorted({n for n in names if n not in defined and n.split(".")[-1] not in defined})
    assert len(names) > 40 and missing == []
