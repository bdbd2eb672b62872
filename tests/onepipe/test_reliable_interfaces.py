"""The reliable endpoint's seams hold, checked on the source: reliable.py uses the best-effort
:class:`Endpoint` only through its public surface and the subclass interface its docstring lists, and
recovery.py uses the endpoint only through :class:`RecoveryHost` (netstack/onepipe/recovery.py).
What each side may touch is written down once, where the class is; these tests keep the code to it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from netstack.onepipe.endpoint import Endpoint
from netstack.onepipe.params import OnePipeParams
from netstack.onepipe.reliable import ReliableEndpoint

PKG = Path(__file__).resolve().parents[2] / "netstack" / "onepipe"


def _class(path: Path, name: str) -> ast.ClassDef:
    return next(n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef) and n.name == name)


def _self_attrs(node: ast.AST, owner: str = "self") -> set[str]:
    """The attributes read or written on ``owner`` (a name) anywhere under ``node``."""
    return {n.attr for n in ast.walk(node)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == owner}


def _private(names: set[str]) -> set[str]:
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _subclass_interface() -> set[str]:
    doc = Endpoint.__doc__ or ""
    section = doc[doc.index("**Subclass interface.**"):]
    return set(re.findall(r"``(_\w+)``", section))


def test_the_reliable_endpoint_uses_only_the_documented_subclass_interface():
    endpoint = _class(PKG / "endpoint.py", "Endpoint")
    methods = {f.name for f in endpoint.body if isinstance(f, ast.FunctionDef)}
    defined = _private(_self_attrs(endpoint) | methods)
    reliable = _class(PKG / "reliable.py", "ReliableEndpoint")
    used = _private(_self_attrs(reliable)) & defined
    assert used - _subclass_interface() == set(), "reliable.py reaches into Endpoint beyond its subclass interface"
    overridden = _private({f.name for f in reliable.body if isinstance(f, ast.FunctionDef)}) & defined
    assert overridden and overridden <= _subclass_interface(), "reliable.py overrides more than the hooks"


def test_the_subclass_interface_names_members_that_exist():
    assert len(_subclass_interface()) > 10
    assert {n for n in _subclass_interface() if not hasattr(Endpoint, n)} <= {"_now", "_next_tick", "_queue", "_tx"}
    ep = Endpoint(OnePipeParams(), ("10.0.0.1", 40100), 10**12)
    assert all(hasattr(ep, n) for n in _subclass_interface())


def test_no_module_imports_the_endpoints_private_names():
    for path in PKG.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("endpoint"):
                assert not [a.name for a in node.names if a.name.startswith("_")], path.name


def _host_members() -> set[str]:
    host = _class(PKG / "recovery.py", "RecoveryHost")
    return ({n.target.id for n in host.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
            | {n.name for n in host.body if isinstance(n, ast.FunctionDef)})


def test_recovery_uses_the_endpoint_only_through_its_host_port():
    recovery = _class(PKG / "recovery.py", "Recovery")
    via_host = _self_attrs(recovery, "h") | {
        n.attr for n in ast.walk(recovery)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "host"
        and isinstance(n.value.value, ast.Name) and n.value.value.id == "self"}
    assert via_host and via_host <= _host_members(), via_host - _host_members()
    # and nothing private of anything but itself
    others = {n.attr for n in ast.walk(recovery) if isinstance(n, ast.Attribute) and n.attr.startswith("_")
              and not (isinstance(n.value, ast.Name) and n.value.id == "self")}
    assert others == set()


def test_the_reliable_endpoint_is_a_recovery_host():
    ep = ReliableEndpoint(OnePipeParams(), ("10.0.0.1", 40100), 10**12, controller=("10.0.0.9", 40100))
    assert all(hasattr(ep, m) for m in _host_members())
    assert ep.recovery.host is ep
