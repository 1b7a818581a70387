#!/usr/bin/env python3
"""check_layers.py ROOT [STAMP]: fail when a file includes a header of a layer
above its own, so the layering of docs/architecture.md holds by construction. Two
levels are checked:

  layers (the top folders):
    base <- kernels, compress, schedules <- stages <- runtime
  rooms (the subfolders of a layer), lowest first; a room may include its
  own headers and those of rooms of a lower rank, never one of the same
  rank or above:
    base:     base/ <- io <- formats
    kernels:  kernels/ <- cpu, cuda
    stages:   bpe <- stages/
    compress: core <- codecs, jointsq <- wrappers <- cuda
    runtime:  net, edge <- observe <- plan <- ckpt <- dp <- exec <- cli

In compress/ and runtime/ every source file lives in a room: a new file
goes into the room of its role (or a new room is added here, with its rank).
tests/, bench/ and examples/ may include anything. Writes STAMP on success.
"""
import os
import re
import sys

# what each layer may include, besides itself
ALLOWED = {
    "base": set(),
    "kernels": {"base"},
    "compress": {"base"},
    "schedules": {"base"},
    "stages": {"base", "kernels"},
    "runtime": {"base", "kernels", "compress", "schedules", "stages"},
}
# rank of each room of a layer ("" is the layer's own folder); a room may
# include rooms of a lower rank. Layers not listed have no rooms to check;
# a layer whose "" is absent keeps no source file in its own folder.
ROOMS = {
    "base": {"": 0, "io": 1, "formats": 2},
    "kernels": {"": 0, "cpu": 1, "cuda": 1},
    "stages": {"bpe": 0, "": 1},
    "compress": {"core": 0, "codecs": 1, "jointsq": 1, "wrappers": 2, "cuda": 3},
    "runtime": {"net": 0, "edge": 0, "observe": 1, "plan": 2, "ckpt": 3, "dp": 4,
                "exec": 5, "cli": 6},
}
SOURCES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)


def order(layer):
    """'net, edge <- observe <- ...' for messages"""
    ranks = ROOMS[layer]
    groups = {}
    for room, r in ranks.items():
        groups.setdefault(r, []).append(room or layer + "/")
    return " <- ".join(", ".join(groups[r]) for r in sorted(groups))


def room_of(layer, rest):
    """the room of a path inside a layer: its first folder, or "" for a file
    in the layer's own folder"""
    parts = rest.split("/")
    return parts[0] if len(parts) > 1 else ""


def check_file(root, layer, path, bad):
    rel = os.path.relpath(path, root)
    rooms = ROOMS.get(layer)
    mine = room_of(layer, os.path.relpath(path, os.path.join(root, layer)).replace(os.sep, "/"))
    if rooms is not None and mine not in rooms:
        where = f"{layer}/{mine}/" if mine else f"{layer}/ itself"
        bad.append(f"{rel}: {where} is not a room of {layer}/ ({order(layer)}); "
                   "put the file into the room of its role, or add the room to tools/check_layers.py")
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for m in INCLUDE.finditer(text):
        top, rest = m.group(1), m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        if top != layer:
            if top in ALLOWED and top not in ALLOWED[layer]:
                bad.append(f"{rel}:{line}: {layer}/ may not include {top}/ (a layer above it)")
            continue
        if rooms is None:
            continue
        theirs = room_of(layer, rest)
        if theirs == mine:
            continue
        if theirs not in rooms:
            bad.append(f"{rel}:{line}: includes {top}/{rest}, which is in no room of {layer}/")
        elif rooms[theirs] >= rooms[mine]:
            a = f"{layer}/{mine}/" if mine else f"{layer}/"
            b = f"{layer}/{theirs}/" if theirs else f"{layer}/"
            how = "a room above it" if rooms[theirs] > rooms[mine] else "a room of the same rank"
            bad.append(f"{rel}:{line}: {a} may not include {b} ({how}; {order(layer)})")


def check(root):
    bad = []
    for layer in ALLOWED:
        for dirpath, dirnames, names in os.walk(os.path.join(root, layer)):
            dirnames.sort()
            for name in sorted(names):
                if name.endswith(SOURCES):
                    check_file(root, layer, os.path.join(dirpath, name), bad)
    return bad


def main():
    if len(sys.argv) not in (2, 3):
        print("usage: check_layers.py ROOT [STAMP]", file=sys.stderr)
        return 2
    bad = check(sys.argv[1])
    if bad:
        print("layer check failed: base <- kernels, compress, schedules <- stages <- runtime, "
              "and the rooms inside each (tools/check_layers.py)", file=sys.stderr)
        print("\n".join(bad), file=sys.stderr)
        return 1
    if len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
