#!/usr/bin/env python3
"""check_size.py ROOT [--exec-lines N] [--self-test]: fail when the code
outgrows the limits of issue 23.

  - the executor, runtime/exec/pipeline*.c and pipeline*.h together, holds at
    most N lines (default 1,500, issue 23's goal; what is not the executor's
    job lives in the room of its role: checkpoints in runtime/ckpt, links in
    runtime/edge, the replicas' mechanics in runtime/dp, ...);
  - no function in a source file outside tests/ is over 120 lines, counted
    from its signature's first line to its closing brace (split it by phase).

Functions are found by braces at file level: a '{' at depth 0 whose statement
has a '(' and is not a struct, enum, union, typedef or initializer. Comments,
strings and preprocessor lines are skipped. Prints each violation with its
place and exits 1, else prints the figures and exits 0."""
import glob
import os
import re
import sys
import tempfile

EXEC_LINES = 1500
FUNC_LINES = 120
SOURCES = (".c", ".cu")
SKIP_DIRS = {"tests", "build", ".git", "subprojects"}


def _strip(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return re.sub(r"//.*", "", line)


def functions(text):
    """(name, first line, last line) of each function definition in C text"""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    lines = text.split("\n")
    out, depth, stmt, start, name = [], 0, None, None, None
    for i, raw in enumerate(lines):
        line = _strip(raw)
        if depth == 0 and start is None:
            if not line.strip() or line.lstrip().startswith("#"):
                stmt = None
                continue
            if stmt is None:
                stmt = i
        for ch in line:
            if ch == "{":
                if depth == 0 and start is None:
                    head = " ".join(_strip(x) for x in lines[stmt:i + 1])
                    if "(" in head and not re.match(r"\s*(typedef|struct|enum|union)\b", head) \
                            and "=" not in head.split("(")[0]:
                        start = stmt
                        m = re.search(r"(\w+)\s*\(", head)
                        name = m.group(1) if m else "?"
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    if start is not None:
                        out.append((name, start + 1, i + 1))
                    start = stmt = None
        if depth == 0 and line.rstrip().endswith(";"):
            stmt = None
    return out


def sources(root):
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(("build", ".")))
        for f in sorted(files):
            if f.endswith(SOURCES):
                yield os.path.join(dirpath, f)


def check(root, exec_lines):
    bad = []
    exec_files = sorted(glob.glob(os.path.join(root, "runtime/exec/pipeline*.[ch]")))
    total = 0
    for f in exec_files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            total += fh.read().count("\n")
    if total > exec_lines:
        bad.append(f"runtime/exec/pipeline*: {total} lines in {len(exec_files)} files, over {exec_lines}: move what "
                   "is not the executor's job to the room of its role (runtime/ckpt, runtime/edge, runtime/dp, ...)")
    longest = (0, "")
    for path in sources(root):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for name, a, b in functions(text):
            n = b - a + 1
            if n > FUNC_LINES:
                bad.append(f"{rel}:{a}: {name} is {n} lines, over {FUNC_LINES}: split it by phase")
            if n > longest[0]:
                longest = (n, f"{rel}:{a} {name}")
    return bad, total, longest


def self_test():
    text = ('/* a { comment */\nstatic int f(int a,\n             int b) {\n    if (a) {\n        return "}";\n'
            '    }\n    return b;\n}\nstruct s { int x; };\nstatic const int t[] = {1, 2};\nint g(void) { return 0; }\n')
    got = functions(text)
    want = [("f", 2, 8), ("g", 11, 11)]
    if got != want:
        print(f"FAIL: self-test: functions() gave {got}, want {want}")
        return 1
    with tempfile.TemporaryDirectory() as root:   # a made-up tree: 11 executor lines, one 122-line function
        os.makedirs(os.path.join(root, "runtime/exec"))
        os.makedirs(os.path.join(root, "tests"))
        with open(os.path.join(root, "runtime/exec/pipeline.c"), "w") as f:
            f.write("int a(void) {\n" + "    x();\n" * 9 + "}\n")
        with open(os.path.join(root, "tests/t.c"), "w") as f:   # tests/ is not checked
            f.write("int t(void) {\n" + "    x();\n" * 200 + "}\n")
        with open(os.path.join(root, "runtime/exec/long.c"), "w") as f:
            f.write("static int b(int q)\n{\n" + "    x();\n" * 119 + "}\n")
        bad, total, _ = check(root, 10)
        if total != 11 or len(bad) != 2 or "over 10" not in bad[0] or "long.c:1: b is 122 lines" not in bad[1]:
            print(f"FAIL: self-test: the made-up tree gave {total} lines and {bad}")
            return 1
        if check(root, 11)[0] != bad[1:]:
            print("FAIL: self-test: 11 lines at a limit of 11 were refused")
            return 1
    return 0


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if "--self-test" in sys.argv[2:] and self_test():
        return 1
    exec_lines = EXEC_LINES
    if "--exec-lines" in sys.argv:
        exec_lines = int(sys.argv[sys.argv.index("--exec-lines") + 1])
    bad, total, longest = check(sys.argv[1], exec_lines)
    for b in bad:
        print(f"FAIL: {b}")
    if bad:
        return 1
    print(f"ok: runtime/exec/pipeline* {total} lines (at most {exec_lines}; the goal {EXEC_LINES}); longest function "
          f"outside tests/ {longest[0]} lines ({longest[1]}; at most {FUNC_LINES})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
