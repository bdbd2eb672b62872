"""Topology text the tests share (TOML, as a user writes it): the nodes and links that recur
across the test files, and a small builder for their variations (a header with defaults, more
keys or sub-tables on one link).

The shapes:

- the **line** h1 - sw1 - sw2 - h2 (hosts 10.0.0.1/24 and 10.0.0.2/24): nodes in the order h1,
  h2, sw1, sw2 (error messages name them by index: ``nodes[2]`` is sw1), links h1-sw1, sw1-sw2,
  sw2-h2, unnamed (``LINE_NODES + LINE_LINKS``) or named after their ends (:func:`line`);
- the **host pair**: two hosts on one veth link, no switch (:func:`host_pair`).

Each piece is a string ending in a newline, so pieces concatenate; a link's ``extra`` text
(its keys, then its ``[links.…]`` sub-tables) comes right after its ends, as TOML requires.
"""

from __future__ import annotations

import json


def _keys(values: dict[str, str | int | float | bool]) -> str:
    # JSON's strings, numbers and booleans are TOML's
    return "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())


def header(name: str, *, prefix: str | None = None, **defaults: str | int | float) -> str:
    """``[topology]`` (its name, and prefix when given) and, with keyword arguments, ``[defaults]``."""
    text = "[topology]\n" + _keys({"name": name} | ({"prefix": prefix} if prefix else {}))
    return text + ("\n[defaults]\n" + _keys(defaults) if defaults else "") + "\n"


def node(name: str, kind: str, ip: str | None = None, extra: str = "") -> str:
    """``[[nodes]]``: its name, kind and address (when it has one), then ``extra`` keys."""
    addr = f'ip = "{ip}"\n' if ip else ""
    return f'[[nodes]]\nname = "{name}"\nkind = "{kind}"\n{addr}{extra}\n'


def host(name: str, ip: str, extra: str = "") -> str:
    return node(name, "host", ip, extra)


def switch(name: str, extra: str = "") -> str:
    return node(name, "switch", extra=extra)


def link(a: str, b: str, *, named: bool = False, extra: str = "") -> str:
    """``[[links]]`` from ``a`` to ``b``, named ``a-b`` when ``named``, then ``extra``."""
    name = f'name = "{a}-{b}"\n' if named else ""
    return f'[[links]]\n{name}a = "{a}"\nb = "{b}"\n{extra}\n'


H1 = host("h1", "10.0.0.1/24")
H2 = host("h2", "10.0.0.2/24")
H3 = host("h3", "10.0.0.3/24")
SW1 = switch("sw1")
SW2 = switch("sw2")

#: the line's nodes, in the order h1, h2, sw1, sw2
LINE_NODES = H1 + H2 + SW1 + SW2


def line_links(*, named: bool = False, edge1: str = "", core: str = "", edge2: str = "") -> str:
    """The line's links h1-sw1, sw1-sw2, sw2-h2, each followed by its ``extra`` text."""
    return (link("h1", "sw1", named=named, extra=edge1) + link("sw1", "sw2", named=named, extra=core)
            + link("sw2", "h2", named=named, extra=edge2))


#: the line's links, unnamed (the model names them h1-sw1, sw1-sw2, sw2-h2)
LINE_LINKS = line_links()


def line(*, edge1: str = "", core: str = "", edge2: str = "") -> str:
    """The line with named links, each followed by its ``extra`` text (put a :func:`header` first)."""
    return LINE_NODES + line_links(named=True, edge1=edge1, core=core, edge2=edge2)


def host_pair(a: str = "a", b: str = "b", *, net: str = "10.9.0", extra_a: str = "", link_extra: str = "",
              named: bool = True) -> str:
    """Two hosts ``a`` (``net``.1/24) and ``b`` (``net``.2/24) on one link (``a-b`` when ``named``)."""
    return (host(a, f"{net}.1/24", extra_a) + host(b, f"{net}.2/24")
            + link(a, b, named=named, extra=link_extra))


def leaf_spine(name: str = "leafspine", *, leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 2,
               top: str = "ecmp = true\n", switch_extra: dict[str, str] | None = None) -> str:
    """A leaf-spine fabric: every leaf linked to every spine, ``hosts_per_leaf`` hosts on each
    leaf (h1, h2 on leaf1, h3, h4 on leaf2...; 10.0.0.<n>/24), ``top`` in its ``[topology]``
    (ECMP on by default) and ``switch_extra`` keys on a switch's ``[[nodes]]`` entry. Nodes in
    the order hosts, leaves, spines; links host-leaf, then leaf-spine leaf by leaf."""
    extra = switch_extra or {}
    n_hosts = leaves * hosts_per_leaf
    text = f'[topology]\nname = "{name}"\n{top}\n'
    text += "".join(host(f"h{i}", f"10.0.0.{i}/24") for i in range(1, n_hosts + 1))
    sws = [f"leaf{i}" for i in range(1, leaves + 1)] + [f"spine{i}" for i in range(1, spines + 1)]
    text += "".join(switch(s, extra.get(s, "")) for s in sws)
    text += "".join(link(f"h{i}", f"leaf{(i - 1) // hosts_per_leaf + 1}") for i in range(1, n_hosts + 1))
    return text + "".join(link(f"leaf{a}", f"spine{b}") for a in range(1, leaves + 1) for b in range(1, spines + 1))
