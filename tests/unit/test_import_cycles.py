"""No import cycles among T25's own modules, counting imports made only for type checking and
those inside functions: a module that needs another's types says what it needs in a
Protocol of its own (core.control.evidence.Reads, adapters.login.LoginSpec,
t25_tui.tui.merge_flow.Cockpit, ...), so that each module can be read, tested and moved
without its importers."""

from __future__ import annotations

import grimp

PACKAGES = ("core", "adapters", "store", "t25_tui")


def cycles() -> list[list[str]]:
    """The strongly connected groups of modules (Tarjan), those of more than one."""
    graph = grimp.build_graph(*PACKAGES)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # the graph is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_round_a_cycle():
    assert cycles() == []
