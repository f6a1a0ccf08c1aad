#!/usr/bin/env python3
"""Layout check (run by ctest): no source file over 800 lines, and no #include that goes
against ARCHITECTURE.md's levels (a lower level never includes a higher one)."""
import pathlib
import re
import sys

LEVEL = {"core": 0, "meta": 1, "ref": 2, "plan": 2, "cpu": 2, "cuda": 2,
         "api": 3, "runtime": 4, "parallel": 4, "layers": 5}
# Same-level folders that must not see each other (backends are peers; ref is independent).
FORBIDDEN_SAME = {("cpu", "cuda"), ("cuda", "cpu"), ("ref", "cpu"), ("ref", "cuda"),
                  ("cpu", "ref"), ("cuda", "ref"), ("plan", "cpu"), ("plan", "cuda"),
                  ("cpu", "plan"), ("cuda", "plan"), ("ref", "plan"), ("plan", "ref"),
                  ("runtime", "parallel"), ("parallel", "runtime")}
EXTS = {".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh", ".py"}
MAX_LINES = 800


def main(root: pathlib.Path) -> int:
    errors = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.suffix not in EXTS or not path.is_file():
            continue
        if rel.parts[0].startswith(("build", ".", "third_party")):
            continue
        text = path.read_text(errors="replace")
        n = text.count("\n")
        if n > MAX_LINES:
            errors.append(f"{rel}: {n} lines (limit {MAX_LINES})")
        if rel.parts[0] == "include":
            for inc in re.findall(r'#include\s+"([^"]+)"', text):
                if not inc.startswith("linattn/"):
                    errors.append(f"{rel}: public header includes internal '{inc}'")
            if re.search(r"#include\s+<cuda", text):
                errors.append(f"{rel}: public header includes a CUDA header")
        if rel.parts[0] != "src" or len(rel.parts) < 3:
            continue
        mine = rel.parts[1]
        if mine not in LEVEL:
            continue
        for inc in re.findall(r'#include\s+"([^"/]+)/[^"]*"', text):
            if inc not in LEVEL:
                continue
            if LEVEL[inc] > LEVEL[mine] or (mine, inc) in FORBIDDEN_SAME:
                errors.append(f"{rel}: level '{mine}' includes '{inc}/...'")
    for e in errors:
        print("check_layout:", e)
    print(f"check_layout: {'FAILED' if errors else 'ok'} ({len(errors)} problems)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
