"""The kernel sources themselves: no kernel is written twice under two names or in two files."""

from __future__ import annotations

import re

from opencl.program import kernels_dir


def _kernel_bodies() -> dict[str, list[str]]:
    """Each kernel's parameters and body, comments dropped and white space folded -> ``file:name`` of the
    kernels written that way."""
    bodies: dict[str, list[str]] = {}
    for path in sorted(kernels_dir().glob("*.[ch]*")):
        text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", path.read_text(), flags=re.S)
        for match in re.finditer(r"__kernel\s+void\s+(\w+)\s*\(", text):
            depth, end = 0, text.index("{", match.end())
            while True:  # to the brace that closes the body
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                if depth == 0:
                    break
                end += 1
            body = " ".join(text[match.end() : end + 1].split())
            bodies.setdefault(body, []).append(f"{path.name}:{match.group(1)}")
    return bodies


def test_no_kernel_is_written_twice():
    """Attention's dropout product was a copy of the core ``mul`` under another name; a second copy of a
    kernel drifts from the first (a fix made to one only) and is one more program to build."""
    bodies = _kernel_bodies()
    assert sum(len(names) for names in bodies.values()) > 80  # the parser found the kernels
    assert [names for names in bodies.values() if len(names) > 1] == []
