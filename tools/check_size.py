#!/usr/bin/env python3
"""check_size.py ROOT [--exec-lines N] [--self-test]: fail when the code
outgrows the limits of issue 23.

  - the executor, runtime/exec/pipeline*.c and pipeline*.h together, holds at
    most N lines (default 1,500, issue 23's goal; what is not the executor's
    job lives in the room of its role: checkpoints in runtime/ckpt, links in
    runtime/edge, the replicas' mechanics in runtime/dp, ...);
  - no function in a source file outside tests/ is over 120 lines, counted
    from its signature's first line to its closing brace (split it by phase);
  - no source file (.c, .h, .cu, .cuh) outside tests/ is over 700 lines
    (split it by role);
  - no folder, tests/ included, holds more than 20 source files (give it
    rooms by role, or move a file to the room it belongs to).

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
FILE_LINES = 700
DIR_FILES = 20
SOURCES = (".c", ".cu")
ALL_SOURCES = (".c", ".h", ".cu", ".cuh")
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


def walk(root, tests):
    """(folder, its source files (ALL_SOURCES), sorted) of every folder under
    root but build trees, hidden ones, subprojects and, unless tests, tests/"""
    skip = SKIP_DIRS if not tests else SKIP_DIRS - {"tests"}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip and not d.startswith(("build", ".")))
        yield dirpath, sorted(f for f in files if f.endswith(ALL_SOURCES))


def sources(root, ext=SOURCES):
    for dirpath, files in walk(root, False):
        for f in files:
            if f.endswith(ext):
                yield os.path.join(dirpath, f)


def check_rooms(root):
    """the folders over DIR_FILES source files and the files outside tests/
    over FILE_LINES lines; the fullest folder and the longest file"""
    bad, fullest, longest = [], (0, ""), (0, "")
    for dirpath, files in walk(root, True):
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        if len(files) > DIR_FILES:
            bad.append(f"{rel}/: {len(files)} source files, over {DIR_FILES}: give it rooms by role, or move a "
                       "file to the room it belongs to")
        fullest = max(fullest, (len(files), rel + "/"))
    for path in sources(root, ALL_SOURCES):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        with open(path, encoding="utf-8", errors="replace") as fh:
            n = len(fh.read().splitlines())
        if n > FILE_LINES:
            bad.append(f"{rel}: {n} lines, over {FILE_LINES}: split it by role")
        longest = max(longest, (n, rel))
    return bad, fullest, longest


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
    return bad + check_rooms(root)[0], total, longest


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
    return self_test_rooms()


def self_test_rooms():
    """a made-up tree at the limits passes; one file or one line more fails"""
    def write(root, rel, lines):
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w") as f:
            f.write("int x;\n" * lines)

    with tempfile.TemporaryDirectory() as root:
        for i in range(DIR_FILES):
            write(root, f"compress/core/f{i}.{'ch'[i % 2]}", 1)
            write(root, f"tests/compress/t{i}.c", 1)
        write(root, "compress/core/notes.txt", 1)           # not a source file
        write(root, "runtime/big.h", FILE_LINES)
        write(root, "tests/big.c", FILE_LINES + 1)          # tests/ may hold long files
        write(root, "build/x/huge.c", FILE_LINES + 1)       # build trees are not checked
        got = check_rooms(root)
        if got[0] or got[1][0] != DIR_FILES or got[2] != (FILE_LINES, "runtime/big.h"):
            print(f"FAIL: self-test: a tree at the limits gave {got}")
            return 1
        write(root, "compress/core/more.cu", 1)
        write(root, "tests/compress/more.cuh", 1)
        write(root, "runtime/big.h", FILE_LINES + 1)
        bad = check_rooms(root)[0]
        want = [f"compress/core/: {DIR_FILES + 1} source files", f"tests/compress/: {DIR_FILES + 1} source files",
                f"runtime/big.h: {FILE_LINES + 1} lines"]
        if len(bad) != 3 or any(not b.startswith(w) for b, w in zip(bad, want)):
            print(f"FAIL: self-test: a tree over the limits gave {bad}")
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
    _, fullest, longest_file = check_rooms(sys.argv[1])
    print(f"ok: runtime/exec/pipeline* {total} lines (at most {exec_lines}; the goal {EXEC_LINES}); longest function "
          f"outside tests/ {longest[0]} lines ({longest[1]}; at most {FUNC_LINES}); longest file outside tests/ "
          f"{longest_file[0]} lines ({longest_file[1]}; at most {FILE_LINES}); fullest folder {fullest[0]} source "
          f"files ({fullest[1]}; at most {DIR_FILES})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
